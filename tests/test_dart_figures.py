"""DART's study columns (`plugins/dart/figures.py`) read from the trace and the env's ground truth: they equal what
the former bench counted from the env object, on its committed episodes; the loop writes the truth and shows it to
no plugin (the study table's columns: tests/test_shipped_studies.py, `dart-bench` and `dart-instrument`)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from playground.agents.noisy import NoisyAgent
from playground.core.events import RollbackEvent, StepEvent
from playground.core.hookspecs import hookimpl
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart.figures import crosses_irreversible, episode_figures
from playground.plugins.dart.sidecar import for_harness
from playground.testing import ScriptedAgent, play
from tests.dart_cases import play_harness

PROVIDER = WorkflowProvider()
COMMITTED = Path(__file__).resolve().parent.parent / "docs" / "runs" / "dart-noisy-budget" / "episodes.jsonl"
# the former bench's per-episode keys and the figures that replace them
KEYS = {"won": "won", "replayed": "replayed", "preserved": "preserved", "blocked": "blocked", "unsafe": "unsafe",
        "false_blocks": "false_blocks", "agent_errors": "refused_calls", "rollbacks": "rollbacks",
        "reruns": "reruns", "steps": "steps", "faulty": "faulty", "faults_reached": "fault_reached"}


def committed() -> list[dict]:
    return [json.loads(line) for line in COMMITTED.read_text().splitlines()]


@pytest.mark.parametrize("domain", ["schedule-form", "navigation", "diagnosis"])
def test_the_columns_equal_the_former_benchs_committed_episodes(domain):
    """docs/runs/dart-noisy-budget: `playground dart bench --agent noisy --per-variant 1` (episode seed 0), whose
    counters read the env object; the same episodes replayed here give the same figures from the trace."""
    rows = [row for row in committed() if row["domain"] == domain]
    assert len(rows) == 25  # 5 variants x 5 harnesses
    for row in rows:
        figures = play_harness(PROVIDER, domain, row["task"], row["harness"], NoisyAgent(), 80)
        got = {key: (int(figures[new]) if isinstance(figures[new], bool) else figures[new])
               for key, new in KEYS.items()}
        assert got == {key: int(row[key]) if isinstance(row[key], bool) else row[key] for key in KEYS}, row


def test_the_truth_reaches_the_trace_and_no_plugin():
    seen = []

    class Spy:
        @hookimpl
        def step_completed(self, outcome):
            seen.append(outcome)

    played = play(PROVIDER.make("travel", expert=True), ScriptedAgent(), plugins=[for_harness("dart"), Spy()],
                  task="travel-irreversible-0", max_steps=80, params={"max_rollbacks": 10})
    steps = played.events_of(StepEvent)
    assert all(step.truth is not None and "unsafe_restores" in step.truth for step in steps)
    assert all(rollback.truth is not None for rollback in played.events_of(RollbackEvent))
    assert seen and not any("truth" in repr(outcome) or "unsafe_restores" in repr(outcome) for outcome in seen)


def test_an_env_without_ground_truth_leaves_the_truth_columns_none():
    figures = episode_figures([StepEvent(step=0, action="a", observation="o", valid_action=False)])
    assert figures["refused_calls"] == 1 and figures["replayed"] == 0
    assert figures["unsafe"] is None and figures["false_blocks"] is None and figures["fault_reached"] is None


def test_crossing_an_irreversible_effect_is_the_envs_rule():
    env = PROVIDER.make("travel", expert=True)
    played = play(env, ScriptedAgent(), plugins=[], task="travel-irreversible-0", max_steps=80)
    truth = played.events_of(StepEvent)[-1].truth
    assert truth["irreversible"]
    for step in range(0, played.result.steps + 2):
        assert crosses_irreversible(truth, step) == env.crosses_irreversible(step), step


RUNS = Path(__file__).resolve().parent.parent / "docs" / "runs"


@pytest.mark.parametrize("name", ["dart-bench", "dart-instrument"])
def test_the_committed_study_runs_give_the_published_tables(name, tmp_path):
    """docs/runs/dart-bench and dart-instrument (the tables docs/results/dart-aed.md and methods/dart.md quote):
    with each grid's traces unpacked, the study table equals the committed table.json, DART's columns included."""
    from dataclasses import asdict

    from playground.core.study_file import load_study
    from playground.host.manager import Host
    from playground.run.study import study_table

    host = Host().load()
    run = tmp_path / name
    shutil.copytree(RUNS / name, run)
    for packed in run.glob("*/traces.tar.gz"):
        with tarfile.open(packed) as archive:
            archive.extractall(packed.parent, filter="data")
    figures = {figure.name: figure for figure in host.figures}
    cells = study_table(load_study(host.studies.get(name).path), run, figures)
    published = json.loads((run / "table.json").read_text())
    assert json.loads(json.dumps([{**asdict(cell), "success": cell.success} for cell in cells])) == published
    dart = [row for row in published if row["harness"] == "dart"]
    assert dart and all(row["figures"]["unsafe"] == 0 for row in dart)
