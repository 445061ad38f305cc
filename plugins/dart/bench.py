"""`playground dart bench`: DART, its ablations and the baselines on the same workflow cases.

Each harness plays every task of a domain's split with the same agent and seed. Figures
per harness: success (the final state passes the env's semantic validity check), replayed
actions (env steps taken minus the steps of the final branch), preserved completed
instances (committed instances a rollback kept), blocked rollbacks, unsafe admissions
(restores that crossed an irreversible effect, the env's ground truth) / false blocks
(blocked where restoring the failed instance's entry would have crossed none), sidecar
overhead per step (seconds in the sidecar's hooks and snapshots per step, as a ratio to a
plain env step timed in the same episodes) and the mean snapshot size. Ground truth comes
from the env object the bench holds, never through the sidecar.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from playground.agents.base import bind_env
from playground.core.episode_hooks import EpisodeHooks
from playground.core.loop import EpisodeConfig, run_episode
from playground.plugins.dart import ABLATIONS, BASELINES, sidecar


def _maker(class_name: str, params: dict[str, Any]) -> Callable[[], Any]:
    return lambda: getattr(sidecar, class_name)(params)


HARNESSES: dict[str, Callable[[], Any] | None] = {
    "base": None,
    "dart": _maker("Dart", {}),
    **{name: _maker("Dart", params) for name, params, _ in ABLATIONS},
    **{name: _maker(cls, {}) for name, cls, _ in BASELINES},
}
COLUMNS = ("harness", "success", "replayed", "preserved", "blocked", "unsafe/false-block", "overhead", "snapshot B")


class TimedEnv:
    """Delegates to an env, timing `step` and `snapshot` and measuring snapshot sizes."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.step_seconds = self.snapshot_seconds = 0.0
        self.steps = 0
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, action: str) -> Any:
        started = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.step_seconds += time.perf_counter() - started
            self.steps += 1

    def snapshot(self) -> Any:
        started = time.perf_counter()
        snap = self.env.snapshot()
        self.snapshot_seconds += time.perf_counter() - started
        self.sizes.append(len(pickle.dumps(snap)))
        return snap


@dataclass
class Tally:
    episodes: int = 0
    won: int = 0
    replayed: int = 0
    preserved: int = 0
    blocked: int = 0
    unsafe: int = 0
    false_blocks: int = 0
    steps: int = 0
    step_seconds: float = 0.0
    overhead_seconds: float = 0.0
    sizes: list[int] = field(default_factory=list)

    def row(self, name: str) -> list[str]:
        plain = self.step_seconds / self.steps if self.steps else 0.0
        overhead = self.overhead_seconds / self.steps / plain if self.steps and plain else 0.0
        size = sum(self.sizes) / len(self.sizes) if self.sizes else 0
        return [name, f"{self.won}/{self.episodes}", str(self.replayed), str(self.preserved), str(self.blocked),
                f"{self.unsafe}/{self.false_blocks}", f"{overhead:.2f}x" if self.sizes else "-",
                f"{size:.0f}" if self.sizes else "-"]


def play_case(provider: Any, task_set: str, task: str, harness: str, agent: Any, max_steps: int,
              seed: int = 0) -> dict[str, Any]:
    """Play one task under one harness; return its figures."""
    env = TimedEnv(provider.make(task_set, expert=True))
    make = HARNESSES[harness]
    plugin = make() if make is not None else None
    hooks = EpisodeHooks([(harness, plugin)] if plugin is not None else [])
    figures: dict[str, Any] = {"replayed": 0, "preserved": 0, "blocked": 0, "false_blocks": 0}
    position = 0
    committed_at: dict[int, int] = {}

    def committed() -> int:
        state = env.env.state
        return sum(state["done"][i.id] == len(i.skeleton.steps) for i in env.env.instances)

    def emit(kind: str, data: dict) -> None:
        nonlocal position
        if kind == "step":
            position = data["step"] + 1
            committed_at[position] = committed()
        elif kind == "rollback":
            figures["preserved"] += committed_at.get(data["to_step"], 0)
            position = data["to_step"]
        elif kind == "intervention" and data.get("details", {}).get("blocked"):
            figures["blocked"] += 1
            candidate = data["details"].get("candidate")
            if candidate is not None and not env.env.crosses_irreversible(candidate):
                figures["false_blocks"] += 1

    config = EpisodeConfig("bench", f"bench:{task}", "workflow", task, harness, type(agent).__name__, seed, max_steps,
                           params={"max_rollbacks": 10})
    bind_env(agent, env)
    result = run_episode(env, agent, hooks, config, emit)
    if result.status == "error":
        raise RuntimeError(f"{harness} on {task}: {result.error}")
    figures.update(won=result.won and env.env.valid(), steps=result.steps, replayed=result.steps - position,
                   unsafe=env.env.world["unsafe_restores"], step_seconds=env.step_seconds, env_steps=env.steps,
                   overhead=(plugin.watch.seconds if plugin is not None else 0.0) + env.snapshot_seconds,
                   sizes=env.sizes)
    return figures


def bench(provider: Any, domains: list[str], harnesses: list[str], make_agent: Callable[[], Any], split: str = "test",
          max_steps: int = 80) -> dict[str, dict[str, Tally]]:
    """Every harness on every task of each domain's split; tallies by domain and harness."""
    tables: dict[str, dict[str, Tally]] = {}
    for domain in domains:
        tasks = provider.task_sets()[domain].tasks(split)
        for harness in harnesses:
            tally = tables.setdefault(domain, {}).setdefault(harness, Tally())
            for task in tasks:
                f = play_case(provider, domain, task, harness, make_agent(), max_steps)
                tally.episodes += 1
                tally.won += bool(f["won"])
                for key in ("replayed", "preserved", "blocked", "unsafe", "false_blocks", "steps"):
                    setattr(tally, key, getattr(tally, key) + f[key])
                tally.step_seconds += f["step_seconds"]
                tally.overhead_seconds += f["overhead"]
                tally.sizes += f["sizes"]
    return tables


def format_tables(tables: dict[str, dict[str, Tally]]) -> str:
    lines: list[str] = []
    for domain, rows in tables.items():
        body = [list(COLUMNS)] + [tally.row(name) for name, tally in rows.items()]
        widths = [max(len(r[i]) for r in body) for i in range(len(COLUMNS))]
        lines.append(f"## {domain}")
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in body]
        lines.append("")
    return "\n".join(lines)
