"""AED's LLM diagnoser played by the failure-injection instrument (`--instrument-accuracy ACCURACY`): at accuracy 1 every
diagnosis is grounded and names the injected step with its planned correction, at 0 none is right, and the
diagnoser's request never holds the truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.cli.main import main
from playground.host.manager import get_host
from playground.plugins.aed.diagnose import LLM_ROLE, llm_diagnoses, read_jsonl_file
from playground.plugins.aed.instrument import GradedTraceJudge
from playground.run.forks import load_episode
from playground.run.traces import read_trace

NOISE = ["invalid=0.15", "stop=0.05", "repeat=0.1", "stall=0.1", "drift=0.1"]


def make_run(out: Path, agent: str = "noisy", episodes: int = 30) -> Path:
    options = [arg for pair in NOISE for arg in ("--agent-option", pair)] if agent == "noisy" else []
    code = main(["run", "--env", "tiny", "--agent", agent, *options, "--harness", "base", "--episodes", str(episodes),
                 "--max-steps", "10", "--out", str(out), "--quiet"])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("aed-instrument") / "run")


def copy_run(run: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(run, to)
    return to


def truth(run: Path, trace: str) -> tuple[int, str | None]:
    """(step, planned action) of the first injected failure, read from the trace as a test would: the step numbers
    of a run without rollbacks are the positions on the surviving path."""
    for event in read_trace(run / trace):
        if event.get("type") == "proposal" and event.get("injected"):
            return int(event["step"]), event["injected"]["planned"]
    raise AssertionError(f"{trace}: no injected failure")


def diagnose(run: Path, accuracy: str, *extra: str) -> dict:
    assert main(["aed", "diagnose", str(run), "--instrument-accuracy", accuracy, *extra]) == 0
    return json.loads((run / "aed" / "diagnose.json").read_text())


@pytest.mark.parametrize("proposals", ["1", "3"])
def test_a_right_diagnoser_names_the_injected_step_and_its_planned_correction(noisy_run, tmp_path, proposals):
    run = copy_run(noisy_run, tmp_path / "run")
    counts = diagnose(run, "1", "--proposals", proposals)
    kept = read_jsonl_file(run / "aed" / "diagnoses.jsonl")
    assert counts["failed"] >= 5
    assert counts["rejected"] == {}
    assert counts["yield"]["produced"] == counts["yield"]["checked"] == counts["failed"] == len(kept)
    for record in kept:
        step, planned = truth(run, record["trace"])
        assert (record["step"], record["correction"]) == (step, planned), record["trace"]
        assert record["responsible"] == "agent"
    grades = json.loads((run / "aed" / "instrument.json").read_text())
    assert grades["graded"] == grades["right"] == counts["failed"]


def test_a_wrong_diagnoser_is_never_right_and_makes_realistic_mistakes(noisy_run, tmp_path):
    run = copy_run(noisy_run, tmp_path / "run")
    counts = diagnose(run, "0")
    records = read_jsonl_file(run / "aed" / "diagnoses.jsonl") + read_jsonl_file(run / "aed" / "rejected.jsonl")
    assert len(records) == counts["failed"] >= 5
    for record in records:
        assert (record["step"], record["correction"]) != truth(run, record["trace"]), record["trace"]
    assert json.loads((run / "aed" / "instrument.json").read_text())["right"] == 0
    # mistakes of every kind: a retry of the failing action, an inadmissible paraphrase, a later (grounded) step
    assert {"correction_is_the_error", "correction_not_admissible"} <= set(counts["rejected"])
    assert counts["pairs"] > 0


class Spy(GradedTraceJudge):
    """The instrument's diagnoser model, keeping every message it was sent."""

    def __init__(self, grades: Path) -> None:
        super().__init__({spec.role: spec for spec in get_host().instrument_judges}, 1.0, grades)
        self.messages: list[dict] = []

    def complete(self, messages, **kwargs):
        self.messages.extend(messages)
        return super().complete(messages, **kwargs)


def test_the_diagnoser_never_receives_the_truth(noisy_run, tmp_path):
    spy = Spy(tmp_path / "grades.json")
    asked = 0
    for trace in sorted((noisy_run / "traces").rglob("*.jsonl")):
        episode = load_episode(trace)
        if episode.status == "won":
            continue
        before = len(spy.messages)
        records = llm_diagnoses(episode, str(trace.relative_to(noisy_run)), spy)
        asked += 1
        assert records[0]["correction"] == truth(noisy_run, str(trace.relative_to(noisy_run)))[1]
        for message in spy.messages[before:]:
            text = message["content"].lower()
            assert "injected" not in text and "planned" not in text, text
    assert asked >= 5
    assert json.loads((tmp_path / "grades.json").read_text())["right"] == asked


def test_the_aed_plugin_registers_its_diagnosers_answerer():
    spec = {s.role: s for s in get_host().instrument_judges}[LLM_ROLE]
    assert spec.kind == "diagnoser"


def test_bad_instrument_options_are_refused(noisy_run, tmp_path, capsys):
    for argv, needle in [(["--instrument-accuracy", "1.5"], "less than or equal to 1"),
                         (["--instrument-accuracy", "x"], "is not a valid float"),
                         (["--instrument-accuracy", "1", "--judge-local"], "two models"),
                         (["--producer", "rule", "--instrument-accuracy", "1"], "needs --producer llm")]:
        assert main(["aed", "diagnose", str(noisy_run), *argv]) == 2
        assert needle in capsys.readouterr().err
    expert = make_run(tmp_path / "expert", agent="expert", episodes=2)
    assert main(["aed", "diagnose", str(expert), "--instrument-accuracy", "1"]) == 2
    assert "noisy" in capsys.readouterr().err


def test_a_rerun_of_the_same_settings_draws_the_same_instrument_coins(noisy_run, tmp_path):
    """The instrument's coins are seeded by harness, task and trial, not by the episode id (which holds the run's
    random id): a second run of the same settings, diagnosed at the same accuracy, gets the same replies."""
    again = make_run(tmp_path / "again")
    first = copy_run(noisy_run, tmp_path / "first")
    assert json.loads((again / "config.json").read_text())["run_id"] != json.loads(
        (first / "config.json").read_text())["run_id"]
    diagnose(first, "0.5"), diagnose(again, "0.5")

    def replies(run: Path) -> dict[str, bool]:
        graded = json.loads((run / "aed" / "instrument.json").read_text())["episodes"]
        return {episode.split(":", 1)[1]: grade["correct"] for episode, grade in graded.items()}

    assert replies(first) == replies(again) and len(set(replies(first).values())) == 2  # some right, some wrong
