"""`playground sentry ...`: Sentry's own command (`paired-forks`). A run's harnesses against
`sentry` are `playground study table RUN_DIR --reference sentry`, with Sentry's columns (`figures.py`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, pass_host

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("sentry")
def sentry_group() -> None:
    """Sentry: paired forks over its harnesses (the held-out protocol of Table 4 is the study
    `sentry-table4-heldout`; its detectors against injected failures, the study `sentry-instrument-detectors`)."""


@sentry_group.command("paired-forks")
@click.argument("run_dir")
@click.option("--harness", default="sentry", show_default=True, help="harness whose intervention points are forked")
@click.option("--points", type=click.IntRange(min=1), default=None,
              help="fork this many points, drawn at random (seeded by --seed) [default: all]")
@click.option("--horizon", type=click.IntRange(min=1), default=10, show_default=True,
              help="H: steps within which the failure must not recur and grounded progress must follow")
@click.option("--agent", default=None, help="continuation policy for both arms [default: the run's agent]")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="its options [default: the run's, when --agent is not given]")
@click.option("--trials", type=click.IntRange(min=1), default=1, show_default=True,
              help="forks per arm and point (trial i: seed + i, both arms)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON instead of the table")
@pass_host
def paired_forks_command(host: Host, run_dir: str, harness: str, points: int | None, horizon: int, agent: str | None,
                         agent_options: tuple[str, ...], trials: int, seed: int, as_json: bool) -> None:
    """From each step where Sentry intervened in RUN_DIR, fork with its repair and with the agent's original
    proposal instead, play on under the same policy, and score local recovery (blind) and final success."""
    from playground.host_api import parse_pairs
    from playground.plugins.sentry.paired import PairedForkError, format_report, paired_forks

    options = parse_pairs(agent_options, "--agent-option") if agent_options else None
    if options is not None and agent is None:
        raise CLIError("--agent-option needs --agent (without it the run's agent and options are used)")
    def progress(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            click.echo(f"  forked {done}/{total} points", err=True)

    try:
        report = paired_forks(host, run_dir, harness, points=points, horizon=horizon, agent=agent,
                              agent_options=options, trials=trials, seed=seed, progress=progress)
    except PairedForkError as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
    click.echo(f"paired forks: {report['path']}", err=True)
