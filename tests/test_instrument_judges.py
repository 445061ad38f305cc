"""The failure-injection instrument as the judges' model (issue 52): Sentry's roles are answered from the
instrument's injected truth at a set accuracy, graded in the trace, while Sentry itself stays blind.

- at accuracy 1 every graded answer is right, at 0 every one is wrong, in between about that share;
- the roles receive the requests an LLM would get: the verifier's shows the goal (checked on a server on
  127.0.0.1 whose replies the instrument grades: the `judge_base_url` delegate);
- the plugins never see the truth: scrubbing every truth-bearing field from what Sentry receives (the expert
  plan in the reset info, `Proposal.injected`) changes none of its decisions, and a planted leak is caught;
- compliance: guidance naming an admissible action is taken at `compliance`, never with `take_named` off;
- the machinery carries information (small scale): with right judges and full compliance Sentry beats base;
  with a coin for a verifier the lessons' precision is near the base rate, with a right one it is 1.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from playground.agents.noisy import NoisyAgent
from playground.agents.structured import agent_model_shared
from playground.core.events import (
    InterventionEvent,
    JudgeCallEvent,
    LessonEvent,
    ResetEvent,
    VerificationEvent,
    fields_of,
)
from playground.core.hookspecs import hookimpl
from playground.core.payloads import AgentView, InterventionMessage, Proposal
from playground.host.manager import Host
from playground.plugins.sentry.harness import SentryPlugin
from playground.plugins.sentry.judge_quality import judge_grades, lesson_precision, success_against
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import play
from playground.testing.openai_server import ScriptedChatServer
from playground.testing.tiny import TinyEnv
from tests.test_sentry_blind import Recorder

FAILING = {"repeat": 0.25, "stall": 0.15, "drift": 0.1, "stop": 0.08, "invalid": 0.05}
TASKS = [f"tiny-{20000 + i}" for i in range(12)]


def graded(result) -> list[dict]:
    return [dict(e.graded) for e in result.events_of(JudgeCallEvent) if e.graded]


def play_sentry(agent: NoisyAgent, task: str, tmp_path: Path, make=None, params=None):
    """One tiny episode under Sentry (built by `make()`, default `SentryPlugin(params)`), which is built, as the
    runner builds it, while the agent's model is shared."""
    params = dict(params or {})
    with agent_model_shared(agent.model):
        plugin = make() if make is not None else SentryPlugin(params)
    return play(TinyEnv(expert=True), agent, plugins=[plugin], task=task, max_steps=30,
                params=params, playbook=str(tmp_path / "playbook.sqlite"), harness="sentry")


@pytest.mark.parametrize("accuracy", [1.0, 0.0])
def test_every_answer_is_right_at_accuracy_one_and_wrong_at_zero(tmp_path, accuracy):
    grades = []
    for task in TASKS:
        grades += graded(play_sentry(NoisyAgent(**FAILING, judge_accuracy=accuracy), task, tmp_path))
    kinds = {g["kind"] for g in grades}
    assert {"detector", "need_check", "verifier"} <= kinds
    assert all(g["correct"] == (accuracy == 1.0) for g in grades), grades[:3]
    assert all(g["by"] == "instrument" for g in grades)


def test_a_kind_of_its_own_accuracy_and_the_share_right_in_between(tmp_path):
    grades = []
    for task in TASKS:
        agent = NoisyAgent(**FAILING, judge_accuracy=0.7, verifier_accuracy=1.0)
        grades += graded(play_sentry(agent, task, tmp_path))
    detector = [g["correct"] for g in grades if g["kind"] == "detector"]
    assert all(g["correct"] for g in grades if g["kind"] == "verifier")
    assert len(detector) > 100 and 0.6 < sum(detector) / len(detector) < 0.8


def test_the_rules_stay_without_a_judge_accuracy(tmp_path):
    result = play_sentry(NoisyAgent(**FAILING), TASKS[0], tmp_path)
    assert not result.events_of(JudgeCallEvent)
    assert NoisyAgent().model is None


def test_bad_accuracy_and_judge_options_are_refused():
    with pytest.raises(ValueError, match="judge_accuracy"):
        NoisyAgent(judge_accuracy=1.5)
    with pytest.raises(ValueError, match="compliance"):
        NoisyAgent(compliance=2)
    with pytest.raises(ValueError, match="go together"):
        NoisyAgent(judge_base_url="http://127.0.0.1:1/v1")


