"""Sentry's detectors, verifier and lessons scored against injected failures (`plugins/sentry/{measure,injected,
figures}.py`): its columns in study tables.

The scoring is checked on hand-built injections and detections, then end to end on a tiny episode played live
under Sentry's detectors alone, whose injections and detections are worked out below; the detectors alone must
leave base's trajectory as it was; and the injection must never reach a detector (a planted rule that reads it is
caught).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.agents.noisy import FAILURE_LABELS, NoisyAgent
from playground.core.events import DetectionEvent, ProposalEvent, StepEvent
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Detection, Proposal
from playground.host.manager import Host
from playground.plugins.sentry import detectors, harness
from playground.plugins.sentry.figures import FIGURES, cell_verdicts
from playground.plugins.sentry.harness import SentryPlugin
from playground.plugins.sentry.injected import detections, injections, label_matcher, verdict_truths
from playground.plugins.sentry.measure import Hit, Injection, Matcher, cohen_kappa, score
from playground.run.config import RunConfig
from playground.run.rundir import load_records, record_trace
from playground.run.runner import run
from playground.run.traces import read_events
from playground.testing import ScriptedAgent, play, tiny_env

NOISY = {"invalid": 0.1, "repeat": 0.15, "stall": 0.15, "drift": 0.1, "stop": 0.05}
MODES = {"invalid_action": "action_validity", "unparseable_action": "action_validity",
         "repetition_or_looping": "progress", "planning_stall": "progress", "objective_drift": "grounding"}
DETECT_ONLY = {"hard_repair": False, "soft_repair": False, "update_playbook": False}
FIGURE = {figure.name: figure for figure in FIGURES}


@pytest.fixture(scope="module")
def host():
    return Host(strict=True).load()


def _injected(label: str, streak: int) -> dict:
    mode = next(m for m, (_, name) in FAILURE_LABELS.items() if name == label)
    return {"mode": mode, "failure_type": FAILURE_LABELS[mode][0], "label": label, "streak": streak}


def _write_run(root: Path, episodes: list[tuple[str, str, list[tuple[str, dict]]]], params: dict | None = None,
               interventions: tuple[str, ...] = ("sentry",)) -> Path:
    """A run directory holding the given (harness, task, events) episodes of the tiny env (seed 0), with these
    interventions (Sentry by default)."""
    records = []
    for name, task, events in episodes:
        trace = Path("traces") / name / f"{task}.jsonl"
        header = {"type": "header", "env": "tiny", "task_set": "default", "task_id": task, "seed": 0, "harness": name,
                  "episode_id": f"hand:{name}:{task}", "run_id": "hand", "agent": "scripted", "params": params or {},
                  "interventions": list(interventions)}
        lines = [header, *({"type": kind, **data} for kind, data in events)]
        (root / trace).parent.mkdir(parents=True, exist_ok=True)
        (root / trace).write_text("".join(json.dumps(line) + "\n" for line in lines))
        records.append({"key": f"{name}/{task}", "harness": name, "task_id": task, "status": "stopped",
                        "trace": str(trace)})
    (root / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def _cell(run_dir: Path, harness_name: str) -> tuple[list, object]:
    """A cell's records and its `events(record)` reader, as the study table hands them to a figure."""
    records = [r for r in load_records(run_dir) if r.harness == harness_name]
    return records, lambda record: read_events(record_trace(run_dir, record))


def _figure(name: str, run_dir: Path, harness_name: str):
    return FIGURE[name].of(*_cell(run_dir, harness_name))


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
    """The hand script played live under Sentry's detectors alone (every repair off)."""
    played = play(tiny_env(), ScriptedAgent(HAND_SCRIPT), [SentryPlugin(DETECT_ONLY)], task="tiny-0")
    assert [e["action"] for kind, e in played.events if kind == "step"] == [p.action for p in HAND_SCRIPT[:-1]]
    return _write_run(tmp_path_factory.mktemp("hand"), [("sentry-detect-only", "tiny-0", played.events)])


