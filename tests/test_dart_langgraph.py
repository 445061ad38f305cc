"""The LangGraph baseline of the DART bench: the workflow as a real `langgraph` graph with LangGraph's checkpointer."""

from __future__ import annotations

import pytest
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart import graph
from playground.plugins.dart.bench import play_case

from playground.cli.main import main
from playground.testing import ScriptedAgent
from tests.conftest import require_extra

PROVIDER = WorkflowProvider()


def test_without_langgraph_the_bench_says_it_skipped_the_row(capsys, monkeypatch):
    monkeypatch.setattr(graph, "available", lambda: False)
    assert main(["dart", "bench", "--domain", "etl", "--harness", "dart", "--repeats", "0"]) == 0
    assert "langgraph" not in capsys.readouterr().out  # not asked for: not mentioned
    assert main(["dart", "bench", "--domain", "etl", "--repeats", "0"]) == 0
    out = capsys.readouterr().out
    assert "langgraph: skipped, langgraph is not installed (pip install -e '.[langgraph]')" in out
    assert main(["dart", "bench", "--domain", "etl", "--harness", "langgraph"]) == 2  # asked for by name: an error
    assert "pip install -e '.[langgraph]'" in capsys.readouterr().err


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
    figures = play_case(PROVIDER, domain, task, "langgraph", None, 80)
    assert figures["recoveries"] == 3 and not figures["won"]  # resuming re-runs the failed check on the partial write
    assert figures["unsafe"] == 0 and figures["replayed"] == 3 and figures["sizes"]
    assert play_case(PROVIDER, domain, task, "dart", ScriptedAgent(), 80)["won"]
    assert play_case(PROVIDER, domain, domain + "-clean-0", "langgraph", None, 80)["won"]


def test_the_bench_has_a_langgraph_row(capsys):
    require_extra("langgraph", "langgraph")
    assert main(["dart", "bench", "--domain", "travel", "--harness", "dart", "--harness", "langgraph",
                 "--repeats", "1"]) == 0
    figures, by_variant = capsys.readouterr().out.split("\n\n")[:2]
    rows = {line.split()[0]: line.split() for line in figures.splitlines()[1:]}
    assert rows["langgraph"][1] == "3/15" and rows["dart"][1] == "15/15"
    # the `late` column, its cells "success rN uN fN wall"
    late = {line.split()[0]: line.split()[-5:-3] for line in by_variant.splitlines()[2:]}
    assert late["langgraph"] == ["0/3", "r9"] and late["dart"] == ["3/3", "r6"]
