"""Sentry's detectors and verifier measured against injected failures (`plugins/sentry/{measure,truth,bench}.py`).

The scoring is checked on hand-built injections and detections, then end to end on a
hand-built tiny trace whose injections and detections are worked out below; the offline
replay must give exactly the detections Sentry made live; and the injection must never
reach a detector (a planted rule that reads it is caught).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.agents.noisy import FAILURE_LABELS, NoisyAgent
from playground.core.events import DetectionEvent
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Detection, Proposal
from playground.host.manager import Host
from playground.plugins.sentry import detectors, harness, truth
from playground.plugins.sentry.bench import measure_run, mode_matcher, verifier_agreement
from playground.plugins.sentry.harness import SentryPlugin
from playground.plugins.sentry.measure import Hit, Injection, Matcher, cohen_kappa, confusions, score
from playground.plugins.sentry.truth import ALL_RULES, TruthError, replay_rules, traces, verdict_truths
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play, tiny_env
from tests.conftest import cli

NOISY = {"invalid": 0.1, "repeat": 0.15, "stall": 0.15, "drift": 0.1, "stop": 0.05}
MODES = {"invalid_action": "action_validity", "unparseable_action": "action_validity",
         "repetition_or_looping": "progress", "planning_stall": "progress", "objective_drift": "grounding"}


@pytest.fixture(scope="module")
def host():
    return Host(strict=True).load()


def _injected(label: str, streak: int) -> dict:
    mode = next(m for m, (_, name) in FAILURE_LABELS.items() if name == label)
    return {"mode": mode, "failure_type": FAILURE_LABELS[mode][0], "label": label, "streak": streak}


def _write_run(root: Path, episodes: list[tuple[str, str, list[tuple[str, dict]]]], params: dict | None = None) -> Path:
    """A run directory holding the given (harness, task, events) episodes of the tiny env (seed 0)."""
    records = []
    for name, task, events in episodes:
        trace = Path("traces") / name / f"{task}.jsonl"
        header = {"type": "header", "env": "tiny", "task_set": "default", "task_id": task, "seed": 0, "harness": name,
                  "episode_id": f"hand:{name}:{task}", "run_id": "hand", "agent": "scripted", "params": params or {}}
        lines = [header, *({"type": kind, **data} for kind, data in events)]
        (root / trace).parent.mkdir(parents=True, exist_ok=True)
        (root / trace).write_text("".join(json.dumps(line) + "\n" for line in lines))
        records.append({"key": f"{name}/{task}", "harness": name, "task_id": task, "status": "stopped",
                        "trace": str(trace)})
    (root / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


# -- the matching rule -----------------------------------------------------------------------------------


def test_the_matching_rule_counts_true_positives_and_detected_injections():
    matches = Matcher(lambda label: MODES.get(label, label), "mode")
    injections = [Injection("e1", "repetition_or_looping", 1, 2, 4),  # steps 2-4
                  Injection("e1", "invalid_action", 2, 9, 9),
                  Injection("e2", "objective_drift", 1, 0, 0)]
    hits = [Hit("e1", 4, "repetition_or_looping", "d"),  # inside the streak: TP, detects it
            Hit("e1", 7, "planning_stall", "d"),  # 7 - 3 = 4 <= last step 4: TP by mode (progress)
            Hit("e1", 8, "repetition_or_looping", "d"),  # 8 - 3 = 5 > 4: too late, FP
            Hit("e1", 1, "repetition_or_looping", "d"),  # before the streak: FP
            Hit("e2", 9, "invalid_action", "d"),  # the invalid injection is in e1, not e2: FP
            Hit("e1", 9, "invalid_action", "d")]  # TP
    rows = score(injections, hits, window=3, matches=matches)
    loop = rows["repetition_or_looping"]
    assert (loop.injections, loop.detected, loop.detections, loop.true_positives) == (1, 1, 3, 1)
    assert loop.precision == pytest.approx(1 / 3) and loop.recall == 1.0 and loop.f1 == pytest.approx(0.5)
    assert (rows["planning_stall"].detections, rows["planning_stall"].true_positives) == (1, 1)
    assert rows["planning_stall"].recall is None  # nothing injected under that label
    assert (rows["invalid_action"].detections, rows["invalid_action"].true_positives) == (2, 1)
    drift = rows["objective_drift"]
    assert (drift.injections, drift.detected, drift.precision, drift.recall, drift.f1) == (1, 0, None, 0.0, 0.0)
    assert confusions(injections, hits, 3, matches) == {"repetition_or_looping <- (none)": 2,
                                                        "invalid_action <- (none)": 1}

    exact = score(injections, hits, window=3, matches=Matcher(matches.mode_of, "label"))
    assert exact["planning_stall"].true_positives == 0  # another label of the same mode no longer counts
    narrow = score(injections, hits, window=0, matches=matches)
    assert narrow["planning_stall"].true_positives == 0  # step 7 is 3 steps past the streak
    with pytest.raises(ValueError, match="window"):
        score(injections, hits, window=-1, matches=matches)


def test_cohen_kappa():
    assert cohen_kappa([(True, True), (True, True), (False, False), (True, False)]) == pytest.approx(0.5)
    assert cohen_kappa([(True, False), (False, True)]) == pytest.approx(-1.0)
    assert cohen_kappa([(True, True), (True, True)]) is None  # chance agreement is 1: undefined
    assert cohen_kappa([]) is None


# -- a hand-built trace, end to end ----------------------------------------------------------------------

# tiny-0: hall - kitchen (old map) - study - garden (brass lamp, silver coin); the goal is the silver coin
HAND_SCRIPT = [
    Proposal("on plan", "go east"),                                                   # 0
    Proposal("x", "og east", injected=_injected("invalid_action", 1)),               # 1 invalid: detected (TP)
    Proposal("x", "look", injected=_injected("repetition_or_looping", 2)),           # 2 loop streak 2-3
    Proposal("x", "look", injected=_injected("repetition_or_looping", 2)),           # 3
    Proposal("x", "look"),                                                           # 4 repetition + stall detected
    Proposal("on plan", "go east"),                                                  # 5
    Proposal("on plan", "go east"),                                                  # 6
    Proposal("x", "take brass lamp", injected=_injected("objective_drift", 3)),      # 7 drift: missed
    Proposal("on plan", "take silver coin"),                                         # 8 invalid (hands full): FP
    Proposal("on plan", "go west"), Proposal("on plan", "go west"), Proposal("on plan", "go west"),
    Proposal("x", "", finish=True, injected=_injected("termination_miscalibration", 4)),  # 12 early stop: TP
]


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory):
    played = play(tiny_env(), ScriptedAgent(HAND_SCRIPT), task="tiny-0")
    return _write_run(tmp_path_factory.mktemp("hand"), [("base", "tiny-0", played.events)])


def _figures(report: dict, detector: str, label: str) -> tuple:
    r = report["detectors"][detector]["labels"][label]
    return r["injections"], r["detected"], r["detections"], r["true_positives"]


def test_a_hand_built_trace_gives_the_worked_out_table(host, hand_run):
    episode = traces(hand_run, "base")[0]
    replayed = replay_rules(host, episode)
    assert {(h.step, h.label) for h in replayed.hits if h.detector == ALL_RULES} == {
        (1, "invalid_action"), (4, "repetition_or_looping"), (4, "planning_stall"), (8, "invalid_action"),
        (12, "termination_miscalibration")}

    report = measure_run(host, hand_run)  # window 3, labels matched by mode
    assert report["injections"] == {"invalid_action": 1, "objective_drift": 1, "repetition_or_looping": 1,
                                    "termination_miscalibration": 1}
    assert _figures(report, "sentry", "invalid_action") == (1, 1, 2, 1)  # step 8's invalid action was not injected
    assert _figures(report, "sentry", "repetition_or_looping") == (1, 1, 1, 1)  # step 4: one step after the streak
    assert _figures(report, "sentry", "planning_stall") == (0, 0, 1, 1)  # a progress failure was injected
    assert _figures(report, "sentry", "objective_drift") == (1, 0, 0, 0)
    assert _figures(report, "sentry", "termination_miscalibration") == (1, 1, 1, 1)
    invalid = report["detectors"]["sentry"]["labels"]["invalid_action"]
    assert (invalid["precision"], invalid["recall"], invalid["f1"]) == (0.5, 1.0, pytest.approx(2 / 3))
    assert report["detectors"]["sentry"]["macro"]["recall"] == pytest.approx(0.75)  # 1, 1, 0, 1 (stall: none)
    assert set(report["detectors"]["stall"]["labels"]) == {"planning_stall"}  # a rule: the labels it reported
    assert "objective_drift" in report["silent_rules"]
    assert report["false_positives_near"] == {"invalid_action <- objective_drift": 1}  # step 8, after the drift

    strict = measure_run(host, hand_run, window=0, match="label")
    assert _figures(strict, "sentry", "repetition_or_looping") == (1, 0, 1, 0)  # step 4 is past the streak
    assert _figures(strict, "sentry", "planning_stall") == (0, 0, 1, 0)


def test_the_command_prints_the_table_and_refuses_what_it_cannot_measure(capsys, hand_run, tmp_path):
    code, out, _ = cli(capsys, "sentry", "detectors", str(hand_run), "--window", "0")
    assert code == 0
    assert "| tiny:default | sentry | invalid_action | 1 | 1 | 1.00 | 2 | 1 | 0.50 | 0.67 |" in out
    code, _, err = cli(capsys, "sentry", "detectors", str(tmp_path / "nowhere"))
    assert code == 2 and "not a run directory" in err
    clean = _write_run(tmp_path / "clean", [("base", "tiny-0", play(tiny_env(), ScriptedAgent([]),
                                                                     task="tiny-0").events)])
    code, _, err = cli(capsys, "sentry", "detectors", str(clean))
    assert code == 2 and "no injected failure" in err
    code, _, err = cli(capsys, "sentry", "detectors", str(hand_run), "--judge-local")
    assert code == 2 and "--llm-sample" in err


# -- the verifier against what the injected failure did ----------------------------------------------------


def _verifier_events() -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = [("reset", {"goal": "g", "observation": "o"})]

    def step(n: int, *proposals: dict | None, repair: str | None = None) -> None:
        for attempt, injected in enumerate(proposals):
            events.append(("proposal", {"step": n, "attempt": attempt, "thought": "t", "action": "a", "finish": False,
                                        **({"injected": injected} if injected else {})}))
            if attempt == 0 and repair:
                events.append(("intervention", {"step": n, "attempt": 0, "kind": "soft_repair",
                                                "detections": [{"labels": [repair]}]}))
        events.append(("step", {"step": n, "action": "a", "observation": f"o{n}", "valid_action": True}))

    loop, stall = _injected("repetition_or_looping", 1), _injected("planning_stall", 2)
    step(0, None)
    step(1, loop)
    step(2, loop, None, repair="repetition_or_looping")  # the advice lands at once: truly resolved
    step(3, None)
    step(4, None)
    step(5, stall, stall, repair="planning_stall")  # the stall goes on through the horizon: not resolved
    step(6, stall)
    step(7, stall)
    step(8, None)
    step(12, None, repair="repetition_or_looping")  # nothing injected near it: no ground truth
    for repair_step in (2, 5, 12):
        events.append(("verification", {"plugin": "sentry", "repair_step": repair_step, "failure_type": "progress",
                                        "verdict": "resolved"}))
    return events


def test_verdicts_are_paired_with_whether_the_injected_failure_ended(host, tmp_path):
    run_dir = _write_run(tmp_path, [("sentry", "tiny-0", _verifier_events())], params={"horizon": 3})
    episode = traces(run_dir, "sentry")[0]
    found = verdict_truths(episode, window=3, matches=mode_matcher(host, "mode"), horizon=3)
    assert [(v.repair_step, v.injected_label, v.ended, v.recurred, v.truth) for v in found] == [
        (2, "repetition_or_looping", True, False, True),
        (5, "planning_stall", False, False, False),
        (12, None, None, None, None)]
    agreement = verifier_agreement([episode], 3, mode_matcher(host, "mode"))
    assert (agreement["verdicts"], agreement["about_injected"], agreement["agreement"]) == (3, 2, 0.5)
    assert agreement["kappa"] == pytest.approx(0.0)  # the verifier said "resolved" every time


# -- the replay is what Sentry saw live; the injection is never seen ----------------------------------------


@pytest.fixture(scope="module")
def noisy_run(host, tmp_path_factory):
    out = tmp_path_factory.mktemp("noisy") / "run"
    tasks = [f"tiny-{20_000 + i}" for i in range(12)]
    run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                        harnesses=["base", "sentry"], out=str(out), agent_options=NOISY))
    return out


def test_the_offline_replay_gives_the_detections_sentry_made_live(host, noisy_run):
    compared = 0
    for episode in traces(noisy_run, "sentry"):
        live = {(e.step, label) for e in episode.events if isinstance(e, DetectionEvent) and e.attempt == 0
                for label in e.labels}
        replayed = {(h.step, h.label) for h in replay_rules(host, episode).hits if h.detector == ALL_RULES}
        assert replayed == live, episode.path
        compared += len(live)
    assert compared > 10
    report = measure_run(host, noisy_run)
    assert report["episodes"] == 12 and report["verifier"]["verdicts"] > 0


def detect_leak(context, proposal, window):
    """A planted leak: a rule that reads the injected ground truth off the proposal."""
    injected = getattr(proposal, "injected", None)
    if injected:
        return Detection("leak", "progress", (injected["label"],), 1.0, "read the injection")
    return None


class Spy:
    """Records every proposal a plugin is handed."""

    def __init__(self) -> None:
        self.seen: list[Proposal] = []

    @hookimpl
    def detect_failures(self, context, proposal):
        self.seen.append(proposal)

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        self.seen.append(proposal)

    @hookimpl
    def step_completed(self, outcome):
        self.seen.append(outcome.proposal)


def test_the_loop_never_hands_the_injection_to_a_plugin():
    injected = 0
    for i in range(8):
        spy = Spy()
        played = play(tiny_env(), NoisyAgent(**NOISY), [spy, SentryPlugin({})], task=f"tiny-{20_000 + i}", seed=i)
        injected += sum("injected" in p for p in played.of("proposal"))
        assert spy.seen and all(p.injected is None for p in spy.seen)
    assert injected > 5  # the trace has it: the agent did inject


def test_a_rule_reading_the_injection_is_caught(host, noisy_run, monkeypatch):
    monkeypatch.setattr(detectors, "PROGRESS_DETECTORS", (*detectors.PROGRESS_DETECTORS, detect_leak))
    marked = Proposal("t", "look", injected=_injected("planning_stall", 1))
    context = tiny_env()
    observation, info = context.reset(options={"task": "tiny-0"})
    sentry = SentryPlugin({})
    view = _context(observation, info)
    assert not any(d.detector == "leak" for d in sentry.detect_failures(view, marked))  # Sentry blinds the proposal
    monkeypatch.setattr(harness, "blind_proposal", lambda proposal: proposal)
    assert any(d.detector == "leak" for d in SentryPlugin({}).detect_failures(view, marked))  # else it is caught
    assert not any(h.detector == "leak" for e in traces(noisy_run, "base") for h in replay_rules(host, e).hits)

    # the check has power: a replay that handed the detectors the recorded proposal event whole is caught
    monkeypatch.setattr(truth, "detector_proposal",
                        lambda event: Proposal(event.thought, event.action, event.finish, injected=event.injected))
    assert any(h.detector == "leak" for e in traces(noisy_run, "base") for h in replay_rules(host, e).hits)


def _context(observation: str, info: dict):
    from playground.core.payloads import EpisodeIds, StepContext

    return StepContext(EpisodeIds("r", "e", "tiny", "tiny-0", "h"), 3, info["goal"], observation,
                       tuple(info["admissible_actions"]), (), action_kinds=dict(info["action_kinds"]))


def test_measuring_a_run_without_the_harness_says_which_it_has(host, hand_run):
    with pytest.raises(TruthError, match="no finished episode of harness 'sentry'.*base"):
        traces(hand_run, "sentry")
