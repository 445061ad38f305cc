"""The LangGraph baseline beside DART (scripts/bench_dart_steps.py prints its row): the workflow as a real `langgraph` graph with LangGraph's checkpointer."""

from __future__ import annotations

import pytest

from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart import graph
from playground.testing import ScriptedAgent
from tests.conftest import require_extra
from tests.dart_cases import play_harness

PROVIDER = WorkflowProvider()


def test_the_graph_runs_the_declared_plan_and_checkpoints_every_node():
    require_extra("langgraph", "langgraph")
    from langgraph.checkpoint.memory import InMemorySaver

    env = PROVIDER.make("travel")
    actions = graph.plan(env, "travel-clean-0")
    saver = InMemorySaver()
    compiled = graph.build_graph(env, actions, saver)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    final = compiled.invoke({"local": env.snapshot(), "calls": []}, config)
    assert final["calls"] == actions and env.valid()
    assert len(list(saver.list(config))) == len(actions) + 2  # the input, one per node, and the start


@pytest.mark.parametrize("task", ["schedule-form-late-0", "travel-committed-0", "etl-late-1"])
def test_langgraphs_latest_checkpoint_leaves_commitment_sensitive_cases_invalid(task):
    require_extra("langgraph", "langgraph")
    domain = task.rsplit("-", 2)[0]
    figures = graph.play(PROVIDER.make(domain), task)
    assert figures["recoveries"] == 3 and not figures["won"]  # resuming re-runs the failed check on the partial write
    assert figures["unsafe"] == 0 and figures["replayed"] == 3 and figures["sizes"]
    assert play_harness(PROVIDER, domain, task, "dart", ScriptedAgent(), 80)["won"]
    assert graph.play(PROVIDER.make(domain), domain + "-clean-0")["won"]


def test_the_steps_bench_prints_the_langgraph_row():
    require_extra("langgraph", "langgraph")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "bench_dart_steps.py"
    spec = importlib.util.spec_from_file_location("bench_dart_steps", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = bench.graph_row(PROVIDER, "travel")
    assert row["tasks"] == 15 and row["won"] == 3 and row["unsafe"] == 0  # only the clean tasks end valid
    timed = bench.time_steps(PROVIDER, "etl", ["dart", "langgraph"], repeats=1, number=1)
    assert set(timed) == {"dart", "langgraph"} and all(s > 0 and r > 0 for s, r in timed.values())
    assert bench.snapshot_bytes(PROVIDER, "etl", "dart") > 100  # pickled snapshots, in bytes
