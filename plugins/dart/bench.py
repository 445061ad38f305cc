"""`playground dart bench`: DART, its ablations and the baselines on the same workflow cases.

Each harness plays every task of a domain's split with the same agent and seed; the row
`langgraph` runs each task as a LangGraph graph instead (plugins/dart/graph.py; only when
`langgraph` is installed). Figures per harness: success (the final state passes the env's
semantic validity check), replayed actions (env steps taken minus the steps of the final
branch), preserved completed instances (committed instances a rollback kept), blocked
rollbacks, unsafe admissions (restores that crossed an irreversible effect, the env's
ground truth) / false blocks (blocked where restoring the decision's candidate boundary
would have crossed none), the time per step and its ratio to a plain step (see
`time_steps`) and the mean serialized snapshot size; per fault variant, success, replayed
actions, unsafe admissions, false blocks and the mean episode wall time; with `latency.py`,
paired latency tests of DART against every other row. The agent is the expert, `noisy` or a
model (`local`, `llm`): a model's own calls then fail too (refused, out of order, invalid:
`model errors`), besides the injected faults. Ground truth comes from the env object the bench
holds, never through the sidecar: also whether the task's fault was reached (`faults reached`:
its faulty write happened; a fault is silent until then, so an agent that never gets there
meets none) and the restores made (`rollbacks/reruns`: local restores, and whole-task reruns).

The step budget must let the agent reach the faults: `budget_problem` compares it with the
longest expert plan of the tasks played (16-24 calls on the shipped domains); a budget below
that is null by construction (even the expert reaches no fault).

With `out`, the bench also writes a run folder: `config.json` (its settings), `lock.json`
(software, env, agent, budget), `episodes.jsonl` (one record per episode), `summary.json` (the
figures per domain and harness) and one trace per episode (`traces/<harness>/<task>.jsonl`).
"""

from __future__ import annotations

import gc
import json
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.core.episode_hooks import EpisodeHooks
from playground.core.events import Event, HeaderEvent, InterventionEvent, RollbackEvent, StepEvent
from playground.core.loop import EpisodeConfig, run_episode
from playground.host_api import bind_env
from playground.plugins.dart import graph, latency, sidecar
from playground.plugins.dart.variants import ABLATIONS, BASELINES


def _maker(class_name: str, params: dict[str, Any]) -> Callable[[], Any]:
    return lambda: getattr(sidecar, class_name)(params)


HARNESSES: dict[str, Callable[[], Any] | None] = {
    "base": None,
    "dart": _maker("Dart", {}),
    **{name: _maker("Dart", params) for name, params, _ in ABLATIONS},
    **{name: _maker(cls, {}) for name, cls, _ in BASELINES},
}
GRAPH = "langgraph"  # the LangGraph row: not a loop harness, a graph run of the same task
COLUMNS = ("harness", "success", "replayed", "preserved", "blocked", "unsafe/false-block", "model errors",
           "faults reached", "rollbacks/reruns", "wall s", "us/step", "vs plain", "snapshot B")
FIGURES = ("replayed", "preserved", "blocked", "unsafe", "false_blocks", "steps", "agent_errors", "faulty",
           "faults_reached", "rollbacks", "reruns")