def _server_reply(body: dict) -> str:
    """A model that always says failure (looping), intervene, resolved: a reply of each role's schema."""
    text = json.dumps(body)
    if "sentry.detector" in text:
        return json.dumps({"failure": True, "failure_type": "progress", "labels": ["repetition_or_looping"],
                           "confidence": 0.9, "evidence": "it repeats"})
    if "sentry.need_check" in text:
        return json.dumps({"intervene": True, "why": "repeating"})
    if "sentry.verifier" in text:
        return json.dumps({"resolved": True, "evidence": "moved on"})
    return json.dumps({"trigger": "when looping", "principle": "try another action"})


def test_a_real_endpoint_answers_and_is_graded_and_the_verifier_sees_the_goal(tmp_path):
    with ScriptedChatServer(default=_server_reply) as server:
        agent = NoisyAgent(**FAILING, judge_base_url=server.base_url, judge_model="test-model")
        result = play_sentry(agent, TASKS[1], tmp_path)
        requests = [json.dumps(r) for r in server.requests]
    grades = graded(result)
    assert grades and all(g["by"] == "model" for g in grades)
    # it always says "failure": right exactly on the steps that made the injected failure it names
    detector = [g for g in grades if g["kind"] == "detector"]
    assert any(g["correct"] for g in detector) and not all(g["correct"] for g in detector)
    goal = result.events_of(ResetEvent)[0].goal
    verifier = [r for r in requests if "sentry.verifier" in r]
    assert verifier and all(f"Goal: {goal}" in r for r in verifier)
    assert all("repaired at step" in r for r in verifier)


# -- blindness: the truth never reaches Sentry ----------------------------------------------------------------

TRUTH_INFO = ("expert_plan", "won", "score", "max_score", "reward")


def scrub(value):
    """`value` with every truth-bearing field removed: `injected` on proposals, the expert plan and grades in
    info mappings (all the way down through frozen payloads)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "injected":
                changes[f.name] = None
            elif f.name == "env_info":
                changes[f.name] = {k: v for k, v in item.items() if k not in TRUTH_INFO}
            elif dataclasses.is_dataclass(item) or isinstance(item, tuple):
                changes[f.name] = scrub(item)
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, tuple):
        return tuple(scrub(v) for v in value)
    return value


class Scrubbed(Recorder):
    """Sentry receiving every hook payload with the truth-bearing fields removed (`scrub`), or as given; the hooks
    are the blind test's recorder's (tests/test_sentry_blind.py)."""

    def __init__(self, inner: SentryPlugin, on: bool) -> None:
        super().__init__(inner)
        self.on = on

    def _pass(self, hook: str, **kwargs):
        if self.on:
            kwargs = {k: scrub(v) if not isinstance(v, list) else [scrub(x) for x in v] for k, v in kwargs.items()}
        return super()._pass(hook, **kwargs)


class PlanReadingSentry(SentryPlugin):
    """A planted leak: repairs whenever the proposal is not the expert plan's next action."""

    plan: tuple = ()

    @hookimpl
    def episode_started(self, start):
        self.plan = tuple(start.env_info.get("expert_plan") or ())
        return super().episode_started(start)

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        if self.plan and proposal.action != self.plan[0] and context.attempt == 0:
            return super().decide_intervention(context, dataclasses.replace(proposal, finish=True), detections)
        return super().decide_intervention(context, proposal, detections)


def decisions(result, root: Path) -> list[str]:
    """Sentry's interventions, verdicts and lessons, as written to the trace (its playbook's folder as ROOT)."""
    return [json.dumps(fields_of(e), sort_keys=True, default=str).replace(str(root), "ROOT")
            for e in result.trace if isinstance(e, (InterventionEvent, VerificationEvent, LessonEvent))]


@pytest.mark.parametrize("make", [SentryPlugin, PlanReadingSentry])
def test_sentry_decides_the_same_with_the_truth_scrubbed_and_a_leak_is_caught(tmp_path, make):
    differ = made = 0
    for i, task in enumerate(TASKS[:8]):
        runs = []
        for on in (False, True):
            agent = NoisyAgent(**FAILING, judge_accuracy=0.86, take_named=True)
            root = tmp_path / f"{i}-{on}"
            runs.append(decisions(play_sentry(agent, task, root, make=lambda on=on: Scrubbed(make({}), on)), root))
        differ += runs[0] != runs[1]
        made += len(runs[0])
    assert made > 10, "Sentry made hardly a decision: the test would have no power"
    if make is SentryPlugin:
        assert differ == 0
    else:
        assert differ > 0, "a Sentry reading the expert plan was not caught"


