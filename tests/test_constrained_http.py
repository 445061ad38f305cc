"""Issue 56: constrained actions through an endpoint. With `--agent llm --agent-option constrained=true` each action is
asked for by a `json_schema` response format (a free thought, then the action as an enum of the step's admissible
actions); a server that refuses `json_schema` gets the client's once-per-client fallback (`json_object` with the
schema) and the run still plays; `constrained=false` sends no response format. Against the scripted
OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import logging

from playground.agents.http_model import HTTPChatModel
from playground.agents.llm import (
    NO_LIST_NOTE,
    SCHEMA_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    TEMPLATE_NOTE,
    LLMAgent,
    action_schema,
    make_llm_agent,
    parse_schema_reply,
)
from playground.core.payloads import AgentView, InterventionMessage
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import play, tiny_env
from playground.testing.openai_server import Reply, ScriptedChatServer

THOUGHT = "The key opens the way, so I act on the last option"


def _enum(response_format: dict) -> list[str]:
    """The action enum of a request's response format (json_schema, or json_object with the schema alongside)."""
    schema = response_format["json_schema"]["schema"] if response_format["type"] == "json_schema" \
        else response_format["schema"]
    return schema["properties"]["action"]["enum"]


def schema_model(body: dict) -> str:
    """A server that decodes under the request's schema: the thought, then the enum's last action."""
    return json.dumps({"thought": THOUGHT, "action": _enum(body["response_format"])[-1]})


def refusing_json_schema(body: dict) -> Reply | str:
    """A server like one that knows only `json_object` (llama-cpp-python's): HTTP 400 for a `json_schema` request."""
    if body.get("response_format", {}).get("type") == "json_schema":
        return Reply(status=400, raw='{"error": {"message": "unsupported response_format type: json_schema"}}')
    return schema_model(body)


def _agent(server: ScriptedChatServer, **options) -> LLMAgent:
    return make_llm_agent(base_url=server.base_url, model="m", retries=0, cache_dir="off", **options)


def test_constrained_llm_agent_sends_the_admissible_actions_as_a_json_schema_enum():
    with ScriptedChatServer(default=schema_model) as server:
        played = play(tiny_env(), _agent(server, constrained=True), task="tiny-3", max_steps=3)
        requests = list(server.requests)
    proposals, steps = played.of("proposal"), played.of("step")
    assert len(proposals) == len(requests) == 3  # one call a step: the thought and the action together
    for body, proposal, step in zip(requests, proposals, steps):
        admissible = proposal["admissible_actions"]
        assert len(admissible) > 1
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "action", "schema": action_schema(admissible), "strict": True}}
        schema = body["response_format"]["json_schema"]["schema"]
        assert list(schema["properties"]) == ["thought", "action"]  # the thought first: reason, then pick
        assert schema["required"] == ["thought", "action"] and schema["additionalProperties"] is False
        assert _enum(body["response_format"]) == admissible
        assert body["messages"][0]["content"] == SCHEMA_SYSTEM_PROMPT
        assert (proposal["thought"], proposal["action"]) == (THOUGHT, admissible[-1])
        assert step["valid_action"]


def test_a_server_refusing_json_schema_gets_the_fallback_once_per_run_and_the_run_plays(tmp_path):
    tasks = ["tiny-20000", "tiny-20001"]
    with ScriptedChatServer(default=refusing_json_schema) as server:
        summary = run(Host().load(), RunConfig(
            env="tiny", task_set="default", split="test", tasks=tasks, agent="llm", harnesses=["base"],
            max_steps=4, out=str(tmp_path / "run"),
            agent_options={"base_url": server.base_url, "model": "m", "retries": 0, "cache_dir": "off",
                           "constrained": True}))
        requests = list(server.requests)
    formats = [body["response_format"]["type"] for body in requests]
    assert formats[0] == "json_schema" and formats.count("json_schema") == 1  # refused once, never asked again
    assert formats[1:] == ["json_object"] * (len(requests) - 1) and len(requests) > len(tasks)
    for body in requests[1:]:  # the schema rides along (llama.cpp's server decodes under it)
        assert body["response_format"]["schema"]["properties"]["action"]["enum"] == _enum(body["response_format"])
        valid_line = next(line for line in body["messages"][1]["content"].splitlines()
                          if line.startswith("Valid actions: "))
        assert _enum(body["response_format"]) == valid_line.removeprefix("Valid actions: ").split(", ")
    base = summary["harnesses"]["base"]
    assert base["episodes"] == len(tasks) and summary["unfinished"] == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == len(tasks) and all(record["invalid_actions"] == 0 for record in records), records