class SizedEnv:
    """Delegates to an env, recording the serialized (pickled) size of every snapshot taken."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def snapshot(self) -> Any:
        snap = self.env.snapshot()
        self.sizes.append(len(pickle.dumps(snap)))
        return snap


@dataclass
class Tally:
    """One row of a table: figures summed over a domain's tasks, and the step timing."""

    episodes: int = 0
    won: int = 0
    replayed: int = 0
    preserved: int = 0
    blocked: int = 0
    unsafe: int = 0
    false_blocks: int = 0
    steps: int = 0
    agent_errors: int = 0
    faulty: int = 0  # episodes whose task has a fault
    faults_reached: int = 0  # of those, the episodes where the fault fired (its faulty write happened)
    rollbacks: int = 0  # local restores (to a checkpoint after step 0)
    reruns: int = 0  # whole-task reruns (restores of step 0)
    seconds: dict[str, float] = field(default_factory=dict)  # task -> episode wall seconds
    sizes: list[int] = field(default_factory=list)
    per_step: float | None = None  # median seconds per step
    ratio: float | None = None  # median ratio to a plain step timed side by side
    variants: dict[str, Tally] = field(default_factory=dict)  # the same figures per fault variant

    def add(self, figures: dict[str, Any]) -> None:
        """Count one episode's figures."""
        self.episodes += 1
        self.won += bool(figures["won"])
        for key in FIGURES:
            setattr(self, key, getattr(self, key) + figures.get(key, 0))
        self.sizes += figures["sizes"]
        self.seconds[figures["task"]] = figures["seconds"]

    def cell(self) -> str:
        """Success, replayed actions, unsafe admissions, false blocks and mean wall seconds per episode in one cell."""
        wall = sum(self.seconds.values()) / len(self.seconds) if self.seconds else 0.0
        return f"{self.won}/{self.episodes} r{self.replayed} u{self.unsafe} f{self.false_blocks} {duration(wall)}"

    def row(self, name: str) -> list[str]:
        size = f"{sum(self.sizes) / len(self.sizes):.0f}" if self.sizes else "-"
        micro = f"{self.per_step * 1e6:.0f}" if self.per_step is not None else "-"
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        return [name, f"{self.won}/{self.episodes}", str(self.replayed), str(self.preserved), str(self.blocked),
                f"{self.unsafe}/{self.false_blocks}", str(self.agent_errors), f"{self.faults_reached}/{self.faulty}",
                f"{self.rollbacks}/{self.reruns}", f"{sum(self.seconds.values()):.2f}", micro, ratio, size]

    def figures(self) -> dict[str, Any]:
        """The row's figures as a JSON-ready mapping (for summary.json), per fault variant too."""
        data = {"episodes": self.episodes, "won": self.won, **{key: getattr(self, key) for key in FIGURES},
                "wall_seconds": round(sum(self.seconds.values()), 4),
                "snapshot_bytes": round(sum(self.sizes) / len(self.sizes)) if self.sizes else None,
                "us_per_step": None if self.per_step is None else round(self.per_step * 1e6, 1),
                "vs_plain": None if self.ratio is None else round(self.ratio, 3)}
        if self.variants:
            data["variants"] = {name: tally.figures() for name, tally in self.variants.items()}
        return data


def duration(seconds: float) -> str:
    """Seconds as a short text: milliseconds below a second, else seconds, 3 significant digits."""
    return f"{seconds * 1000:.3g}ms" if seconds < 1 else f"{seconds:.3g}s"


def _config(task: str, harness: str, agent: Any, max_steps: int, seed: int) -> EpisodeConfig:
    return EpisodeConfig("bench", f"bench:{task}", "workflow", task, harness, type(agent).__name__, seed, max_steps,
                         params={"max_rollbacks": 10})


def expert_plan_length(provider: Any, task_set: str, task: str) -> int:
    """The number of calls in the expert's plan of `task` (a clean run, no fault replayed)."""
    env = provider.make(task_set, expert=True)
    _, info = env.reset(seed=0, options={"task": task})
    return len(info["expert_plan"])


def budget_problem(provider: Any, tasks: dict[str, list[str]], max_steps: int) -> str | None:
    """Why `max_steps` is too small for the tasks (by domain), or None when it is enough.

    A budget below the longest expert plan of the tasks played cannot reach every fault even with the expert:
    a fault is silent until its call, so such a run measures no recovery at all (it is null by construction).
    """
    lengths = {task: expert_plan_length(provider, domain, task) for domain, ids in tasks.items() for task in ids}
    if not lengths:
        return None
    longest = max(lengths.values())
    if max_steps >= longest:
        return None
    short = sum(length > max_steps for length in lengths.values())
    return (f"--max-steps {max_steps} is below the expert's plan on {short} of {len(lengths)} tasks (plans of "
            f"{min(lengths.values())}-{longest} calls): even the expert would reach no fault there, so the run "
            f"measures no recovery; use at least {longest} (the default 80 leaves room for recoveries)")


def _trace_header(task_set: str, task: str, harness: str, agent: Any, max_steps: int, seed: int) -> HeaderEvent:
    return HeaderEvent(env="workflow", task_set=task_set, task_id=task, seed=seed, harness=harness,
                       agent=type(agent).__name__, max_steps=max_steps, run_id="bench", split=None,
                       episode_id=f"bench:{task}", params={"max_rollbacks": 10},
                       interventions=[harness] if HARNESSES.get(harness) is not None else [])


