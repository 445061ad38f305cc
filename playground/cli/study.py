"""`playground study`: list, plan, run and tabulate studies (study files: `playground.core.study_file`)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from playground.cli.options import CLIError, parse_pairs
from playground.core.figures import Figure, column_figure, column_key, keyed_columns, shown_value
from playground.core.study_file import Study, StudyError, load_study
from playground.host.manager import Host, get_host
from playground.run.paths import path_callback

if TYPE_CHECKING:
    from playground.run.study import Cell


def find_study(host: Host, name_or_path: str) -> tuple[Study, str]:
    """The study a name (one a plugin ships) or a path names, and its file; CLIError names the choices."""
    if name_or_path in host.studies:
        path = host.studies.get(name_or_path).path
    elif Path(name_or_path).exists():
        path = name_or_path
    else:
        raise CLIError(f"no study {name_or_path!r}: not a file, nor a shipped study "
                       f"({', '.join(host.studies.names()) or 'none installed'})")
    try:
        return load_study(path), path
    except StudyError as exc:
        raise CLIError(str(exc)) from None


MODEL_AGENTS = ("local", "llm")  # the built-in agents whose figures are a model's (the kind a run's table is)


def run_as_study(run_dir: Path, reference: str | None) -> Study:
    """A plain run directory (`playground run --out DIR`) read as a one-grid study of its harnesses, paired with
    `reference` (default: the run's first harness); its table then reads `run_dir` itself."""
    from playground.run.rundir import RunDirError, read_config

    try:
        config = read_config(run_dir / "config.json")
    except RunDirError as exc:
        raise CLIError(str(exc)) from None
    harnesses = list(config.get("harnesses") or [])
    if reference is not None and reference not in harnesses:
        raise CLIError(f"--reference {reference!r} is not a harness of {run_dir} ({', '.join(harnesses)})")
    grid = {"name": run_dir.name, "env": str(config.get("env") or "?"), "harnesses": harnesses,
            "episodes": max(1, len(config.get("tasks") or ())), "reference": reference}
    agent = str(config.get("agent") or "")
    kind = "real-model" if agent in MODEL_AGENTS else "instrument" if agent == "noisy" else "machinery"
    try:
        return Study.model_validate({"name": run_dir.name, "title": f"the run {run_dir} (agent {agent})",
                                     "kind": kind, "grids": [grid]})
    except ValueError as exc:
        raise CLIError(f"{run_dir} cannot be read as a study: {exc}") from None


def host_figures(host: Host) -> dict[str, Figure]:
    """The study table columns the loaded plugins registered (`register_figures`), by name."""
    return {figure.name: figure for figure in host.figures}


def default_out(study: Study) -> Path:
    """Where a study runs without --out: runs/study-NAME."""
    return Path("runs") / f"study-{study.name}"


@click.group("study")
def study_group() -> None:
    """Studies as data: a grid of runs, their pairing and the table, in one file."""


@study_group.command("list")
def list_command() -> None:
    """The studies the installed plugins ship."""
    host = get_host()
    if not len(host.studies):
        click.echo("no studies installed")
    for spec in host.studies:
        study = load_study(spec.path)  # validated when the plugin registered it
        paper = f"  paper: {study.paper}" if study.paper else ""
        click.echo(f"{spec.name:32s} {spec.title} ({study.kind}){paper}  [plugin {spec.plugin}]  {spec.path}")


@study_group.command("plan")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback, help="the study's directory [default: runs/study-NAME]")
@click.option("--smoke", is_flag=True, help="at smoke size (the study's [smoke]: a few tasks, a few steps)")
@click.option("--rates-from", default=None, callback=path_callback,
              help="an earlier run of the study (its directory: a --smoke run, or one at another budget) whose "
                   "measured rates plan the rest [default: the study's directory]")
