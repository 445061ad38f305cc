"""The HTTP model client and the LLM agent against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from playground.host.manager import Host
from playground.agents.llm import LLMAgent, parse_reply
from playground.agents.chat import LLMError
from playground.agents.http_model import EndpointUnreachable, HTTPChatModel
from playground.plugins.playbook.store import Playbook
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import play, tiny_env
from playground.testing.openai_server import Reply, ScriptedChatServer


def model(server, **kw) -> HTTPChatModel:
    return HTTPChatModel(server.base_url, "test-model", backoff=0.01, **kw)


def test_retries_on_500_and_429_then_succeeds():
    script = [Reply(status=500, raw="{}"), Reply(status=429, raw="{}", headers={"Retry-After": "0"}), "Action: look"]
    with ScriptedChatServer(script) as server:
        reply = model(server).complete([{"role": "user", "content": "hi"}])
    assert reply.text == "Action: look" and len(server.requests) == 3
    assert reply.prompt_tokens == 10 and reply.completion_tokens == 5


def test_gives_up_after_retries_and_does_not_retry_client_errors():
    with ScriptedChatServer(default=lambda body: Reply(status=503, raw="{}")) as server:
        with pytest.raises(LLMError, match="gave up after 3 attempts"):
            model(server, retries=2).complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 3  # the first try and two retries, no more
    with ScriptedChatServer(default=lambda body: Reply(status=503, raw="{}")) as server:
        with pytest.raises(LLMError, match="gave up after 1 attempts"):
            model(server, retries=0).complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 1
    with ScriptedChatServer([Reply(status=400, raw='{"error": "bad model"}')]) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            model(server).complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 1


def test_timeout_is_retried_then_reported():
    with ScriptedChatServer(default=lambda body: Reply(content="late", delay=0.5)) as server:
        with pytest.raises(LLMError, match="gave up after 2 attempts; last error: .*(timed out|no complete reply within)"):
            model(server, timeout=0.1, retries=1).complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 2
    script = [Reply(content="late", delay=0.5), "Action: look"]
    with ScriptedChatServer(script) as server:  # a timeout then an answer: the retry answers
        reply = model(server, timeout=0.3, retries=1).complete([{"role": "user", "content": "hi"}])
        assert reply.text == "Action: look" and len(server.requests) == 2


def test_malformed_json_is_a_clear_error():
    with ScriptedChatServer([Reply(raw="this is not json")]) as server:
        with pytest.raises(LLMError, match="not JSON"):
            model(server, retries=0).complete([{"role": "user", "content": "hi"}])
    with ScriptedChatServer([Reply(raw='{"choices": []}')]) as server:
        with pytest.raises(LLMError, match="no choices"):
            model(server, retries=0).complete([{"role": "user", "content": "hi"}])


def test_temperature_seed_and_model_are_sent_and_the_cache_answers_repeats(tmp_path):
    with ScriptedChatServer(["Action: look"]) as server:
        m = model(server, temperature=0.3, seed=7, cache_dir=str(tmp_path))
        first = m.complete([{"role": "user", "content": "hi"}])
        second = m.complete([{"role": "user", "content": "hi"}])
    assert server.requests[0]["temperature"] == 0.3 and server.requests[0]["seed"] == 7
    assert server.requests[0]["model"] == "test-model"
    assert len(server.requests) == 1 and second.cached and second.text == first.text


@pytest.mark.parametrize("text, expected", [
    ("Thought: the key is east\nAction: go east", ("the key is east", "go east")),
    ("**Thought:** hmm\n**Action:** `take red key`.", ("hmm", "take red key")),
    ("go east", ("", "go east")),
    ("I think I should go somewhere nice", None),
])
def test_parse_reply(text, expected):
    assert parse_reply(text, ("go east", "look", "take red key")) == expected


def test_unparseable_reply_is_reasked_once_then_becomes_an_invalid_action():
    replies = ["I would love to help!", "Sure thing, here is my plan", "Thought: x\nAction: look"]
    with ScriptedChatServer(replies, default="Thought: x\nAction: look") as server:
        result = play(tiny_env(), LLMAgent(model(server)), task="tiny-3", max_steps=2)
    first = result.of("step")[0]
    assert first["valid_action"] is False and first["action"] == "Sure thing, here is my plan"
    assert server.requests[1]["messages"][-1]["content"].startswith("Your reply did not follow the format")
    proposals = result.of("proposal")
    assert proposals[0]["prompt_tokens"] == 20 and proposals[0]["completion_tokens"] == 10


def test_finish_and_token_accounting_reach_the_summary(tmp_path):
    replies = ["Thought: walk\nAction: look", "Thought: done\nAction: finish"] * 2
    with ScriptedChatServer(replies) as server:
        summary = run(Host().load(), RunConfig(
            env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"], agent="llm",
            harnesses=["base"], out=str(tmp_path / "run"),
            agent_options={"base_url": server.base_url, "model": "test-model", "retries": 0}))
    base = summary["harnesses"]["base"]
    assert base["prompt_tokens"] == 40 and base["completion_tokens"] == 20
    assert base["statuses"] == {"stopped": 2}


def test_a_dead_endpoint_leaves_the_episode_unfinished_not_the_run_down(tmp_path):
    with ScriptedChatServer() as server:
        url = server.base_url
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"], agent="llm",
                       harnesses=["base"], out=str(tmp_path / "run"),
                       agent_options={"base_url": url, "model": "m", "retries": 0, "timeout": 2.0})
    summary = run(Host().load(), config)
    assert summary["unfinished"] == 2 and summary["harnesses"]["base"]["episodes"] == 0
    assert not (tmp_path / "run" / "episodes.jsonl").exists() and (tmp_path / "run" / "unfinished.jsonl").exists()
    config.out, config.record_errors = str(tmp_path / "recorded"), True  # as it ended, when asked for
    assert run(Host().load(), config)["harnesses"]["base"]["errors"] == 2


def _looping_model(body: dict) -> str:
    """Always loops on `look`, whatever it is told."""
    return "Thought: look again\nAction: look"


def test_exposure_only_retrieved_lessons_after_a_detection(tmp_path):
    playbook = tmp_path / "pb.sqlite"
    with Playbook(playbook) as pb:
        pb.add("progress", ["repetition_or_looping"], "looping on look", "LOOP-LESSON: try a new action")
        pb.add("grounding", ["hallucination"], "naming unseen things", "FOREIGN-LESSON: act on what you saw")

    def requests_for(harness: str) -> list[str]:
        # rule judges: every request the server sees is then the agent's (the scripted model only plays the agent)
        rules = {"detector": "rules", "verifier": "rules", "summariser": "template", "need_judge": "rules"}
        with ScriptedChatServer(default=_looping_model) as server:
            run(Host().load(), RunConfig(
                env="tiny", task_set="default", split="test", tasks=["tiny-20003"], agent="llm", max_steps=8,
                harnesses=[harness], out=str(tmp_path / harness), playbook=str(playbook), params=rules,
                agent_options={"base_url": server.base_url, "model": "m", "retries": 0}))
        return [json.dumps(r["messages"]) for r in server.requests]

    sentry = requests_for("sentry")
    assert not any("FOREIGN-LESSON" in r for r in sentry)
    assert "LOOP-LESSON" not in sentry[0]
    assert any("LOOP-LESSON" in r for r in sentry)
    persistent = requests_for("sentry-persistent")
    assert all("FOREIGN-LESSON" in r for r in persistent)


def test_llm_agent_needs_an_endpoint():
    from playground.agents.llm import make_llm_agent

    with pytest.raises(ValueError, match="--llm-base-url"):
        make_llm_agent()


def _judge(body: dict) -> str:
    system = body["messages"][0]["content"]
    if "recovered" in system:
        return 'Sure: {"resolved": true, "evidence": "it moved on"}'
    if "diagnose" in system:
        return json.dumps({"failure": True, "failure_type": "progress", "labels": ["planning_stall"],
                           "confidence": 0.9, "evidence": "judge saw idling"})
    return json.dumps({"trigger": "JUDGE-TRIGGER when idling", "principle": "JUDGE-PRINCIPLE act"})


def test_llm_judges_replace_the_rule_parts_of_sentry(tmp_path):
    with ScriptedChatServer(default=_judge) as judge:
        summary = run(Host().load(), RunConfig(
            env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001", "tiny-20002"],
            agent="noisy", harnesses=["sentry-llm"], out=str(tmp_path / "run"), max_steps=25,
            params={"judge_base_url": judge.base_url, "judge_model": "judge", "cooldown": 0},
            agent_options={"stall": 0.3}))
        requests = [json.dumps(r["messages"]) for r in judge.requests]
    events = [json.loads(line) for trace in (tmp_path / "run" / "traces" / "sentry-llm").glob("*.jsonl")
              for line in trace.read_text().splitlines()]
    assert any(e["type"] == "detection" and e["detector"] == "sentry-llm-judge" for e in events)
    verdicts = [e for e in events if e["type"] == "verification"]
    assert verdicts and all(v["evidence"].startswith("judge:") for v in verdicts)
    lessons = [e for e in events if e["type"] == "lesson"]
    assert lessons and all(lesson["trigger"] == "JUDGE-TRIGGER when idling" for lesson in lessons)
    assert summary["harnesses"]["sentry-llm"]["lessons_added"] == len(lessons)
    verifier_requests = [r for r in requests if "recovered" in r]
    assert verifier_requests and not any("reward" in r or '"won"' in r for r in verifier_requests)


def test_llm_judge_without_a_model_is_refused_before_the_run(tmp_path):
    from playground.run.config import RunConfigError
    from playground.run.validation import check_config

    config = RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-1"], agent="noisy",
                       harnesses=["sentry-llm"], out=str(tmp_path / "run"))
    with pytest.raises(RunConfigError, match="judge_base_url"):
        check_config(Host().load(), config)


def test_template_actions_parse_and_constrain():
    from playground.agents.llm import parse_reply, render_prompt
    from playground.agents.local_model import _grammar_alternative
    from playground.core.payloads import AgentView

    assert parse_reply("search[red running shoes]", ("search[...]",)) == ("", "search[red running shoes]")
    assert parse_reply("search[...]", ("search[...]",)) is None  # the template itself is not an action
    assert _grammar_alternative("click[Buy Now]") == '"click[Buy Now]"'
    assert _grammar_alternative("search[...]").startswith('"search[" ')
    view = AgentView("buy shoes", "WebShop", (), ("search[...]",), 0)
    assert "In search[...] replace ... with your own words." in render_prompt(view, 5, 800)[1]["content"]


def test_an_unreachable_endpoint_is_tried_once_per_request_after_one_request_spent_its_retries(monkeypatch):
    """A request that could not connect on any try marks the endpoint unreachable: the next request tries once, not
    its whole schedule; a reply clears the mark. A refusal followed by an answer is retried as before."""
    refusals, tries = [0], []
    real = HTTPChatModel._post_once

    def refuse_first(self, *args):
        tries.append(1)
        if refusals[0] > 0:
            refusals[0] -= 1
            raise ConnectionRefusedError(111, "Connection refused")
        return real(self, *args)

    monkeypatch.setattr(HTTPChatModel, "_post_once", refuse_first)
    hi = [{"role": "user", "content": "hi"}]
    with ScriptedChatServer(default=lambda body: "Action: look") as server:
        client = model(server, retries=3)
        client.limiter.unreachable = None  # a port an earlier test's dead server used may be marked
        refusals[0] = 2  # a server that comes up within the retries is retried, as before
        assert client.complete(hi).text == "Action: look" and len(tries) == 3
        refusals[0], tries[:] = 100, []
        with pytest.raises(LLMError, match="gave up after 4 attempts; last error: ConnectionRefusedError"):
            client.complete(hi)
        assert len(tries) == 4 and client.limiter.unreachable
        with pytest.raises(EndpointUnreachable, match="unreachable .*not retried until the endpoint answers"):
            client.complete(hi)
        assert len(tries) == 5  # one try, not four
        refusals[0] = 0
        assert client.complete(hi).text == "Action: look" and client.limiter.unreachable is None
        refusals[0], tries[:] = 2, []
        assert client.complete(hi).text == "Action: look" and len(tries) == 3  # the whole schedule again
