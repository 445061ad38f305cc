"""`playground sentry ...`: protocols over Sentry's harnesses (`heldout`: the paper's Table 4)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from playground.cli.options import CLIError, episode_options, make_config
from playground.host.manager import get_host
from playground.plugins.sentry.heldout import CONDITIONS, DEFAULT_REFERENCE, INIT_HARNESS


@click.group("sentry")
def sentry_group() -> None:
    """Sentry: protocols over its harnesses (the held-out playbook evaluation)."""


@sentry_group.command("heldout")
@episode_options(split=False)
@click.option("--init-split", default="train", show_default=True,
              help="split whose tasks grow the init playbook (phase 1)")
@click.option("--eval-split", default="test", show_default=True,
              help="split the four conditions are scored on (phase 2); no task may be in both splits")
@click.option("--reference", default=DEFAULT_REFERENCE, show_default=True,
              type=click.Choice([c.name for c in CONDITIONS]),
              help="the condition the paired differences are taken against")
@click.option("--out", required=True, help="folder for init/, eval/ and heldout.json; rerun it to resume")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="episodes played at once, in worker processes")
@click.option("--json", "as_json", is_flag=True, help="print heldout.json instead of the table")
def heldout_command(init_split: str, eval_split: str, reference: str, out: str, workers: int, as_json: bool,
                    **options) -> None:
    """Grow a playbook under `sentry` on N init tasks, then score retrieval off, frozen, frozen + persistent
    exposure and evolving (each from its own copy of that playbook) on N disjoint eval tasks."""
    from playground.cli.main import run_with_progress
    from playground.plugins.sentry.heldout import HeldoutError, check_protocol, format_report, heldout

    host = get_host()
    if not out.strip():
        raise CLIError("--out is empty; name the folder for the held-out runs")
    init = make_config(host, [INIT_HARNESS], str(Path(out) / "init"), None, split=init_split, **options)
    evaluation = make_config(host, [c.harness for c in CONDITIONS], str(Path(out) / "eval"), None, split=eval_split,
                             **options)
    try:
        check_protocol(init, evaluation)
    except HeldoutError as exc:
        raise CLIError(str(exc)) from None
    result = heldout(host, init, evaluation, out, lambda config: run_with_progress(host, config, options["quiet"],
                                                                                    workers), reference)
    click.echo(json.dumps(result, indent=2) if as_json else format_report(result))
    click.echo(f"held-out report: {Path(out) / 'heldout.json'}", err=True)
