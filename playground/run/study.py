"""Studies as data: a study file (TOML, `playground.core.study_file.Study`) states a grid of runs, which cells are
paired with which, and, for a paper's table, the paper's numbers; this module plans, runs and tabulates it with
the host's own runner and statistics.

A study is one or more grids. A grid is one `playground run` directory (`OUT/<grid name>`): one env and task
set, one agent with its options, its harnesses (each a cell; stacks `A+B` and loader names too), every harness
on the same tasks, trials and seeds, so cells of a grid pair task by task. The table has a row per (grid, harness)
cell: success with its Wilson interval, the paired difference against the grid's reference harness (exact
McNemar), steps, model calls and tokens, the interventions and lessons per episode, and the paper's number
where the study gives one. `--smoke` shrinks every grid (`[smoke]`: tasks, trials, step budget) so CI can run it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from playground.core.study_file import Grid, Smoke, Study, StudyError
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.report import wilson_interval
from playground.run.rundir import load_records
from playground.run.stats import compare, split_by_harness
from playground.run.validation import resolve_tasks


def sized(grid: Grid, smoke: Smoke | None) -> Grid:
    """The grid at smoke size (no larger than declared), or as declared."""
    if smoke is None:
        return grid
    return grid.model_copy(update={"episodes": min(grid.episodes, smoke.episodes),
                                   "trials": min(grid.trials, smoke.trials),
                                   "max_steps": min(grid.max_steps, smoke.max_steps)})


def grid_config(host: Host, grid: Grid, out: Path) -> RunConfig:
    """The run configuration of one grid, its run directory `out`; StudyError for an env or split that does not
    resolve."""
    env, _, task_set = grid.env.partition(":")
    try:
        task_set, split, tasks = resolve_tasks(host, env, task_set or None, grid.split, grid.episodes)
    except ValueError as exc:
        raise StudyError(f"grid {grid.name!r}: {exc}") from None
    return RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent=grid.agent,
                     harnesses=list(grid.harnesses), out=str(out), seed=grid.seed, max_steps=grid.max_steps,
                     agent_options=dict(grid.agent_options), params=dict(grid.params), trials=grid.trials)


@dataclass(frozen=True)
class PlanRow:
    """What one grid will play: episodes, the step budget, and the expected model calls and seconds (None where
    no earlier run of the grid measured them)."""

    grid: str
    episodes: int
    finished: int
    max_steps: int
    calls: float | None
    seconds: float | None
    borrowed: bool = False  # the rates are other grids' (this one has no finished episode yet)


def plan(study: Study, out: Path, smoke: bool = False) -> list[PlanRow]:
    """Before anything runs: per grid, the episodes to play (harnesses x tasks x trials), those already finished
    in `out`, and the model calls and wall seconds the rest should take at the rates its finished episodes
    measured (agent and judge calls per episode, seconds per episode; for a grid not played yet, those of the
    study's grids with the same agent; None when there are none)."""
    rows = []
    measured = {grid.name: _records(out / grid.name) for grid in study.grids}
    for declared in study.grids:
        grid = sized(declared, study.smoke if smoke else None)
        total = len(grid.harnesses) * grid.episodes * grid.trials
        records = measured[grid.name]
        # a grid not played yet: the rates of the study's other grids with the same agent, where they have some
        sample = records or [r for other in study.grids if other.agent == grid.agent for r in measured[other.name]]
        left = max(0, total - len(records))
        calls = seconds = None
        if sample:
            calls = left * sum(_calls(r) for r in sample) / len(sample)
            seconds = left * sum(float(r.get("seconds") or 0.0) for r in sample) / len(sample)
        rows.append(PlanRow(grid.name, total, min(len(records), total), grid.max_steps, calls, seconds,
                            borrowed=bool(sample) and not records))
    return rows


def _records(run_dir: Path) -> list[dict]:
    """A grid's finished records ([] before its first run)."""
    if not (run_dir / "episodes.jsonl").exists():
        return []
    return load_records(run_dir)


def _tokens(record: Mapping[str, Any]) -> int:
    """All the tokens one episode spent: the agent's and its judges'."""
    return sum(int(record.get(key, 0)) for key in ("prompt_tokens", "completion_tokens", "judge_prompt_tokens",
                                                    "judge_completion_tokens"))


def _calls(record: Mapping[str, Any]) -> int:
    """The model calls one episode made: the agent's (a completion per proposal with tokens) and its judges'."""
    judged = sum(int(v.get("calls", 0)) for v in (record.get("judge_replies") or {}).values()
                 if isinstance(v, dict))
    return int(record.get("agent_calls", 0) or 0) + judged


def run_study(host: Host, study: Study, out: Path, smoke: bool = False, agent: str | None = None,
              agent_options: dict[str, Any] | None = None) -> dict[str, dict]:
    """Run (or resume) every grid of `study` under `out`, each its own run directory; return their summaries.
    `agent`/`agent_options` replace every grid's (a paper's table on the user's model)."""
    from playground.run.runner import run

    summaries = {}
    for declared in study.grids:
        grid = sized(declared, study.smoke if smoke else None)
        if agent is not None:
            grid = grid.model_copy(update={"agent": agent, "agent_options": dict(agent_options or {})})
        summaries[grid.name] = run(host, grid_config(host, grid, out / grid.name))
    (out / "study.json").write_text(json.dumps(study.model_dump(), indent=2) + "\n")
    return summaries


@dataclass(frozen=True)
class Cell:
    """One row of a study's table: a harness of a grid and its figures."""

    grid: str
    harness: str
    episodes: int
    wins: int
    ci: tuple[float, float]
    versus: str | None  # the reference harness it is paired with (None for the reference itself)
    diff: float | None
    p: float | None
    steps: float
    calls: float
    tokens: float
    interventions: float
    lessons: float
    paper: float | None

    @property
    def success(self) -> float:
        """The share of episodes won."""
        return self.wins / self.episodes if self.episodes else 0.0


def study_table(study: Study, out: Path) -> list[Cell]:
    """The study's table from its run directories: one cell per (grid, harness) that has finished episodes."""
    cells = []
    for grid in study.grids:
        by_harness = split_by_harness(_records(out / grid.name))
        reference = grid.reference or grid.harnesses[0]
        for harness in grid.harnesses:
            records = by_harness.get(harness, [])
            if not records:
                continue
            n, wins = len(records), sum(1 for r in records if r["won"])
            diff = p = None
            versus = reference if harness != reference and by_harness.get(reference) else None
            if versus is not None:
                success = compare(by_harness[reference], records, label_a=reference, label_b=harness,
                                  resamples=1000).metric("success")
                diff, p = success.diff, success.p_value
            paper = study.paper_success.get(f"{grid.name}/{harness}", study.paper_success.get(harness))
            low, high = wilson_interval(wins, n)
            cells.append(Cell(grid.name, harness, n, wins, (low, high), versus, diff, p,
                              sum(r["steps"] for r in records) / n, sum(_calls(r) for r in records) / n,
                              sum(_tokens(r) for r in records) / n,
                              sum(sum((r.get("interventions") or {}).values()) for r in records) / n,
                              sum(int(r.get("lessons_added", 0)) for r in records) / n, paper))
    return cells