def test_a_hand_built_trace_gives_the_worked_out_table(hand_run):
    events = read_events(record_trace(hand_run, load_records(hand_run)[0]))
    assert {(h.step, h.label) for h in detections(events)} == {
        (1, "invalid_action"), (4, "repetition_or_looping"), (4, "planning_stall"), (8, "invalid_action"),
        (12, "termination_miscalibration")}
    assert [(i.label, i.first, i.last) for i in sorted(injections(events), key=lambda i: i.first)] == [
        ("invalid_action", 1, 1), ("repetition_or_looping", 2, 3), ("objective_drift", 7, 7),
        ("termination_miscalibration", 12, 12)]

    rows = score(injections(events), detections(events), 3, label_matcher([events]))
    counts = {label: (r.injections, r.detected, r.detections, r.true_positives) for label, r in rows.items()}
    assert counts == {"invalid_action": (1, 1, 2, 1),  # step 8's invalid action was not injected
                      "repetition_or_looping": (1, 1, 1, 1),  # step 4: one step after the streak
                      "planning_stall": (0, 0, 1, 1),  # a progress failure was injected
                      "objective_drift": (1, 0, 0, 0),
                      "termination_miscalibration": (1, 1, 1, 1)}
    # the study table's columns: macro over the labels where each is defined
    assert _figure("detector_recall", hand_run, "sentry-detect-only") == pytest.approx(0.75)  # 1, 1, 0, 1
    assert _figure("detector_precision", hand_run, "sentry-detect-only") == pytest.approx(0.875)  # .5, 1, 1, 1
    assert _figure("detector_f1", hand_run, "sentry-detect-only") == pytest.approx((2 / 3 + 1 + 0 + 1) / 4)
    assert _figure("verifier_agreement", hand_run, "sentry-detect-only") is None  # nothing repaired

    strict = score(injections(events), detections(events), 0, label_matcher([events], "label"))
    assert (strict["repetition_or_looping"].detected, strict["repetition_or_looping"].true_positives) == (0, 0)
    assert strict["planning_stall"].true_positives == 0


def test_a_cell_without_sentry_or_without_injections_has_no_detector_figures(tmp_path):
    clean = play(tiny_env(), ScriptedAgent([]), [SentryPlugin(DETECT_ONLY)], task="tiny-0")
    run_dir = _write_run(tmp_path / "clean", [("sentry-detect-only", "tiny-0", clean.events)])
    assert _figure("detector_recall", run_dir, "sentry-detect-only") is None  # nothing was injected
    played = play(tiny_env(), ScriptedAgent(HAND_SCRIPT), task="tiny-0")
    base = _write_run(tmp_path / "base", [("base", "tiny-0", played.events)], interventions=())
    assert _figure("detector_recall", base, "base") is None  # injected, but Sentry did not run: nothing to score


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



def test_verdicts_are_paired_with_whether_the_injected_failure_ended(tmp_path):
    run_dir = _write_run(tmp_path, [("sentry", "tiny-0", _verifier_events())], params={"horizon": 3})
    events = read_events(record_trace(run_dir, load_records(run_dir)[0]))
    found = verdict_truths(events, window=3, matches=label_matcher([events]))
    assert [(v.repair_step, v.injected_label, v.ended, v.recurred, v.truth) for v in found] == [
        (2, "repetition_or_looping", True, False, True),
        (5, "planning_stall", False, False, False),
        (12, None, None, None, None)]
    assert len(cell_verdicts([events])) == 3
    assert _figure("verifier_agreement", run_dir, "sentry") == 0.5  # 2 verdicts about an injected failure
    assert _figure("verifier_kappa", run_dir, "sentry") == pytest.approx(0.0)  # it said "resolved" every time
    assert _figure("lesson_precision", run_dir, "sentry") is None  # no verdict stored a lesson


# -- the detectors alone leave base's trajectory; the injection is never seen ----------------------------------


@pytest.fixture(scope="module")
def noisy_run(host, tmp_path_factory):
    out = tmp_path_factory.mktemp("noisy") / "run"
    tasks = [f"tiny-{20_000 + i}" for i in range(12)]
    run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                        harnesses=["base", "sentry-detect-only", "sentry"], out=str(out), agent_options=NOISY))
    return out


def _actions(run_dir: Path, harness_name: str) -> dict[str, list[str]]:
    records, events = _cell(run_dir, harness_name)
    return {r.task_id: [e.action for e in events(r) if isinstance(e, StepEvent)] for r in records}


