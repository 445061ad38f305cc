"""Issue 24: the tokens the interventions' model roles spend (Sentry's LLM judges, the baselines' reflectors,
curators, ...) are counted in the episode records, the summary and the table, apart from the agent's; one
`ask_structured` serves every judge. Against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json

from playground.agents.http_model import HTTPChatModel
from playground.agents.structured import ask_structured
from playground.host.manager import Host
from playground.plugins.baselines.ace import AcePlugin
from playground.plugins.baselines.judge import Judge
from playground.run.report import format_table
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play, tiny_env
from playground.testing.openai_server import Reply, ScriptedChatServer, chat_response

DEEP = '{"a": ' + "[" * 20_000 + "]" * 20_000 + "}"  # parses only past Python's recursion limit


RESOLVED = {"type": "object", "properties": {"resolved": {"type": "boolean"}}, "required": ["resolved"]}


def test_one_ask_structured_serves_sentry_and_the_baselines_and_survives_a_reply_nested_too_deep():
    from playground.plugins.baselines import judge
    from playground.plugins.sentry import judges

    assert judges.ask_structured is ask_structured and judge.ask_structured is ask_structured
    with ScriptedChatServer(default=DEEP) as server:
        reply = ask_structured(HTTPChatModel(server.base_url, "judge"), "test", "system", "user", RESOLVED)
        assert reply.value is None and reply.error == "no JSON object in the reply"  # raised RecursionError
        assert Judge({"judge_base_url": server.base_url, "judge_model": "judge"}, "ace").ask(
            "ace.test", "s", "u", RESOLVED) is None
    with ScriptedChatServer(default='Sure: {"resolved": true} and more') as server:
        reply = ask_structured(HTTPChatModel(server.base_url, "judge"), "test", "system", "user", RESOLVED)
        assert reply.value == {"resolved": True} and reply.usable and reply.mode == "json_schema"


def _judge(body: dict) -> Reply:
    """Sentry's judges' answers (a stall detected, always worth an intervention, every repair resolved), each reply
    costing 7 + 3 tokens."""
    system = body["messages"][0]["content"]
    if "needs an intervention" in system:
        content = '{"intervene": true, "why": "it idles"}'
    elif "recovered" in system:
        content = '{"resolved": true, "evidence": "it moved on"}'
    elif "diagnose" in system:
        content = json.dumps({"failure": True, "failure_type": "progress", "labels": ["planning_stall"],
                              "confidence": 0.9, "evidence": "idling"})
    else:
        content = json.dumps({"trigger": "when idling", "principle": "act"})
    return Reply(raw=json.dumps(chat_response(content, prompt_tokens=7, completion_tokens=3)))


def test_judge_tokens_reach_the_records_summary_and_table_apart_from_the_agents(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", "off")  # the servers count every call: none answered from disk
    agent_replies = "Thought: look around\nAction: look"  # 10 + 5 tokens a reply
    with ScriptedChatServer(default=agent_replies) as agent, ScriptedChatServer(default=_judge) as judge:
        summary = run(Host().load(), RunConfig(
            env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"], agent="llm",
            harnesses=["base", "sentry-llm"], out=str(tmp_path / "run"), max_steps=6,
            params={"judge_base_url": judge.base_url, "judge_model": "judge", "cooldown": 0},
            agent_options={"base_url": agent.base_url, "model": "agent", "retries": 0}))
        judge_calls, agent_calls = len(judge.requests), len(agent.requests)
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert judge_calls > 0
    for record in records:
        events = [json.loads(line) for line in (tmp_path / "run" / record["trace"]).read_text().splitlines()]
        calls = [e for e in events if e["type"] == "judge_call"]
        proposals = [e for e in events if e["type"] == "proposal"]
        assert record["judge_prompt_tokens"] == 7 * len(calls) and record["judge_completion_tokens"] == 3 * len(calls)
        assert record["prompt_tokens"] == 10 * len(proposals) and record["completion_tokens"] == 5 * len(proposals)
        assert (record["harness"] == "base") == (not calls)
        assert ("judge_replies" in record) == bool(calls)  # only where the episode made judge calls
        if calls:
            assert sum(r["calls"] for r in record["judge_replies"].values()) == len(calls)
    base, sentry = summary["harnesses"]["base"], summary["harnesses"]["sentry-llm"]
    assert base["judge_prompt_tokens"] == 0 and base["judge_tokens_per_episode"] is None
    assert "judge_replies" not in base and sum(r["calls"] for r in sentry["judge_replies"].values()) == judge_calls
    assert all(r["unusable"] == 0 and r["modes"] == {"json_schema": r["calls"]} for r in sentry["judge_replies"].values())
    assert sentry["judge_prompt_tokens"] == 7 * judge_calls and sentry["judge_completion_tokens"] == 3 * judge_calls
    assert sentry["judge_tokens_per_episode"] == 10 * judge_calls / 2
    assert base["prompt_tokens"] + sentry["prompt_tokens"] == 10 * agent_calls  # no judge call counted as the agent's
    header, _, base_row, sentry_row = format_table(summary).splitlines()[:4]
    assert "tokens/ep" in header and "judge/ep" in header
    assert f"{10 * judge_calls / 2:,.0f}" in sentry_row.split() and "-" in base_row.split()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["harnesses"]["sentry-llm"] == sentry


def test_a_baselines_reflector_and_curator_are_counted_as_judge_calls(tmp_path):
    reflection = json.dumps({"insights": [{"section": "VERIFICATION CHECKLIST", "content": "Check the goal."}]})
    curation = json.dumps({"operations": []})
    with ScriptedChatServer([reflection, curation]) as server:
        ace = AcePlugin({"judge_base_url": server.base_url, "judge_model": "judge"})
        played = play(tiny_env(), ScriptedAgent(["look"] * 3), [ace], task="tiny-3",
                      playbook=str(tmp_path / "pb.sqlite"), max_steps=3)
    calls = played.of("judge_call")
    assert [{k: v for k, v in call.items() if k != "reply"} for call in calls] == [
        {"role": role, "prompt_tokens": 10, "completion_tokens": 5, "usable": True, "mode": "json_schema"}
        for role in ("ace.reflector", "ace.curator")]
    assert calls[0]["reply"] == {"insights": [{"section": "VERIFICATION CHECKLIST", "content": "Check the goal."}]}
    assert [kind for kind, _ in played.events][-3:] == ["judge_call", "judge_call", "end"]  # at episode_finished