def plan_command(study: str, out: str | None, smoke: bool, rates_from: str | None) -> None:
    """Before anything runs: episodes per grid, those finished, and the model calls, tokens and time left at the
    rates its finished episodes (or those of --rates-from) measured, per cell and per step, scaled to the budget;
    then each pipeline's steps left, at the seconds, model calls and tokens per copied episode they measured."""
    from playground.run.pipelines import plan_pipelines
    from playground.run.study import plan, sized

    found, _ = find_study(get_host(), study)
    directory, earlier = Path(out) if out else default_out(found), Path(rates_from) if rates_from else None
    rows = plan(found, directory, smoke, earlier)
    table = Table(title=f"{found.name}: {found.title} ({found.kind} figures)")
    for column in ("grid", "episodes", "finished", "max steps", "model calls left", "tokens left", "time left"):
        table.add_column(column, justify="left" if column == "grid" else "right")
    for row in rows:
        mark = " *" if row.borrowed else ""
        table.add_row(escape(row.grid), str(row.episodes), str(row.finished), str(row.max_steps),
                      "unknown" if row.calls is None else f"{row.calls:,.0f}{mark}",
                      "unknown" if row.tokens is None else f"{row.tokens:,.0f}{mark}",
                      "unknown" if row.seconds is None else f"{row.seconds / 60:,.1f} min{mark}")
    console = Console(width=max(120, Console().width), emoji=False)
    console.print(table)
    steps = plan_pipelines([(p, sized(found.grid(p.grid), found.smoke if smoke else None)) for p in found.pipelines],
                           directory, smoke, earlier)
    if steps:
        after = Table(title="then the pipelines (plugin steps over a copy of a grid's run)")
        for column in ("pipeline", "grid", "steps", "done", "model calls left", "tokens left", "time left"):
            after.add_column(column, justify="left" if column in ("pipeline", "grid") else "right")
        for step in steps:
            after.add_row(escape(step.pipeline), escape(step.grid), str(step.steps), str(step.done),
                          "unknown" if step.calls is None else f"{step.calls:,.0f}",
                          "unknown" if step.tokens is None else f"{step.tokens:,.0f}",
                          "unknown" if step.seconds is None else f"{step.seconds / 60:,.1f} min")
        console.print(after)
    if any(row.borrowed for row in rows):
        click.echo("*: some cells have no finished episode yet: planned at the rates of the same harness in the "
                   "study's other grids with the same agent (per step, scaled to the step budget), else of other "
                   "harnesses; judge calls vary with the grid's options, so treat it as a rough figure")
    if any(row.calls is None for row in rows) or any(step.seconds is None for step in steps):
        click.echo("unknown: no finished episode with that agent (or step of that pipeline) yet; a short first "
                   "run measures the rates: study run --smoke --out S, then study plan --rates-from S")


@study_group.command("run")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback,
              help="the study's directory [default: runs/study-NAME]; rerun to resume")
@click.option("--smoke", is_flag=True, help="at smoke size")
@click.option("--agent", default=None, help="play every grid with this agent instead (a paper's table on your model); "
                                            "a grid whose agent is part of the design (keep_agent) keeps its own")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE", help="options of --agent")
@click.option("--llm-base-url", default=None, help="the OpenAI-compatible endpoint of --agent llm")
@click.option("--model", default=None, help="the model name of --agent llm")
@click.option("--grid", "grids", multiple=True, help="run only this grid (repeatable) [default: every grid]")
@click.option("--playbook", default=None,  # checked by each run, once the backends have registered their URLs
              help="every grid's playbook: a file, or a postgresql:// URL on a cluster [default: each run's own]")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="where episodes play, as for `playground run`")
@click.option("--address", default=None, help="the Ray cluster to join (--executor ray)")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="worker processes or Ray actors")
@click.option("--in-flight", type=click.IntRange(min=1), default=1, show_default=True,
              help="episodes played at once in this process (threads)")
def run_command(study: str, out: str | None, smoke: bool, agent: str | None, agent_options: tuple[str, ...],
                llm_base_url: str | None, model: str | None, grids: tuple[str, ...], playbook: str | None,
                executor: str, address: str | None, workers: int | None, in_flight: int) -> None:
    """Run (or resume) every grid of the study, then print its table."""
    from playground.run.study import run_study, study_table

    host = get_host()
    found, _ = find_study(host, study)
    if (agent_options or llm_base_url or model) and agent is None:
        raise CLIError("--agent-option, --llm-base-url and --model need --agent")
    directory = Path(out) if out else default_out(found)
    options = None
    if agent is not None:
        try:
            options = {**host.agents.get(agent).default_options, **parse_pairs(agent_options, "--agent-option")}
        except KeyError as exc:
            raise CLIError(exc.args[0]) from None
        options.update({key: value for key, value in (("base_url", llm_base_url), ("model", model)) if value})
    try:
        run_study(host, found, directory, smoke, agent, options, grids=list(grids) or None, playbook=playbook,
                  executor=executor, address=address, workers=workers, in_flight=in_flight)
    except StudyError as exc:
        raise CLIError(str(exc)) from None
    try:
        print_table(found, study_table(found, directory, host_figures(host)))
    except StudyError as exc:
        raise CLIError(str(exc)) from None


@study_group.command("table")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback, help="the study's directory [default: runs/study-NAME]")
@click.option("--reference", default=None,
              help="STUDY is a run directory: the harness every other is paired with [default: its first]")
@click.option("--json", "as_json", is_flag=True, help="the cells as JSON")
@click.option("--csv", "as_csv", is_flag=True, help="the cells as CSV")
@click.option("--html", "html_path", default=None, callback=path_callback,
              help="also write the table and its charts to this self-contained HTML file")