def test_the_detectors_alone_play_base_trajectory_and_are_scored(noisy_run):
    assert _actions(noisy_run, "sentry-detect-only") == _actions(noisy_run, "base")
    records, events = _cell(noisy_run, "sentry-detect-only")
    traces = [events(r) for r in records]
    assert sum(isinstance(e, DetectionEvent) for trace in traces for e in trace) > 10
    assert not any(isinstance(e, ProposalEvent) and e.attempt > 0 for trace in traces for e in trace)  # no re-ask
    recall = _figure("detector_recall", noisy_run, "sentry-detect-only")
    assert recall is not None and 0 < recall <= 1
    assert _figure("detector_recall", noisy_run, "base") is None
    assert _figure("verifier_agreement", noisy_run, "sentry") is not None  # the repairs got verdicts


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


def test_a_rule_reading_the_injection_is_caught(monkeypatch):
    monkeypatch.setattr(detectors, "PROGRESS_DETECTORS", (*detectors.PROGRESS_DETECTORS, detect_leak))
    marked = Proposal("t", "look", injected=_injected("planning_stall", 1))
    context = tiny_env()
    observation, info = context.reset(options={"task": "tiny-0"})
    view = _context(observation, info)
    assert not any(d.detector == "leak" for d in SentryPlugin({}).detect_failures(view, marked))  # Sentry blinds it
    played = play(tiny_env(), NoisyAgent(**NOISY), [SentryPlugin(DETECT_ONLY)], task="tiny-20001", seed=1)
    assert not any(kind == "detection" and e["detector"] == "leak" for kind, e in played.events)  # live, too

    # the check has power: a Sentry that handed its detectors the proposal whole is caught
    monkeypatch.setattr(harness, "blind_proposal", lambda proposal: proposal)
    assert any(d.detector == "leak" for d in SentryPlugin({}).detect_failures(view, marked))


def _context(observation: str, info: dict):
    from playground.core.payloads import EpisodeIds, StepContext

    return StepContext(EpisodeIds("r", "e", "tiny", "tiny-0", "h"), 3, info["goal"], observation,
                       tuple(info["admissible_actions"]), (), action_kinds=dict(info["action_kinds"]))


# -- the committed study run re-derives the published figures -------------------------------------------------

RUN = Path(__file__).resolve().parent.parent / "docs" / "runs" / "sentry-instrument-detectors"
# the macro rows (recall, precision, F1) and the TextWorld verifier agreement the retired `sentry detectors` command
# published (offline replay over `base`, docs/results/detectors.md): the live detections under
# `sentry-detect-only` give them
PUBLISHED = {"textworld": (0.86, 0.98, 0.91), "alfworld": (0.80, 0.88, 0.81), "webshop": (0.75, 0.96, 0.77)}


def test_the_committed_study_run_gives_the_published_table(tmp_path):
    import shutil
    import tarfile
    from dataclasses import asdict

    from playground.core.study_file import load_study
    from playground.run.study import study_table

    host = Host().load()
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    for packed in run_dir.glob("*/traces.tar.gz"):
        with tarfile.open(packed) as archive:
            archive.extractall(packed.parent, filter="data")
    figures = {figure.name: figure for figure in host.figures}
    cells = study_table(load_study(host.studies.get("sentry-instrument-detectors").path), run_dir, figures)
    table = json.loads(json.dumps([{**asdict(cell), "success": cell.success} for cell in cells]))
    assert table == json.loads((run_dir / "table.json").read_text())
    rows = {(row["grid"], row["harness"]): row["figures"] for row in table}
    for grid, published in PUBLISHED.items():
        measured = rows[(grid, "sentry-detect-only")]
        assert tuple(round(measured[key], 2) for key in ("detector_recall", "detector_precision", "detector_f1")) \
            == published, grid
    assert round(rows[("textworld", "sentry")]["verifier_agreement"], 2) == 0.92  # 23 of 25
    # and some of its per-label rows (recall, precision): TextWorld's stall and loop, ALFWorld's over-exploration
    textworld, alfworld = rows[("textworld", "sentry-detect-only")], rows[("alfworld", "sentry-detect-only")]
    assert round(textworld["detector_recall_by_label[planning_stall]"], 2) == 0.79
    assert round(textworld["detector_precision_by_label[repetition_or_looping]"], 2) == 0.89
    assert round(alfworld["detector_precision_by_label[over_exploration]"], 2) == 0.29
    assert alfworld["detector_recall_by_label[objective_drift]"] == 0.0