def play_case(provider: Any, task_set: str, task: str, harness: str, agent: Any, max_steps: int,
              seed: int = 0, trace: Path | None = None) -> dict[str, Any]:
    """Play one task under one harness (or as a LangGraph graph for `langgraph`); return its figures.

    With `trace`, the episode's events are also written there as a trace (not for `langgraph`).
    """
    if harness == GRAPH:
        started = time.perf_counter()
        graphed = graph.play(provider.make(task_set), task)
        return {**graphed, "task": task, "agent_errors": 0, "seconds": time.perf_counter() - started}
    env = SizedEnv(provider.make(task_set, expert=True))
    make = HARNESSES[harness]
    plugin = make() if make is not None else None
    hooks = EpisodeHooks([(harness, plugin)] if plugin is not None else [])
    figures: dict[str, Any] = {"replayed": 0, "preserved": 0, "blocked": 0, "false_blocks": 0, "agent_errors": 0,
                               "rollbacks": 0, "reruns": 0}
    writer = None
    if trace is not None:
        from playground.host_api import TraceWriter

        writer = TraceWriter(trace, _trace_header(task_set, task, harness, agent, max_steps, seed))
    position = 0
    committed_at: dict[int, int] = {}

    def committed() -> int:
        state = env.env.state
        return sum(state["done"][i.id] == len(i.skeleton.steps) for i in env.env.instances)

    def emit(event: Event) -> None:
        nonlocal position
        if writer is not None:
            writer.emit(event)
        if isinstance(event, StepEvent):
            position = event.step + 1
            failure = event.failure or {}
            figures["agent_errors"] += not event.valid_action and (not failure or bool(failure.get("rejected")))
            committed_at[position] = committed()
        elif isinstance(event, RollbackEvent):
            figures["preserved"] += committed_at.get(event.to_step, 0)
            figures["rollbacks" if event.to_step > 0 else "reruns"] += 1
            position = event.to_step
        elif isinstance(event, InterventionEvent) and event.details.get("blocked"):
            figures["blocked"] += 1
            candidate = event.details.get("candidate")
            if candidate is not None and not env.env.crosses_irreversible(candidate):
                figures["false_blocks"] += 1

    bind_env(agent, env)
    started = time.perf_counter()
    try:
        result = run_episode(env, agent, hooks, _config(task, harness, agent, max_steps, seed), emit)
    finally:
        if writer is not None:
            writer.close()
    seconds = time.perf_counter() - started
    if result.status == "error":
        raise RuntimeError(f"{harness} on {task}: {result.error}")
    faulty = env.env.fault is not None
    figures.update(won=result.won and env.env.valid(), steps=result.steps, replayed=result.steps - position,
                   unsafe=env.env.world["unsafe_restores"], sizes=env.sizes, task=task, seconds=seconds,
                   faulty=int(faulty), faults_reached=int(faulty and bool(env.env.world["fired"])))
    return figures


def _timed(run: Callable[[], Any]) -> float:
    """CPU seconds `run()` takes (process time: waiting for a shared CPU does not count), with the garbage
    collector off during it, as timeit does."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.process_time()
        run()
        return time.process_time() - started
    finally:
        if enabled:
            gc.enable()


def _episode_step_seconds(provider: Any, task_set: str, task: str, harness: str, agent: Any,
                          max_steps: int) -> float:
    """CPU seconds per env step of one episode of `task` under `harness` (no figures kept)."""
    env = provider.make(task_set, expert=True)
    make = HARNESSES[harness]
    hooks = EpisodeHooks([(harness, make())] if make is not None else [])
    config = _config(task, harness, agent, max_steps, 0)
    bind_env(agent, env)
    results = []
    seconds = _timed(lambda: results.append(run_episode(env, agent, hooks, config, lambda event: None)))
    return seconds / max(results[0].steps, 1)


def time_steps(provider: Any, task_set: str, harnesses: list[str], make_agent: Callable[[], Any], split: str,
               max_steps: int, repeats: int = 7, number: int = 5) -> dict[str, tuple[float, float]]:
    """Per harness: seconds per step and the ratio to a plain step, timed side by side, timeit-style.

    On the domain's clean tasks (no failure, so every harness takes the same steps), each of
    `repeats` rounds plays every task `number` times, alternating an episode with the harness
    and one without it, with the garbage collector off during each. A round's figure is its
    fastest episode's seconds per step each way (as timeit takes the best of a repeat: slower
    ones waited for the CPU) and their ratio; the table gives the median over rounds. Without
    the harness is the loop under `base` (no plugin, no checkpoint); for `langgraph`, the same
    graph compiled without a checkpointer.
    """
    tasks = [t for t in provider.task_sets()[task_set].tasks(split) if "-clean-" in t]

    def per_step(harness: str, task: str, plain: bool) -> float:
        if harness == GRAPH:
            run, nodes = graph.clean_run(provider.make(task_set), task, checkpointed=not plain)
            return _timed(run) / nodes
        return _episode_step_seconds(provider, task_set, task, "base" if plain else harness, make_agent(),
                                     max_steps)

    seconds: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for _ in range(repeats):
        for harness in harnesses:
            pairs = [(per_step(harness, task, False), per_step(harness, task, True))
                     for task in tasks for _ in range(number)]
            best, best_plain = min(p[0] for p in pairs), min(p[1] for p in pairs)
            seconds.setdefault(harness, []).append(best)
            ratios.setdefault(harness, []).append(best / best_plain)
    return {h: (statistics.median(seconds[h]), statistics.median(ratios[h])) for h in harnesses}


def variant_of(domain: str, task: str) -> str:
    """The fault variant of a workflow task id (`<domain>-<variant>-<n>`)."""
    return task[len(domain) + 1:].rpartition("-")[0]


def bench_tasks(provider: Any, domain: str, split: str, per_variant: int | None = None) -> list[str]:
    """The domain's tasks of `split`: all, or the first `per_variant` of each fault variant."""
    tasks = list(provider.task_sets()[domain].tasks(split))
    if per_variant is None:
        return tasks
    kept: dict[str, list[str]] = {}
    for task in tasks:
        kept.setdefault(variant_of(domain, task), []).append(task)
    return [task for task in tasks if task in kept[variant_of(domain, task)][:per_variant]]