@click.option("--force", is_flag=True, help="replace the --html file if it exists")
def table_command(study: str, out: str | None, reference: str | None, as_json: bool, as_csv: bool,
                  html_path: str | None, force: bool) -> None:
    """The table of a study (a name or file, its runs in --out) or of one run directory: each cell's success and
    interval, paired difference against the reference, steps, calls, tokens, interventions and lessons per
    episode, the plugins' figures and the paper's number; with --html, also as a page with its charts."""
    from playground.run.files import atomic_write_text, check_output
    from playground.run.study import study_table

    host = get_host()
    if (Path(study) / "config.json").is_file() and study not in host.studies:
        found, directory = run_as_study(Path(study), reference), Path(study).parent
    elif reference is not None:
        raise CLIError("--reference is for a run directory; a study names its reference per grid")
    else:
        found, _ = find_study(host, study)
        directory = Path(out) if out else default_out(found)
    target = None
    if html_path is not None:  # refused before the table is computed: never over a run's own files
        runs = [d for d in [directory, *(directory / grid.name for grid in found.grids),
                            *(directory / pipeline.name for pipeline in found.pipelines)] if d.is_dir()]
        target = check_output(html_path, force=force, runs=runs, what="study page (--html)")
    try:
        cells = study_table(found, directory, host_figures(host))
    except StudyError as exc:
        raise CLIError(str(exc)) from None
    if target is not None:
        from playground.run.study_html import study_html

        atomic_write_text(target, study_html(found, cells, host_figures(host)))
        click.echo(f"study page: {target}", err=True)
    if as_json:
        click.echo(json.dumps([{**asdict(c), "success": c.success} for c in cells], indent=2))
    elif as_csv:
        click.echo(cells_csv(cells), nl=False)
    else:
        print_table(found, cells)


def cells_csv(cells: list[Cell]) -> str:
    """The cells as CSV, one row each (the paper's figures as `paper_METRIC` columns)."""
    out = io.StringIO()
    metrics = sorted({metric for cell in cells for metric in cell.paper_figures})
    rows = [{**{k: v for k, v in asdict(cell).items() if k not in ("paper_figures", "figures")},
             "success": cell.success, **cell.figures,
             **{f"paper_{metric}": cell.paper_figures.get(metric) for metric in metrics}} for cell in cells]
    writer = csv.DictWriter(out, list(rows[0]) if rows else ["grid", "harness"])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def print_table(study: Study, cells: list[Cell]) -> None:
    """The study's table in the terminal (rich): every measured figure, and the paper's beside where it gives one
    (`reward` and `resolved` only where some cell has them); a keyed figure (a column per key) in a table of its
    own below."""
    from playground.run.study import table_rows

    papers = [metric for metric, _ in study.paper_metric_items()]
    rows = table_rows(study, cells)
    host = get_host()
    columns = list(dict.fromkeys(n for cell in cells for n in cell.figures))
    keyed = keyed_columns(columns)
    figures = {column: host.figures.get(column) for column in columns if column_figure(column) not in keyed}
    shown = [m for m in ("success", "reward", "steps", "invalid", "resolved", "calls", "tokens", "interventions",
                         "lessons") if m not in ("reward", "resolved") or any(r[m] is not None for r in rows)
             or m in papers]
    table = Table(title=f"{study.name}: {study.title} ({study.kind} figures)"
                        + (f"; the paper: {study.paper}" if study.paper else ""))
    one_grid = len(study.grids) + len(study.pipelines) == 1  # (a run directory's table: one folder)
    for column in [*([] if one_grid else ["grid"]), "harness", "n", *shown[:1], "95% CI", "vs ref (p)", *shown[1:],
                   *figures, *(f"paper {m}" for m in papers)]:
        named = column in ("grid", "harness")  # never cut: a harness name is what the row is
        table.add_column(column, justify="left" if named else "right", overflow="fold" if named else "ellipsis",
                         min_width=max((len(str(row[column])) for row in rows), default=0) if named else None)
    for row in rows:
        versus = "-" if row["versus"] is None else f"{shown_value('diff', row['diff'])} ({shown_value('p', row['p'])})"
        interval = f"{shown_value('ci_low', row['ci_low'])}-{shown_value('ci_high', row['ci_high'])}"
        table.add_row(*([] if one_grid else [escape(row["grid"])]), escape(row["harness"]), str(row["n"]),
                      shown_value("success", row["success"]),
                      interval, versus,
                      *(shown_value(m, row[m]) for m in shown[1:]),
                      *(shown_value(column, row.get(column), figure.share) for column, figure in figures.items()),
                      *(shown_value(m, row[f"paper {m}"]) for m in papers))
    console = Console(width=max(200, Console().width), emoji=False)
    console.print(table)
    for name, keys in keyed.items():  # a table per keyed figure: a column per key
        figure = host.figures.get(name)
        by_key = Table(title=name)
        for column in [*([] if one_grid else ["grid"]), "harness", *(column_key(key) for key in keys)]:
            by_key.add_column(column, justify="left" if column in ("grid", "harness") else "right")
        for row in rows:
            by_key.add_row(*([] if one_grid else [escape(row["grid"])]), escape(row["harness"]),
                           *(shown_value(key, row.get(key), figure.share) for key in keys))
        console.print(by_key)
    click.echo("vs ref: the paired difference in success against the grid's reference harness (its first, unless "
               "the study names one), exact McNemar p; steps, invalid, calls, tokens, interventions, lessons: per "
               "episode; resolved: the share of repair verdicts that judged the repair resolved")
    for figure in [*figures.values(), *(host.figures.get(name) for name in keyed)]:
        click.echo(f"{figure.name}: {figure.description} [plugin {figure.plugin}]")
