"""DARC's LLM diagnoser with the failure-injection instrument as its judge (`darc diagnose --diagnoser instrument`):
at accuracy 1 it names the injected dominant mode of every failed episode, at 0 never, and the diagnoser's
requests carry no ground truth."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from playground.agents.instrument_judge import TraceInstrumentJudge
from playground.core.events import ProposalEvent
from playground.core.instrument import InstrumentState, JudgeRequest, StepRecord
from playground.host.manager import Host
from playground.plugins.darc.instrument import answer_diagnosis
from playground.plugins.darc.llm_diagnosis import ROLE, diagnosis_schema
from playground.run.rundir import load_records, record_trace
from playground.run.traces import read_events
from tests.conftest import cli
from tests.darc_runs import play

# several failure kinds at once, so that failed episodes differ in their dominant mode
RATES = {"invalid": "0.25", "malformed": "0", "repeat": "0.05", "stall": "0.05", "drift": "0.2", "stop": "0.1"}
COMMON = ["--env", "tiny", "--agent", "noisy", "--episodes", "16", "--quiet",
          *(x for mode, rate in RATES.items() for x in ("--agent-option", f"{mode}={rate}"))]


def truth_of(events, labels) -> str | None:
    """The injected dominant mode, written out here independently of the answerer: the mode of the most injected
    steps (the last proposal of each step), a tie going to the mode injected latest."""
    last = {e.step: e for e in events if isinstance(e, ProposalEvent)}
    counts: Counter[str] = Counter()
    latest: dict[str, int] = {}
    for step in sorted(last):
        injected = last[step].injected
        if injected:
            mode = labels.mode_of(injected["failure_type"])
            counts[mode] += 1
            latest[mode] = step
    if not counts:
        return None
    top = max(counts.values())
    return max((m for m in counts if counts[m] == top), key=lambda m: latest[m])


def profile_with(capsys, tmp_path, accuracy: str) -> tuple[list[dict], list[str | None]]:
    """Profile with the instrument as the diagnoser; the failed episodes and each one's injected dominant mode."""
    out = tmp_path / f"acc{accuracy}"
    run_dir = play(capsys, out / "profile-run", COMMON, ["darc-profile:sentry"])
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), "--modes", "all", "--diagnoser", "instrument",
                       "--diagnoser-accuracy", accuracy)
    assert code == 0, err
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
    assert diagnosis["llm"]["model"] == f"instrument (accuracy {float(accuracy):g})"
    labels = Host().load().labels
    records = {r.task_id: r for r in load_records(run_dir)}
    failed = [e for e in diagnosis["per_episode"] if not e["won"]]
    truths = [truth_of(read_events(record_trace(run_dir, records[e["task_id"]])), labels) for e in failed]
    return failed, truths


def test_at_accuracy_one_the_diagnoser_names_every_failed_episodes_injected_mode(capsys, tmp_path):
    failed, truths = profile_with(capsys, tmp_path, "1.0")
    assert len(failed) >= 3 and len(set(truths)) >= 2  # the check can tell modes apart
    assert [e["llm"] for e in failed] == truths
    # the instrument's grades, for the figures (instrument.json beside diagnosis.json): one per failed episode
    grades = json.loads((tmp_path / "acc1.0" / "profile-run" / "instrument.json").read_text())
    assert grades["graded"] == grades["right"] == len(failed) and grades["accuracy"] == 1.0
    assert sorted(g["truth"]["mode"] if g["truth"]["mode"] != "none" else None for g in grades["episodes"].values()
                  ) == sorted(truths, key=lambda t: (t is not None, t or ""))
    candidates = {"action_validity", "progress", "grounding", "procedure_breadth"}
    assert all(e["llm_verdict"]["reason"] == (f"named {t}" if t in candidates else "named no mode")
               for e, t in zip(failed, truths))


def test_at_accuracy_zero_the_diagnoser_never_names_the_injected_mode(capsys, tmp_path):
    failed, truths = profile_with(capsys, tmp_path, "0.0")
    assert len(failed) >= 3
    assert all(e["llm"] != t for e, t in zip(failed, truths))


def test_the_diagnosers_requests_carry_no_truth(capsys, tmp_path, monkeypatch):
    sent: list[list[dict]] = []
    original = TraceInstrumentJudge.complete

    def spy(self, messages, **kwargs):
        sent.append(messages)
        return original(self, messages, **kwargs)

    monkeypatch.setattr(TraceInstrumentJudge, "complete", spy)
    failed, _ = profile_with(capsys, tmp_path, "1.0")
    assert len(sent) == len(failed) >= 3
    for messages in sent:
        text = "\n".join(m["content"] for m in messages).lower()
        assert "trace:" in text  # the request is the diagnoser's own prompt
        assert "injected" not in text and "streak" not in text and "planned" not in text


def state(*failure_types: str | None) -> InstrumentState:
    """An episode whose step i made a failure of failure_types[i] (None: a clean step)."""
    steps = tuple(StepRecord(i, f"a{i}", False, f"p{i}", {"failure_type": t} if t else None)
                  for i, t in enumerate(failure_types, 1))
    return InstrumentState("goal", len(steps), steps[-1], steps, (), steps)


def answer(request_state: InstrumentState, modes: list[str], seed: int = 0):
    return answer_diagnosis(JudgeRequest(ROLE, "", "", diagnosis_schema(modes), request_state, random.Random(seed)))


def test_the_answer_key_most_steps_ties_latest_and_none_off_the_candidates():
    modes = ["action_validity", "procedure_breadth"]
    assert answer(state("action_validity", "progress", "action_validity"), modes).correct["mode"] == \
        "action_validity"
    # a tie goes to the mode injected latest; progress is not a candidate here, so the right reply is "none"
    key = answer(state("action_validity", "progress"), modes)
    assert key.truth["injected_mode"] == "progress" and key.correct["mode"] == "none"
    assert answer(state("progress", "action_validity"), modes).correct["mode"] == "action_validity"
    assert answer(state(None, None), modes).correct["mode"] == "none"
    for seed in range(20):
        key = answer(state("action_validity"), modes, seed)
        assert key.wrong["mode"] in ("procedure_breadth", "none") and not key.agrees(key.wrong)
        assert key.agrees(key.correct)


@pytest.mark.parametrize("args, message", [
    (["--diagnoser-accuracy", "1.5"], "1.5"),
    (["--diagnoser", "instrument"], "--diagnoser-accuracy"),
    (["--diagnoser-accuracy", "0.8"], "needs --diagnoser instrument"),
])
def test_bad_diagnoser_options_are_refused(capsys, tmp_path, args, message):
    run_dir = play(capsys, tmp_path / "run", ["--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet"],
                   ["darc-profile:sentry"])
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), *args, "--out", str(tmp_path / "x"))
    assert code == 2 and message in err


def test_the_instrument_diagnoser_needs_the_noisy_agent(capsys, tmp_path):
    run_dir = play(capsys, tmp_path / "run", ["--env", "tiny", "--agent", "expert", "--episodes", "1", "--quiet"],
                   ["darc-profile:sentry"])
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "instrument", "--diagnoser-accuracy",
                       "1", "--out", str(tmp_path / "x"))
    assert code == 2 and "played by 'expert', not noisy" in err