def bench(provider: Any, domains: list[str], harnesses: list[str], make_agent: Callable[[], Any], split: str = "test",
          max_steps: int = 80, repeats: int = 7, per_variant: int | None = None,
          out: Path | None = None) -> dict[str, dict[str, Tally]]:
    """Every harness on every task of each domain's split, then the step timing; tallies by domain and harness.

    A task is played under every harness in turn, so the pairs of the latency tests are played side by side, and
    the order of the harnesses turns by one from task to task, and each domain starts one further on, so none is
    always first (the first pays for what later ones find warm: imports, and a model's replies in the response
    cache), not even on each domain's first task. With `out`, each episode's record is appended to
    `out/episodes.jsonl` and its trace written under `out/traces/` (see the module docstring).
    """
    tables: dict[str, dict[str, Tally]] = {}
    for number, domain in enumerate(domains):
        rows = tables.setdefault(domain, {h: Tally() for h in harnesses})
        for index, task in enumerate(bench_tasks(provider, domain, split, per_variant)):
            turn = (index + number) % len(harnesses)  # each domain's first (cold) task starts on another harness
            order = harnesses[turn:] + harnesses[:turn]
            for harness in order:
                trace = out / "traces" / harness / f"{task}.jsonl" if out is not None and harness != GRAPH else None
                figures = play_case(provider, domain, task, harness, make_agent(), max_steps, trace=trace)
                if out is not None:
                    record = {"domain": domain, "variant": variant_of(domain, task), "harness": harness,
                              **{k: v for k, v in figures.items() if k != "sizes"}}
                    with open(out / "episodes.jsonl", "a", encoding="utf-8") as file:
                        file.write(json.dumps(record, default=str) + "\n")
                rows[harness].add(figures)
                rows[harness].variants.setdefault(variant_of(domain, task), Tally()).add(figures)
        if repeats > 0:
            for harness, (per_step, ratio) in time_steps(provider, domain, harnesses, make_agent, split, max_steps,
                                                          repeats).items():
                tables[domain][harness].per_step, tables[domain][harness].ratio = per_step, ratio
    return tables


def summary(tables: dict[str, dict[str, Tally]]) -> dict[str, Any]:
    """The figures of every domain and harness as a JSON-ready mapping (summary.json)."""
    return {domain: {harness: tally.figures() for harness, tally in rows.items()} for domain, rows in tables.items()}


def _aligned(body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in body) for i in range(len(body[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in body]


def latency_seconds(tables: dict[str, dict[str, Tally]]) -> dict[str, dict[str, float]]:
    """Episode wall seconds by harness and task, every domain pooled (task ids name their domain)."""
    seconds: dict[str, dict[str, float]] = {}
    for rows in tables.values():
        for harness, tally in rows.items():
            seconds.setdefault(harness, {}).update(tally.seconds)
    return seconds


def format_tables(tables: dict[str, dict[str, Tally]]) -> str:
    """The tables as aligned text, two per domain: the figures, then per fault variant success, replayed actions
    (r), unsafe admissions (u), false blocks (f) and the mean episode wall seconds; last, the paired latency tests
    of DART against every other row, every domain pooled."""
    lines: list[str] = []
    for domain, rows in tables.items():
        lines.append(f"## {domain}")
        lines += _aligned([list(COLUMNS)] + [tally.row(name) for name, tally in rows.items()])
        lines.append("")
        variants = list(dict.fromkeys(v for tally in rows.values() for v in tally.variants))
        if variants:
            lines.append(f"## {domain} by variant (success, r replayed, u unsafe, f false blocks, mean wall s)")
            lines += _aligned([["harness", *variants]] + [
                [name, *(tally.variants[v].cell() if v in tally.variants else "-" for v in variants)]
                for name, tally in rows.items()])
            lines.append("")
    tests = latency.paired_latency(latency_seconds(tables))
    if tests:
        lines.append("## paired latency: episode wall seconds, other - dart, every domain (sign-flip p, Holm)")
        lines += latency.format_latency(tests)
        lines.append("")
    return "\n".join(lines)