# -- compliance ---------------------------------------------------------------------------------------------------


def view_with(message_text: str, actions=("go east", "take key", "look")) -> AgentView:
    message = InterventionMessage("soft_repair", message_text, "progress", (), ())
    return AgentView("goal", "obs", (), tuple(actions), 3, message, extras={"expert_plan": ["take key"]})


@pytest.mark.parametrize("take_named,compliance,expected", [(True, 1.0, "go east"), (False, 1.0, "take key"),
                                                            (True, 0.0, "take key")])
def test_guidance_naming_an_admissible_action_is_taken_at_compliance(take_named, compliance, expected):
    agent = NoisyAgent(stop=0, invalid=0, malformed=0, repeat=0, stall=0, drift=0, take_named=take_named,
                       compliance=compliance)
    agent.reset("t", 0)
    proposal: Proposal = agent.propose(view_with("Lessons: What resolved it: 'go east'. Your last steps: look"))
    assert proposal.action == expected


# -- the machinery carries information (small scale) ---------------------------------------------------------------


def run_cell(tmp_path: Path, env: str, task_set: str, tasks: list[str], options: dict, harnesses: list[str],
             max_steps: int = 40) -> Path:
    out = tmp_path / "run"
    run(Host(strict=True).load(), RunConfig(env=env, task_set=task_set, split="test", tasks=tasks, agent="noisy",
                                            harnesses=harnesses, out=str(out), max_steps=max_steps,
                                            agent_options={"take_named": True, **options}))
    return out


def test_a_coin_for_a_verifier_keeps_lessons_near_the_base_rate_and_a_right_one_keeps_them_true(tmp_path):
    tasks = [f"tiny-{20000 + i}" for i in range(60)]
    host = Host(strict=True).load()
    figures = {}
    for accuracy in (0.5, 1.0):
        out = run_cell(tmp_path / str(accuracy), "tiny", "default", tasks,
                       {**FAILING, "judge_accuracy": 1.0, "verifier_accuracy": accuracy}, ["sentry"])
        figures[accuracy] = lesson_precision(out, "sentry")
        assert judge_grades(out, "sentry")["verifier"]["accuracy"] == pytest.approx(accuracy, abs=0.12)
    coin, right = figures[0.5], figures[1.0]
    assert coin["lessons"] >= 30 and right["lessons"] >= 20
    assert abs(coin["precision"] - coin["base_rate"]) < 0.15
    assert right["precision"] == 1.0 and right["base_rate"] < 0.95


@pytest.mark.slow
def test_with_right_judges_and_full_compliance_sentry_beats_base_on_textworld(tmp_path):
    tasks = [f"custom-{20000 + i}" for i in range(40)]
    options = {"invalid": 0.08, "malformed": 0.02, "repeat": 0.06, "stall": 0.06, "drift": 0.06, "stop": 0.05,
               "judge_accuracy": 1.0, "compliance": 1.0}
    out = run_cell(tmp_path, "textworld", "custom", tasks, options, ["base", "sentry"])
    against = success_against(out, "sentry")
    assert against["c"] > against["b"] and against["p"] < 0.05, against


def test_a_shadow_model_is_asked_the_same_requests_and_graded_while_the_instrument_drives(tmp_path):
    with ScriptedChatServer(default=_server_reply) as server:
        agent = NoisyAgent(**FAILING, judge_accuracy=1.0, shadow="endpoint", shadow_kinds="need_check,verifier",
                           judge_base_url=server.base_url, judge_model="test-model")
        result = play_sentry(agent, TASKS[1], tmp_path)
        asked = [json.dumps(r) for r in server.requests]
    grades = graded(result)
    assert all(g["correct"] and g["by"] == "instrument" for g in grades)  # the run follows the instrument
    shadowed = [g for g in grades if "shadow" in g]
    assert {g["kind"] for g in shadowed} == {"need_check", "verifier"}
    assert len(asked) == len(shadowed) and not any("sentry.detector" in r for r in asked)
    # the shadow always says "intervene" and "resolved": right exactly where the truth says so
    assert all(g["shadow"]["correct"] == bool(g["truth"].get("intervene", g["truth"].get("resolved")))
               for g in shadowed)
