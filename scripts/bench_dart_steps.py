"""What a DART step costs and what the LangGraph baseline does, on the workflow domains (machinery figures): the parts
of DART's bench that are not figures of a grid. Success, replayed actions, unsafe admissions and the other counters
per harness are the study `dart-bench` (`playground study run dart-bench`, then `study table`).

Per domain:

1. CPU per step of each harness and its ratio to a plain step (`base`: no plugin, no checkpoint), timed side by side
   timeit-style on the domain's clean tasks (no failure, so every harness takes the same steps): each of `--repeats`
   rounds plays every clean task `--number` times, alternating an episode with the harness and one without, with
   the garbage collector off during each; a round's figure is its fastest episode each way (slower ones waited for
   the CPU), the table gives the median over rounds. For `langgraph`: the same graph with and without its
   checkpointer.
2. The mean serialized (pickled) snapshot size of each harness over the domain's test tasks.
3. The `langgraph` row (when `langgraph` is installed): each test task run as a LangGraph graph with LangGraph's own
   checkpointer and its latest-checkpoint recovery (plugins/dart/graph.py): success, replayed actions, unsafe
   restores (the env's ground truth) and recoveries, the figures a study grid cannot hold (a graph run is not a
   loop harness).

    python scripts/bench_dart_steps.py [--domain etl ...] [--harness dart ...] [--repeats 7] [--number 5]
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

from playground.core.episode_hooks import EpisodeHooks
from playground.core.loop import EpisodeConfig, run_episode
from playground.envs.workflow.env import WorkflowProvider
from playground.host_api import ScriptedAgent, bind_env
from playground.plugins.dart import graph
from playground.plugins.dart.sidecar import for_harness
from playground.plugins.dart.variants import ABLATIONS, BASELINES

GRAPH = "langgraph"
HARNESSES = ("base", "dart", *(name for name, _, _ in ABLATIONS), *(name for name, _, _ in BASELINES))


class SizedEnv:
    """Delegates to an env, recording the serialized (pickled) size of every snapshot taken."""

    def __init__(self, env: Any) -> None:
        self.env, self.sizes = env, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def snapshot(self) -> Any:
        snap = self.env.snapshot()
        self.sizes.append(len(pickle.dumps(snap)))
        return snap


def cpu_seconds(run: Callable[[], Any]) -> float:
    """Process seconds `run()` takes, with the garbage collector off during it (as timeit does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.process_time()
        run()
        return time.process_time() - started
    finally:
        if enabled:
            gc.enable()


def play(env: Any, task: str, harness: str) -> Any:
    """One episode of `task` under `harness` with the expert (`ScriptedAgent`); its `EpisodeResult`."""
    sidecar = for_harness(harness)
    hooks = EpisodeHooks([(harness, sidecar)] if sidecar is not None else [])
    agent = ScriptedAgent()
    bind_env(agent, env)
    config = EpisodeConfig("bench", f"bench:{task}", "workflow", task, harness, "ScriptedAgent", 0, 80,
                           params={"max_rollbacks": 10})
    return run_episode(env, agent, hooks, config, lambda event: None)


def per_step(provider: Any, domain: str, task: str, harness: str, plain: bool) -> float:
    """CPU seconds per step of one clean episode under `harness` (`plain`: without it)."""
    if harness == GRAPH:
        run, nodes = graph.clean_run(provider.make(domain), task, checkpointed=not plain)
        return cpu_seconds(run) / nodes
    env, results = provider.make(domain, expert=True), []
    seconds = cpu_seconds(lambda: results.append(play(env, task, "base" if plain else harness)))
    return seconds / max(results[0].steps, 1)


def time_steps(provider: Any, domain: str, harnesses: list[str], repeats: int, number: int) -> dict[str, tuple]:
    """Per harness: the median over rounds of (seconds per step, ratio to a plain step)."""
    tasks = [t for t in provider.task_sets()[domain].tasks("test") if "-clean-" in t]
    rounds: dict[str, list[tuple[float, float]]] = {h: [] for h in harnesses}
    for _ in range(repeats):
        for harness in harnesses:
            pairs = [(per_step(provider, domain, t, harness, False), per_step(provider, domain, t, harness, True))
                     for t in tasks for _ in range(number)]
            best, plain = min(p[0] for p in pairs), min(p[1] for p in pairs)
            rounds[harness].append((best, best / plain))
    return {h: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for h, rs in rounds.items()}


def snapshot_bytes(provider: Any, domain: str, harness: str) -> float | None:
    """The mean pickled snapshot size under `harness` over the domain's test tasks (None: it took none)."""
    sizes: list[int] = []
    for task in provider.task_sets()[domain].tasks("test"):
        if harness == GRAPH:
            sizes += graph.play(provider.make(domain), task)["sizes"]
            continue
        env = SizedEnv(provider.make(domain, expert=True))
        play(env, task, harness)
        sizes += env.sizes
    return statistics.fmean(sizes) if sizes else None


def graph_row(provider: Any, domain: str) -> dict[str, int]:
    """The LangGraph baseline over the domain's test tasks: successes, tasks, replayed, unsafe, recoveries."""
    row = {"won": 0, "tasks": 0, "replayed": 0, "unsafe": 0, "recoveries": 0}
    for task in provider.task_sets()[domain].tasks("test"):
        figures = graph.play(provider.make(domain), task)
        row["tasks"] += 1
        for key in ("won", "replayed", "unsafe", "recoveries"):
            row[key] += int(figures[key])
    return row


def main() -> int:
    """Print the step-cost table per domain, then the LangGraph rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", action="append", help="workflow domain (repeatable; default: all)")
    parser.add_argument("--harness", action="append", help="harness (repeatable; default: all, langgraph too)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()
    provider = WorkflowProvider()
    harnesses = args.harness or [*HARNESSES, GRAPH]
    if GRAPH in harnesses and not graph.available():
        print(f"{GRAPH}: skipped, langgraph is not installed ({graph.INSTALL})")
        harnesses.remove(GRAPH)
    for domain in args.domain or list(provider.task_sets()):
        timed = time_steps(provider, domain, [h for h in harnesses if h != "base"], args.repeats, args.number)
        print(f"## {domain}: CPU per step (median of {args.repeats} rounds), vs plain, mean snapshot bytes")
        for harness, (seconds, ratio) in timed.items():
            size = snapshot_bytes(provider, domain, harness)
            print(f"{harness:<24} {seconds * 1e6:8.0f} us  {ratio:5.2f}x  {'-' if size is None else f'{size:.0f}'}")
        if GRAPH in harnesses:
            row = graph_row(provider, domain)
            print(f"{GRAPH} row: {row['won']}/{row['tasks']} won, {row['replayed']} replayed, {row['unsafe']} unsafe, "
                  f"{row['recoveries']} recoveries")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
