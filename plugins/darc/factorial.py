"""`darc factorial`: the ranked action view against the recovery prompt (the shape of the paper's Table 13).

On the same tasks, the guard intervention (`--guard`, default ALFWorld's `action_pruning`)
runs with its repair off, so that only the two factors act:

- the action view: the env's whole admissible list (`view=full`) or the guard's top 12
  (`view=top`: the agent is shown only those, through the `agent_actions` hook);
- the recovery prompt: absent (`recovery_prompt=off`) or present every step (`always`).

Two more rows: the guard's top-1 command played every step with no model (`--forced-agent`,
default `guard-top1`), and a control showing 12 admissible commands drawn at random
(`view=random`). The agent is `--agent` (the noisy instrument by default).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from playground.host_api import HarnessSpec, Host, RunConfig, check_finished, run

PREFIX = "darc-factorial:"
# (row, view, recovery prompt)
CELLS = (
    ("full set, no prompt", "full", "off"),
    ("full set, prompt", "full", "always"),
    ("top-12, no prompt", "top", "off"),
    ("top-12, prompt", "top", "always"),
    ("random 12 (control)", "random", "off"),
)
FORCED = "forced top-1, no model"


@dataclass(frozen=True)
class Row:
    """One row of the factorial: its settings and what the run measured."""

    name: str
    harness: str
    agent: str
    success: float
    steps: float
    invalid: float


def cell_harness(guard: str, view: str, prompt: str) -> str:
    """The harness name of one cell."""
    return f"{PREFIX}{guard}-{view}-{prompt}"


def cell_params(view: str, prompt: str) -> dict:
    """The parameters of one cell: the guard with `view` and `prompt`, its repair off."""
    return {"view": view, "recovery_prompt": prompt, "repair": False}


def cell_harness_spec(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-factorial:GUARD-VIEW-PROMPT`: one cell of the factorial."""
    guard, _, view_prompt = rest.rpartition("-")
    guard, _, view = guard.rpartition("-")
    prompt = view_prompt
    if not guard or (view, prompt) not in {(v, p) for _, v, p in CELLS}:
        raise ValueError(f"{name!r}: not {PREFIX}GUARD-VIEW-PROMPT with VIEW-PROMPT one of "
                         f"{', '.join(f'{v}-{p}' for _, v, p in CELLS)}")
    return HarnessSpec(name, (guard,), cell_params(view, prompt),
                       f"{guard} with view={view}, recovery_prompt={prompt}, no repair", "darc")


def register_cells(host: Host, guard: str) -> list[str]:
    """The names of the cells' harnesses (built by the `darc-factorial:` harness loader)."""
    return [cell_harness(guard, view, prompt) for _, view, prompt in CELLS]


def factorial(host: Host, config: RunConfig, guard: str, forced_agent: str | None, out: str | Path) -> list[Row]:
    """Run the cells (one run) and the forced top-1 row (a second run, with `forced_agent`); return the rows."""
    out = Path(out)
    harnesses = register_cells(host, guard)
    summary = check_finished(run(host, replace(config, harnesses=harnesses, out=str(out / "cells"))), out / "cells")
    rows = []
    for (label, _, _), harness in zip(CELLS, harnesses):
        stats = summary["harnesses"][harness]
        rows.append(Row(label, harness, config.agent, stats["success_rate"], stats["mean_steps"],
                        stats["invalid_actions_per_episode"]))
    if forced_agent:
        options = {k: v for k, v in config.params.items() if k in ("prior_games", "top_actions")}
        forced = check_finished(run(host, replace(config, agent=forced_agent, agent_options=options,
                                                  harnesses=["base"], params={}, out=str(out / "forced-top1"))),
                                out / "forced-top1")
        stats = forced["harnesses"]["base"]
        rows.append(Row(FORCED, "base", forced_agent, stats["success_rate"], stats["mean_steps"],
                        stats["invalid_actions_per_episode"]))
    return rows


def table(rows: list[Row], tasks: int) -> str:
    """The printed table."""
    lines = [f"{'row':<24} {'agent':<12} {'success':>8} {'steps':>7} {'invalid/ep':>10}   ({tasks} tasks)",
             f"{'-' * 24} {'-' * 12} {'-' * 8} {'-' * 7} {'-' * 10}"]
    for row in rows:
        lines.append(f"{row.name:<24} {row.agent:<12} {row.success:8.3f} {row.steps:7.2f} {row.invalid:10.2f}")
    return "\n".join(lines)