def test_unconstrained_llm_agent_sends_no_response_format():
    reply = "Thought: look around\nAction: look"
    for options in ({"constrained": False}, {}):
        with ScriptedChatServer(default=reply) as server:
            played = play(tiny_env(), _agent(server, **options), task="tiny-3", max_steps=2)
            requests = list(server.requests)
        assert len(requests) == 2 and not any("response_format" in body for body in requests)
        assert all(body["messages"][0]["content"] == SYSTEM_PROMPT for body in requests)
        assert [(p["thought"], p["action"]) for p in played.of("proposal")] == [("look around", "look")] * 2


def test_a_restricting_message_narrows_the_enum():
    with ScriptedChatServer(default=schema_model) as server:
        agent = _agent(server, constrained=True)
        message = InterventionMessage("hard_repair", "Pick one of these.", actions=("open box", "no such"),
                                      restrict=True)
        proposal = agent.propose(AgentView("goal", "here", (), ("look", "open box", "go east"), 0, message))
        assert _enum(server.requests[0]["response_format"]) == ["open box"]
    assert proposal.action == "open box"


def test_templates_or_no_list_play_unconstrained_and_say_so_once(caplog):
    with ScriptedChatServer(default="Thought: search\nAction: search[red shoes]") as server:
        agent = _agent(server, constrained=True)
        with caplog.at_level(logging.WARNING, logger="playground.agents.llm"):
            for step in range(2):
                proposal = agent.propose(AgentView("buy shoes", "a shop", (), ("search[...]", "click[back]"), step))
                assert proposal.action == "search[red shoes]"
            agent.propose(AgentView("goal", "no list here", (), None, 2))
        assert not any("response_format" in body for body in server.requests)
    notes = [record.getMessage() for record in caplog.records if record.name == "playground.agents.llm"]
    assert notes == [f"agent with constrained=true: {TEMPLATE_NOTE}", f"agent with constrained=true: {NO_LIST_NOTE}"]


def test_think_over_an_endpoint_asks_for_the_action_alone():
    thought_then_action = ["Thought: the box first", json.dumps({"action": "open box"})]
    with ScriptedChatServer(thought_then_action) as server:
        agent = LLMAgent(HTTPChatModel(server.base_url, "m", retries=0), constrained=True, think=True)
        proposal = agent.propose(AgentView("goal", "here", (), ("look", "open box"), 0))
        first, second = server.requests
    assert "response_format" not in first and first["stop"] == ["\n"]
    assert second["response_format"]["json_schema"]["schema"] == action_schema(["look", "open box"], thought=False)
    assert (proposal.thought, proposal.action) == ("the box first", "open box")


def test_parse_schema_reply():
    assert parse_schema_reply('{"thought": "go", "action": "look"}', ("look",)) == ("go", "look")
    assert parse_schema_reply('Sure: {"action": "look"}', ("look",)) == ("", "look")
    assert parse_schema_reply("Thought: go\nAction: look", ("look",)) == ("go", "look")  # a server that ignored it
    assert parse_schema_reply("look", ("look",)) == ("", "look")
    assert parse_schema_reply('{"thought": "no action"}', ("look",)) is None
