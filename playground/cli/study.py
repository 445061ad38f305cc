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
from rich.table import Table

from playground.cli.options import CLIError, parse_pairs
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
        click.echo(f"{spec.name:32s} {spec.title}  [plugin {spec.plugin}]  {spec.path}")


@study_group.command("plan")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback, help="the study's directory [default: runs/study-NAME]")
@click.option("--smoke", is_flag=True, help="at smoke size (the study's [smoke]: a few tasks, a few steps)")
def plan_command(study: str, out: str | None, smoke: bool) -> None:
    """Before anything runs: episodes per grid, those finished, and the model calls and time left at the rates
    its finished episodes measured."""
    from playground.run.study import plan

    found, _ = find_study(get_host(), study)
    rows = plan(found, Path(out) if out else default_out(found), smoke)
    table = Table(title=f"{found.name}: {found.title} ({found.kind} figures)")
    for column in ("grid", "episodes", "finished", "max steps", "model calls left", "time left"):
        table.add_column(column, justify="left" if column == "grid" else "right")
    for row in rows:
        mark = " *" if row.borrowed else ""
        table.add_row(row.grid, str(row.episodes), str(row.finished), str(row.max_steps),
                      "unknown" if row.calls is None else f"{row.calls:,.0f}{mark}",
                      "unknown" if row.seconds is None else f"{row.seconds / 60:,.1f} min{mark}")
    Console(width=max(120, Console().width)).print(table)
    if any(row.borrowed for row in rows):
        click.echo("*: estimated from the study's other grids with the same agent (this grid has not played yet); "
                   "judge calls vary with the grid's options, so treat it as a rough figure")
    if any(row.calls is None for row in rows):
        click.echo("unknown: no finished episode of that grid yet; a short first run (--smoke) measures its rates")


@study_group.command("run")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback,
              help="the study's directory [default: runs/study-NAME]; rerun to resume")
@click.option("--smoke", is_flag=True, help="at smoke size")
@click.option("--agent", default=None, help="play every grid with this agent instead (a paper's table on your model)")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE", help="options of --agent")
def run_command(study: str, out: str | None, smoke: bool, agent: str | None, agent_options: tuple[str, ...]) -> None:
    """Run (or resume) every grid of the study, then print its table."""
    from playground.run.study import run_study, study_table

    host = get_host()
    found, _ = find_study(host, study)
    if agent_options and agent is None:
        raise CLIError("--agent-option needs --agent")
    directory = Path(out) if out else default_out(found)
    options = None
    if agent is not None:
        try:
            options = {**host.agents.get(agent).default_options, **parse_pairs(agent_options, "--agent-option")}
        except KeyError as exc:
            raise CLIError(exc.args[0]) from None
    try:
        run_study(host, found, directory, smoke, agent, options)
    except StudyError as exc:
        raise CLIError(str(exc)) from None
    print_table(found, study_table(found, directory))


@study_group.command("table")
@click.argument("study")
@click.option("--out", default=None, callback=path_callback, help="the study's directory [default: runs/study-NAME]")
@click.option("--json", "as_json", is_flag=True, help="the cells as JSON")
@click.option("--csv", "as_csv", is_flag=True, help="the cells as CSV")
def table_command(study: str, out: str | None, as_json: bool, as_csv: bool) -> None:
    """The study's table from its run directories (each cell: success and interval, paired difference against
    the grid's reference, steps, calls, tokens, interventions and lessons per episode, the paper's number)."""
    from playground.run.study import study_table

    found, _ = find_study(get_host(), study)
    cells = study_table(found, Path(out) if out else default_out(found))
    if as_json:
        click.echo(json.dumps([{**asdict(c), "success": c.success} for c in cells], indent=2))
    elif as_csv:
        click.echo(cells_csv(cells), nl=False)
    else:
        print_table(found, cells)


def cells_csv(cells: list[Cell]) -> str:
    """The cells as CSV, one row each."""
    out = io.StringIO()
    fields = [*asdict(cells[0]), "success"] if cells else ["grid", "harness"]
    writer = csv.DictWriter(out, fields)
    writer.writeheader()
    for cell in cells:
        writer.writerow({**asdict(cell), "success": cell.success})
    return out.getvalue()


def print_table(study: Study, cells: list[Cell]) -> None:
    """The study's table in the terminal (rich)."""
    table = Table(title=f"{study.name}: {study.title} ({study.kind} figures)"
                        + (f"; the paper: {study.paper}" if study.paper else ""))
    columns = ["grid", "harness", "n", "success", "95% CI", "vs ref (p)", "steps", "calls", "tokens", "interv.",
               "lessons"] + (["paper"] if study.paper_success else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("grid", "harness") else "right")
    for c in cells:
        versus = "-" if c.versus is None else f"{c.diff:+.0%} ({c.p:.2g})"
        row = [c.grid, c.harness, str(c.episodes), f"{c.success:.0%}",
               f"{c.ci[0]:.0%}-{c.ci[1]:.0%}", versus, f"{c.steps:.1f}", f"{c.calls:.1f}", f"{c.tokens:,.0f}",
               f"{c.interventions:.2f}", f"{c.lessons:.2f}"]
        if study.paper_success:
            row.append("-" if c.paper is None else f"{c.paper:.0%}")
        table.add_row(*row)
    Console(width=max(140, Console().width)).print(table)
    click.echo("vs ref: the paired difference in success against the grid's reference harness (its first, unless "
               "the study names one), exact McNemar p; calls, tokens, interv., lessons: per episode")
