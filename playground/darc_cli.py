"""`playground darc ...`: profile, evaluate, distill (deploy with `playground run --harness darc:POLICY`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from playground.cli import CLIError, cli, episode_options, make_config
from playground.host import get_host


@cli.group("darc")
def darc_group() -> None:
    """DARC: diagnose failures, gather evidence, distil a cost-aware recovery chain."""


@darc_group.command("profile")
@episode_options
@click.option("--detectors", default="sentry", show_default=True,
              help="comma-separated interventions whose detectors watch the base agent")
@click.option("--out", required=True, help="folder for diagnosis.json (and the profiling run)")
def profile_command(detectors: str, out: str, **options) -> None:
    """Run the base agent, count failure signatures, write OUT/diagnosis.json."""
    from playground.darc.profile import profile

    host = get_host()
    names = [n.strip() for n in detectors.split(",") if n.strip()]
    for name in names:
        if name not in host.interventions:
            raise CLIError(f"unknown intervention {name!r} in --detectors; choose from: "
                           f"{', '.join(host.interventions.names())}")
    if not options["split"]:
        options["split"] = "dev"
    config = make_config(host, ["base"], str(Path(out) / "profile-run"), None, **options)
    result = profile(host, config, names, out)
    click.echo(json.dumps({k: result[k] for k in ("mode", "why", "admissible_interventions", "modes_per_episode")},
                          indent=2))
    click.echo(f"diagnosis: {Path(out) / 'diagnosis.json'}", err=True)


@darc_group.command("evaluate")
@episode_options
@click.option("--diagnosis", default=None, help="diagnosis.json from darc profile (its admissible interventions)")
@click.option("--all-interventions", is_flag=True, help="evaluate the whole library (the no-diagnosis control)")
@click.option("--out", required=True, help="folder for evidence.csv (and the evaluation run)")
def evaluate_command(diagnosis: str | None, all_interventions: bool, out: str, **options) -> None:
    """Run every chosen intervention on every task from the same initial state; write OUT/evidence.csv."""
    from playground.darc.evaluate import chosen_interventions, evaluate

    host = get_host()
    try:
        names = chosen_interventions(host, diagnosis, all_interventions)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if not options["split"]:
        options["split"] = "train"
    config = make_config(host, ["base"], str(Path(out) / "evaluate-run"), None, **options)
    path = evaluate(host, config, names, out)
    click.echo(f"evaluated {len(names)} interventions on {len(config.tasks)} tasks: {path}")
