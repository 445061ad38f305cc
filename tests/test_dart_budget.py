"""DART's figures through a real run: a step budget below the expert's plan reaches no fault, and `study table` of a
run directory reads DART's columns from the traces and the env's ground truth the loop wrote into them."""

from __future__ import annotations

import json

from playground.cli.main import main
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart.figures import episode_figures
from playground.run.rundir import load_records, record_trace
from playground.run.traces import read_events
from playground.testing import ScriptedAgent
from tests.dart_cases import play_harness

PROVIDER = WorkflowProvider()


def expert_plan_length(task_set: str, task: str) -> int:
    env = PROVIDER.make(task_set, expert=True)
    _, info = env.reset(seed=0, options={"task": task})
    return len(info["expert_plan"])


def test_a_budget_below_the_expert_plan_reaches_no_fault():
    assert expert_plan_length("schedule-form", "schedule-form-clean-0") == 16
    assert expert_plan_length("diagnosis", "diagnosis-clean-0") == 24
    short = play_harness(PROVIDER, "travel", "travel-ordinary-0", "dart", ScriptedAgent(), 8)
    enough = play_harness(PROVIDER, "travel", "travel-ordinary-0", "dart", ScriptedAgent(), 80)
    assert short["faulty"] and not short["fault_reached"] and short["rollbacks"] == short["reruns"] == 0
    assert enough["fault_reached"] and enough["rollbacks"] == 1 and enough["won"]


def test_study_table_of_a_run_reads_darts_columns_from_the_traces(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--env", "workflow:etl", "--split", "test", "--episodes", "5", "--max-steps", "80",
                 "--agent", "noisy", "--agent-option", "invalid=0", "--harness", "dart", "--harness", "retry-only",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["study", "table", str(out), "--reference", "dart", "--json"]) == 0
    rows = {row["harness"]: {**row, **row["figures"]} for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"dart", "retry-only"}
    for harness, row in rows.items():
        records = [r for r in load_records(out) if r.harness == harness]
        figures = [episode_figures(read_events(record_trace(out, record))) for record in records]
        assert all(f["unsafe"] is not None for f in figures)  # the workflow env wrote its ground truth
        faulted = [f for f in figures if f["faulty"]]
        assert faulted and row["faults_reached"] == sum(f["fault_reached"] for f in faulted) / len(faulted)
        assert row["replayed"] == sum(f["replayed"] for f in figures) / len(figures)
        assert not row.get("unsafe") and not row.get("false_blocks")  # a column 0 in every cell is left out
    assert rows["retry-only"]["reruns"] > 0 and not rows["retry-only"].get("rollbacks")
