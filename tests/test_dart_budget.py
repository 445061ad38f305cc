"""The DART bench's step budget (checked against the expert's plan), its fault and restore counts, and its run
folder (`--out`)."""

from __future__ import annotations

import json

from playground.cli.main import main
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart.bench import budget_problem, expert_plan_length, play_case
from playground.run.forks import load_episode
from playground.run.traces import read_events
from playground.testing import ScriptedAgent

PROVIDER = WorkflowProvider()


def test_the_expert_plans_are_16_to_24_calls_and_a_shorter_budget_is_named():
    assert expert_plan_length(PROVIDER, "schedule-form", "schedule-form-clean-0") == 16
    assert expert_plan_length(PROVIDER, "diagnosis", "diagnosis-clean-0") == 24
    tasks = {"schedule-form": ["schedule-form-clean-0"], "diagnosis": ["diagnosis-late-1"]}
    assert budget_problem(PROVIDER, tasks, 24) is None and budget_problem(PROVIDER, tasks, 80) is None
    problem = budget_problem(PROVIDER, tasks, 8)
    assert problem and "2 of 2 tasks" in problem and "16-24 calls" in problem and "at least 24" in problem


def test_a_budget_below_the_plan_reaches_no_fault_and_the_bench_refuses_it(capsys):
    short = play_case(PROVIDER, "travel", "travel-ordinary-0", "dart", ScriptedAgent(), 8)
    enough = play_case(PROVIDER, "travel", "travel-ordinary-0", "dart", ScriptedAgent(), 80)
    assert short["faulty"] == 1 and short["faults_reached"] == 0 and short["rollbacks"] == short["reruns"] == 0
    assert enough["faults_reached"] == 1 and enough["rollbacks"] == 1 and enough["won"]
    args = ["dart", "bench", "--domain", "travel", "--harness", "dart", "--agent", "noisy", "--per-variant", "1",
            "--repeats", "0", "--max-steps", "8"]
    assert main(args) == 2
    assert "below the expert's plan" in capsys.readouterr().err
    assert main([*args, "--allow-short-budget"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("dart "))
    assert row[7] == "0/4" and row[8] == "0/0"  # faults reached (of 4 faulty tasks), rollbacks/reruns
    assert "below the expert's plan" in out  # the printed tables say the run is null by construction


def test_the_bench_writes_a_run_folder_with_readable_traces(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["dart", "bench", "--domain", "etl", "--harness", "dart", "--harness", "retry-only", "--agent",
                 "noisy", "--agent-option", "invalid=0", "--per-variant", "1", "--repeats", "0",
                 "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["agent"] == "noisy" and config["agent_options"] == {"invalid": 0} and config["max_steps"] == 80
    assert json.loads((out / "lock.json").read_text())["run"]["max_steps"] == 80
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 10 and {r["harness"] for r in records} == {"dart", "retry-only"}
    summary = json.loads((out / "summary.json").read_text())["etl"]["dart"]
    assert summary["episodes"] == 5 and summary["faulty"] == 4
    assert summary["faults_reached"] == sum(r["faults_reached"] for r in records if r["harness"] == "dart")
    traces = sorted((out / "traces").rglob("*.jsonl"))
    assert len(traces) == 10
    for path in traces:
        assert read_events(path)[0].harness in ("dart", "retry-only")
        assert load_episode(path).end is not None
    assert main(["dart", "bench", "--domain", "etl", "--out", str(out)]) == 2  # never over a run's files
