"""`playground report`: a self-contained HTML report of one or more run directories."""

from __future__ import annotations

import click

from playground.run.paths import path_callback


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR [RUN_DIR ...]")
@click.option("--out", default="report.html", show_default=True, callback=path_callback, help="the HTML file to write")
@click.option("--force", is_flag=True, help="replace --out when it exists")
def report_command(run_dirs: tuple[str, ...], out: str, force: bool) -> None:
    """Write one self-contained HTML file (inline SVG charts, no network) about the runs in RUN_DIR ...: success
    and score by harness, solved episodes against the step budget, cost against success, playbook growth, detected
    failures, tokens, and every episode linked to its trace."""
    from playground.run.html_report import write_report

    path = write_report(run_dirs, out, force=force)
    click.echo(f"report: {path}", err=True)
