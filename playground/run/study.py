"""Studies as data: a study file (TOML, `playground.core.study_file.Study`) states a grid of runs, which cells are
paired with which, and, for a paper's table, the paper's numbers; this module plans, runs and tabulates it with
the host's own runner and statistics.

A study is one or more grids. A grid is one `playground run` directory (`OUT/<grid name>`): one env and task
set, one agent with its options, its harnesses (each a cell; stacks `A+B` and loader names too), every harness
on the same tasks, trials and seeds, so cells of a grid pair task by task. The table has a row per (grid, harness)
cell: success with its Wilson interval, the paired difference against the grid's reference harness (exact
McNemar), steps, model calls and tokens, the interventions and lessons per episode, and the paper's number
where the study gives one (its success and any other figure, `paper_figures`). `--smoke` shrinks every grid
(`[smoke]`: tasks, trials, step budget; a stand-in env for a task set that needs a download) so CI can run it.
Grids play in the file's order; a grid with `playbook_from = "GRID/HARNESS"` starts each of its harnesses from
its own copy of the playbook that earlier cell grew, on tasks it never saw (the held-out protocol). Each grid is
followed by the pipelines over it: plugin steps run over a copy of its finished run (`playground.run.pipelines`),
whose files a later grid may deploy (`{out}/PIPELINE/...`); a pipeline's rows are the grid's cells as the copy holds
them, with the figures its steps' files give.

`plan` estimates what is left before it runs, per cell: the model calls, tokens and seconds an episode of that
harness took in that grid, else in the study's other grids with the same agent (per step, scaled to the grid's
step budget), else the grid's or the study's other harnesses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from playground.core.events import Event
from playground.core.figures import Figure, column_figure, keyed_columns
from playground.core.records import EpisodeRecord
from playground.core.study_file import Grid, Smoke, Study, StudyError, named_folders
from playground.host.manager import Host
from playground.run.config import RunConfig, playbook_path
from playground.run.pipelines import run_pipelines
from playground.run.report import wilson_interval
from playground.run.rundir import RunDirError, record_trace, records_so_far
from playground.run.stats import compare, split_by_harness
from playground.run.traces import read_events
from playground.run.validation import resolve_tasks


def sized(grid: Grid, smoke: Smoke | None) -> Grid:
    """The grid at smoke size (no larger than declared, on its stand-in where it has one), or as declared."""
    if smoke is None:
        return grid
    update: dict[str, Any] = {"episodes": min(grid.episodes, smoke.episodes), "trials": min(grid.trials, smoke.trials),
                              "max_steps": min(grid.max_steps, smoke.max_steps)}
    stand_in = smoke.stand_ins.get(grid.name)
    if stand_in is not None:
        update.update(env=stand_in.env, split=stand_in.split)
        if stand_in.params is not None:
            update["params"] = dict(stand_in.params)
    return grid.model_copy(update=update)


def grid_config(host: Host, grid: Grid, out: Path, here: str | None = None,
                study_dir: Path | None = None) -> RunConfig:
    """The run configuration of one grid, its run directory `out` (`here`: the study file's folder, for `{here}`
    in harness names; `study_dir`: the study's directory, for `{out}`); StudyError for an env or split that does
    not resolve."""
    env, _, task_set = grid.env.partition(":")
    try:
        task_set, split, tasks = resolve_tasks(host, env, task_set or None, grid.split, grid.episodes)
    except ValueError as exc:
        raise StudyError(f"grid {grid.name!r}: {exc}") from None
    return RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent=grid.agent,
                     harnesses=grid.runnable(here, study_dir), out=str(out), seed=grid.seed,
                     max_steps=grid.max_steps, agent_options=dict(grid.agent_options), params=dict(grid.params),
                     trials=grid.trials)


@dataclass(frozen=True)
class PlanRow:
    """What one grid will play: episodes, the step budget, and the expected model calls, tokens and seconds (None
    where no finished episode of the study measured them)."""

    grid: str
    episodes: int
    finished: int
    max_steps: int
    calls: float | None
    seconds: float | None
    borrowed: bool = False  # some rates are other grids' or other harnesses' (not this cell's own episodes)
    tokens: float | None = None


@dataclass(frozen=True)
class _Rates:
    """Per-step means of a sample of episodes, and the mean steps they took under their step budget."""

    calls: float
    tokens: float
    seconds: float
    steps: float
    budget: int

    @classmethod
    def of(cls, records: list[EpisodeRecord], budget: int) -> _Rates:
        steps = sum(max(1, record.steps) for record in records)
        return cls(sum(record.model_calls for record in records) / steps,
                   sum(record.tokens for record in records) / steps,
                   sum(record.seconds for record in records) / steps, steps / len(records), budget)

    def per_episode(self, budget: int) -> tuple[float, float, float]:
        """Calls, tokens and seconds of one episode under step budget `budget` (its steps scaled by the budgets)."""
        steps = min(float(budget), self.steps * budget / self.budget)
        return self.calls * steps, self.tokens * steps, self.seconds * steps


def plan(study: Study, out: Path, smoke: bool = False, rates_from: Path | None = None) -> list[PlanRow]:
    """Before anything runs: per grid, the episodes to play (harnesses x tasks x trials), those already finished
    in `out`, and the model calls, tokens and wall seconds the rest should take. Each cell's rates are those its
    own finished episodes measured (in `rates_from`, an earlier run of the study at any size or budget, such as a
    `--smoke` run, else in `out`); for a cell with none, those of the same harness in the study's other grids
    with the same agent, else of the grid's other harnesses, else of the study's grids with the same agent (rates
    per step, scaled to the grid's step budget); None when the study has played nothing with that agent."""
    grids = [sized(declared, study.smoke if smoke else None) for declared in study.grids]
    done = {grid.name: split_by_harness(records_so_far(out / grid.name)) for grid in grids}
    source = out if rates_from is None else rates_from
    measured = done if rates_from is None else {grid.name: split_by_harness(records_so_far(source / grid.name))
                                                for grid in grids}
    played = {grid.name: _played_budget(source / grid.name, grid.max_steps) for grid in grids}
    names_here = {grid.name: played_names(grid, out / grid.name, study.here, out) for grid in grids}
    names_there = {grid.name: played_names(grid, source / grid.name, study.here, source) for grid in grids}

    def cell(grid: Grid, harness: str) -> list[EpisodeRecord]:
        return measured[grid.name].get(names_there[grid.name][harness], [])

    def finished_in(grid: Grid, harness: str) -> int:
        return min(len(done[grid.name].get(names_here[grid.name][harness], [])), grid.episodes * grid.trials)

    rows = []
    for grid in grids:
        per_cell = grid.episodes * grid.trials
        total = len(grid.harnesses) * per_cell
        finished = sum(finished_in(grid, harness) for harness in grid.harnesses)
        kin = [other for other in grids if other.agent == grid.agent]
        calls = tokens = seconds = 0.0
        known, borrowed = True, False
        for harness in grid.harnesses:
            left = per_cell - finished_in(grid, harness)
            if not left:
                continue
            rates = _cell_rates(grid, harness, kin, cell, played)
            if rates is None:
                known = False
                continue
            borrowed = borrowed or rates[1]
            episode = rates[0].per_episode(grid.max_steps)
            calls, tokens, seconds = calls + left * episode[0], tokens + left * episode[1], seconds + left * episode[2]
        rows.append(PlanRow(grid.name, total, finished, grid.max_steps, calls if known else None,
                            seconds if known else None, borrowed=known and borrowed,
                            tokens=tokens if known else None))
    return rows


def played_names(grid: Grid, folder: Path, here: str | None, study_dir: Path | None) -> dict[str, str]:
    """{declared harness: the name its run records}. Names with `{here}` or `{out}` are the paths the run saw,
    which the run's config.json keeps in the declared order, so a study directory or package moved since still
    matches; without a config (nothing played yet) they are the names as they would run now."""
    runnable = grid.runnable(here, study_dir)
    try:
        recorded = json.loads((folder / "config.json").read_text())["harnesses"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = None
    if not isinstance(recorded, list) or len(recorded) != len(runnable) or any(
            "{" not in declared and declared != name for declared, name in zip(grid.harnesses, recorded)):
        recorded = runnable
    return dict(zip(grid.harnesses, (str(name) for name in recorded), strict=True))


def _played_budget(run_dir: Path, declared: int) -> int:
    """The step budget a grid's run directory was played under (its config), else `declared`."""
    try:
        return int(json.loads((run_dir / "config.json").read_text())["max_steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return declared


def _cell_rates(grid: Grid, harness: str, kin: list[Grid], cell, played: dict[str, int]) -> tuple[_Rates, bool] | None:
    """The rates a cell's remaining episodes are planned at, and whether they are borrowed: its own episodes,
    else the same harness in a kindred grid, else the grid's other harnesses, else any kindred grid's."""
    own = cell(grid, harness)
    if own:
        return _Rates.of(own, played[grid.name]), False
    for candidates in ([(other, harness) for other in kin if harness in other.harnesses],
                       [(grid, other) for other in grid.harnesses],
                       [(other, name) for other in kin for name in other.harnesses]):
        pooled = [(other, cell(other, name)) for other, name in candidates if cell(other, name)]
        if pooled:
            records = [record for _, found in pooled for record in found]
            steps = sum(max(1, record.steps) for record in records)
            # the budget the sample played under, weighted by its steps
            budget = sum(played[other.name] * sum(max(1, r.steps) for r in found) for other, found in pooled) / steps
            rates = _Rates.of(records, 1)
            return _Rates(rates.calls, rates.tokens, rates.seconds, rates.steps, budget), True
    return None


def with_agent(study: Study, agent: str | None, agent_options: dict[str, Any] | None = None) -> Study:
    """The study with every grid played by `agent` (and `agent_options`) instead, but a grid whose agent is part of
    the design (`keep_agent`); the study itself for None."""
    if agent is None:
        return study
    grids = [grid if grid.keep_agent else grid.model_copy(update={"agent": agent,
                                                                 "agent_options": dict(agent_options or {})})
             for grid in study.grids]
    changed = study.model_copy(update={"grids": grids})
    changed._here = study.here
    return changed


def run_study(host: Host, study: Study, out: Path, smoke: bool = False, agent: str | None = None,
              agent_options: dict[str, Any] | None = None, grids: list[str] | None = None,
              playbook: str | None = None, **where: Any) -> dict[str, dict]:
    """Run (or resume) every grid of `study` under `out` (or those named in `grids`), each its own run directory
    and each followed by the pipelines over it; return the grids' summaries. A grid that deploys what a failed
    pipeline was to make is not played; StudyError names every failure at the end. `agent`/`agent_options`
    replace every grid's (a paper's table on the user's model), but for a grid whose agent is part of the design
    (`keep_agent`). `playbook` is every grid's playbook (a file, or a URL such as `postgresql://...` for a
    cluster); `where` says where episodes play, as `runner.run` takes it (`executor`, `address`, `workers`,
    `in_flight`)."""
    from playground.run.runner import run

    unknown = sorted(set(grids or ()) - {grid.name for grid in study.grids})
    if unknown:
        raise StudyError(f"study {study.name!r} has no grid {', '.join(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(study.model_dump(), indent=2) + "\n")
    summaries = {}
    failed: dict[str, str] = {}  # pipeline or grid -> what went wrong
    played = with_agent(study, agent, agent_options)
    for declared in played.grids:
        if grids is not None and declared.name not in grids:
            continue
        missing = sorted(named_folders(declared.harnesses) & set(failed))
        if missing:
            failed[declared.name] = (f"grid {declared.name!r} not played: it deploys what {missing[0]!r} was to "
                                     f"make")
            continue
        grid = sized(declared, study.smoke if smoke else None)
        config = grid_config(host, grid, out / grid.name, study.here, out)
        if grid.playbook_from is not None:
            start_from_playbook(host, played, grid, config, out, smoke, playbook)
        elif playbook is not None:
            config = replace(config, playbook=playbook)
        summaries[grid.name] = run(host, config, **where)
        failed.update(run_pipelines(host, [(p, grid) for p in played.pipelines_of(grid.name)], out, smoke))
    if failed:
        raise StudyError("; ".join(failed.values()) + " (rerun `study run` to resume from what failed)")
    return summaries


def start_from_playbook(host: Host, study: Study, grid: Grid, config: RunConfig, out: Path, smoke: bool,
                        shared: str | None) -> None:
    """The held-out protocol (a grid's `playbook_from`): give each harness of `grid` its own copy of the playbook
    the source cell grew, where it has none yet (so a resumed grid keeps the copy it had), through the plugin
    that owns the playbook format (`copy_playbook`). StudyError, before anything is written, for a shared
    `--playbook`, a source grid that shares a task with `grid` or has not finished its cell."""
    source_name, _, harness = str(grid.playbook_from).partition("/")
    if shared is not None:
        raise StudyError(f"grid {grid.name!r} starts each harness from its own copy of the playbook "
                         f"{grid.playbook_from} grew; a shared --playbook would mix its cells")
    source_grid = sized(next(g for g in study.grids if g.name == source_name), study.smoke if smoke else None)
    source = grid_config(host, source_grid, out / source_name, study.here)
    both = sorted(set(source.tasks) & set(config.tasks))
    if both:
        raise StudyError(f"grid {grid.name!r} and grid {source_name!r}, whose playbook it starts from, share "
                         f"{len(both)} task(s) ({', '.join(both[:3])}{', ...' if len(both) > 3 else ''}); a playbook "
                         f"carried to the tasks it grew on is not held out: give the grids disjoint splits")
    grown_by = played_names(source_grid, out / source_name, study.here, out)[harness]
    finished = {record.task_id for record in split_by_harness(records_so_far(out / source_name)).get(grown_by, [])}
    if not set(source.tasks) <= finished:
        raise StudyError(f"grid {grid.name!r} starts from the playbook {grid.playbook_from} grows, but that cell "
                         f"has {len(set(source.tasks) - finished)} task(s) left to play: run grid {source_name!r} "
                         f"first")
    grown = playbook_path(source, grown_by)
    for name in config.harnesses:
        target = Path(playbook_path(config, name))
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if not host.pm.hook.copy_playbook(source=grown, target=str(target)):
            raise StudyError(f"grid {grid.name!r}: no loaded plugin copies the playbook at {grown!r} "
                             f"(copy_playbook)")


@dataclass(frozen=True)
class Cell:
    """One row of a study's table: a harness of a grid (as the study declares it) and its figures."""

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
    paper: float | None  # the paper's success for this cell
    invalid: float = 0.0  # invalid actions per episode
    reward: float | None = None  # the mean score, where the env gives one
    resolved: float | None = None  # the share of repair verdicts that judged the repair resolved
    paper_figures: dict[str, float] = field(default_factory=dict)  # the paper's figures, per metric
    figures: dict[str, float | None] = field(default_factory=dict)  # the plugins' columns (`register_figures`)

    @property
    def success(self) -> float:
        """The share of episodes won."""
        return self.wins / self.episodes if self.episodes else 0.0


def chosen_figures(study: Study, figures: Mapping[str, Figure]) -> dict[str, Figure]:
    """The plugins' figures the study's table computes: those it names (StudyError for one no plugin registers),
    else every one."""
    if study.figures is None:
        return dict(figures)
    unknown = [name for name in study.figures if name not in figures]
    if unknown:
        raise StudyError(f"study {study.name!r} names figure(s) no loaded plugin registers: {', '.join(unknown)} "
                         f"(registered: {', '.join(sorted(figures)) or 'none'})")
    return {name: figures[name] for name in study.figures}


def _events_in(run_dir: Path):
    """A reader of one episode's trace events in `run_dir` ([] where the trace is not there)."""

    def events(record: EpisodeRecord) -> list[Event]:
        try:
            path = record_trace(run_dir, record)
        except RunDirError:
            return []
        return read_events(path) if path.is_file() else []

    return events


def study_table(study: Study, out: Path, figures: Mapping[str, Figure] | None = None) -> list[Cell]:
    """The study's table from its run directories: one cell per (grid, harness) that has finished episodes, then
    per (pipeline, harness of its grid), with the plugins' `figures` (`chosen_figures`; a study that names none
    shows those some cell has a value for)."""
    chosen = chosen_figures(study, figures or {})
    cells = []
    for folder, grid, shown in study.folders():
        events = _events_in(out / folder)
        by_harness = split_by_harness(records_so_far(out / folder))
        names = played_names(grid, out / folder, study.here, out)
        reference = grid.reference or grid.harnesses[0]
        for harness in shown:
            records = by_harness.get(names[harness], [])
            if not records:
                continue
            n, wins = len(records), sum(1 for record in records if record.won)
            diff = p = None
            versus = reference if harness != reference and by_harness.get(names.get(reference, reference)) else None
            if versus is not None:
                success = compare(by_harness[names[reference]], records, label_a=reference, label_b=harness,
                                  resamples=1000).metric("success")
                diff, p = success.diff, success.p_value
            low, high = wilson_interval(wins, n)
            scores = [record.score for record in records if record.score is not None]
            verdicts = sum(record.verified_recoveries + record.unresolved_recoveries for record in records)
            papers = {metric: value for metric, _ in study.paper_metric_items()
                      if (value := study.paper_number(metric, folder, harness)) is not None}
            cells.append(Cell(
                folder, harness, n, wins, (low, high), versus, diff, p,
                steps=sum(record.steps for record in records) / n,
                calls=sum(record.model_calls for record in records) / n,
                tokens=sum(record.tokens for record in records) / n,
                interventions=sum(sum(record.interventions.values()) for record in records) / n,
                lessons=sum(record.lessons_added for record in records) / n,
                paper=papers.get("success"),
                invalid=sum(record.invalid_actions for record in records) / n,
                reward=sum(scores) / len(scores) if scores else None,
                resolved=sum(record.verified_recoveries for record in records) / verdicts if verdicts else None,
                paper_figures=papers, figures=_figure_values(chosen, records, events, out / folder)))
    columns = list(dict.fromkeys(column for cell in cells for column in cell.figures))  # keyed figures: every key
    columns = [c for c in columns if c not in keyed_columns(columns)]  # a keyed figure's bare name: None elsewhere
    if study.figures is None:  # show only the figures that say something about some cell
        columns = [column for column in columns if any(cell.figures.get(column) for cell in cells)]
    else:  # in the order the study names them (a keyed figure's keys may first appear in a later cell)
        named = study.figures
        columns.sort(key=lambda column: named.index(column_figure(column)))
    return [replace(cell, figures={column: cell.figures.get(column) for column in columns}) for cell in cells]


def _figure_values(chosen: Mapping[str, Figure], records: list[EpisodeRecord], events,
                   folder: Path) -> dict[str, float | None]:
    """Each figure's value for one cell (a keyed figure's as `NAME[KEY]` columns), from its records and events or
    from the files in its run directory `folder`; StudyError names a figure whose function failed, and its plugin.
    Each episode's trace is read once for the cell, however many figures read it."""
    read: dict[str, list[Event]] = {}

    def cached(record: EpisodeRecord) -> list[Event]:
        if record.key not in read:
            read[record.key] = events(record)
        return read[record.key]

    values: dict[str, float | None] = {}
    for name, figure in chosen.items():
        try:
            value = figure.value(records, cached, folder)
            values.update({f"{name}[{key}]": v for key, v in value.items()} if isinstance(value, Mapping)
                          else {name: value})
        except Exception as exc:  # noqa: BLE001 - a plugin's figure function; named, not a crash
            raise StudyError(f"figure {name!r} (plugin {figure.plugin!r}) failed: {type(exc).__name__}: {exc}") \
                from exc
    return values


MEASURED = ("success", "reward", "steps", "invalid", "resolved", "calls", "tokens", "interventions", "lessons")


def study_columns(study: Study, cells: Sequence[Cell] = ()) -> list[str]:
    """The table's columns: the cell, its size and pairing, every measured figure, the plugins' figures the cells
    have (those the study names, where it names them), and a `paper METRIC` column for each metric the study gives
    the paper's numbers for."""
    measured = list(dict.fromkeys(column for cell in cells for column in cell.figures))
    plugins = (measured if study.figures is None
               else [column for name in study.figures
                     for column in ([c for c in measured if column_figure(c) == name] or [name])])
    return (["grid", "harness", "n", "ci_low", "ci_high", "versus", "diff", "p", *MEASURED, *plugins]
            + [f"paper {metric}" for metric, _ in study.paper_metric_items()])


def table_rows(study: Study, cells: list[Cell]) -> list[dict[str, Any]]:
    """The table's rows, one per cell, keyed by `study_columns` (None where a figure is not measured or the paper
    gives none for that cell)."""
    rows = []
    for cell in cells:
        row: dict[str, Any] = {"grid": cell.grid, "harness": cell.harness, "n": cell.episodes, "ci_low": cell.ci[0],
                               "ci_high": cell.ci[1], "versus": cell.versus, "diff": cell.diff, "p": cell.p}
        row.update({metric: getattr(cell, metric) for metric in MEASURED})
        row.update(cell.figures)
        row.update({f"paper {metric}": cell.paper_figures.get(metric) for metric, _ in study.paper_metric_items()})
        rows.append(row)
    return rows
