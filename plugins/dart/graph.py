"""The LangGraph baseline: a workflow task as a real `langgraph` graph with LangGraph's own checkpointer.

One node per declared tool call, chained in plan order; the graph state carries the env's
local state (what `snapshot()` copies), so a LangGraph checkpoint is a checkpoint of the
workflow. The checkpointer (`InMemorySaver`) saves one after every node. An observable
failure makes the node raise; recovery is LangGraph's own: read the latest checkpoint
(`get_state`), load its local state back into the env, and resume (`invoke(None, ...)`),
which re-runs the failed node. External effects stay outside the graph, as they do for a
real agent. Needs the optional extra: pip install -e '.[langgraph]'.
"""

from __future__ import annotations

import importlib.util
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

INSTALL = "pip install -e '.[langgraph]'"


def available() -> bool:
    """Whether `langgraph` is installed."""
    return importlib.util.find_spec("langgraph") is not None


class WorkflowFailure(Exception):
    """An observable failure of the env at a node (its failure record in `failure`)."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(f"{failure.get('kind')}: {failure.get('message')}")
        self.failure = failure


class GraphState(TypedDict):
    """The graph state: the env's local state and the tool calls the graph has made on this path."""

    local: dict[str, Any]
    calls: Annotated[list[str], operator.add]


def build_graph(env: Any, actions: list[str], checkpointer: Any = None) -> Any:
    """The compiled graph: one node per action, in order, each calling `env.step` (raising on a failure)."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(GraphState)
    names = [f"call_{i}" for i in range(len(actions))]
    for name, action in zip(names, actions):
        graph.add_node(name, _node(env, action))
    for a, b in zip([START, *names], [*names, END]):
        graph.add_edge(a, b)
    return graph.compile(checkpointer=checkpointer)


def _node(env: Any, action: str):
    def call(state: GraphState) -> dict[str, Any]:
        *_, info = env.step(action)
        failure = info.get("failure")
        if failure is not None and not failure.get("rejected"):
            raise WorkflowFailure(dict(failure))
        return {"local": env.snapshot(), "calls": [action]}

    return call


def plan(env: Any, task: str) -> list[str]:
    """Reset `env` to `task` and return the declared tool calls in plan order."""
    _, info = env.reset(options={"task": task})
    return [action for inst in info["workflow"]["instances"] for action in inst["steps"]]


def play(env: Any, task: str, max_recoveries: int = 3) -> dict[str, Any]:
    """Run `task` as a graph with an in-memory checkpointer, resuming from the latest checkpoint after each
    observable failure (at most `max_recoveries` times); return the bench's figures. Ground truth
    (validity, unsafe restores) comes from the env object, never through the graph."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    counted = _Counted(env)
    graph = build_graph(counted, plan(env, task), saver)
    config: Any = {"configurable": {"thread_id": task}, "recursion_limit": 10_000}
    figures: dict[str, Any] = {"preserved": 0, "blocked": 0, "false_blocks": 0, "recoveries": 0}
    payload: dict[str, Any] | None = {"local": env.snapshot(), "calls": []}
    while True:
        try:
            graph.invoke(payload, config, durability="sync")
            break
        except WorkflowFailure:
            if figures["recoveries"] >= max_recoveries:
                break
            figures["recoveries"] += 1
            latest = graph.get_state(config)  # LangGraph's restore: the latest checkpoint
            env.restore(latest.values["local"])
            figures["preserved"] += env.committed()
            payload = None  # resume from that checkpoint: the failed node runs again
    sizes = [len(saver.serde.dumps_typed(t.checkpoint)[1]) for t in saver.list(config)]
    figures.update(won=env.valid(), steps=counted.steps, replayed=counted.steps - env.state["clock"],
                   unsafe=env.world["unsafe_restores"], sizes=sizes)
    return figures


class _Counted:
    """Delegates to an env, counting `step` calls."""

    def __init__(self, env: Any) -> None:
        self.env, self.steps = env, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, action: str) -> Any:
        self.steps += 1
        return self.env.step(action)


def clean_run(env: Any, task: str, checkpointed: bool) -> tuple[Callable[[], Any], int]:
    """A prepared run of `task` as a graph, with or without the checkpointer, and its node count (for timing)."""
    from langgraph.checkpoint.memory import InMemorySaver

    actions = plan(env, task)
    graph = build_graph(env, actions, InMemorySaver() if checkpointed else None)
    config: Any = {"configurable": {"thread_id": task}, "recursion_limit": 10_000}
    options = {"durability": "sync"} if checkpointed else {}  # langgraph fails on a durability without a saver
    payload = {"local": env.snapshot(), "calls": []}
    return (lambda: graph.invoke(payload, config, **options)), len(actions)
