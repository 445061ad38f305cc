"""`playground sentry ...`: protocols over Sentry's harnesses (`heldout`: the paper's Table 4; `paired-forks`)."""

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
def paired_forks_command(run_dir: str, harness: str, points: int | None, horizon: int, agent: str | None,
                         agent_options: tuple[str, ...], trials: int, seed: int, as_json: bool) -> None:
    """From each step where Sentry intervened in RUN_DIR, fork with its repair and with the agent's original
    proposal instead, play on under the same policy, and score local recovery (blind) and final success."""
    from playground.cli.options import parse_pairs
    from playground.plugins.sentry.paired import PairedForkError, format_report, paired_forks

    options = parse_pairs(agent_options, "--agent-option") if agent_options else None
    if options is not None and agent is None:
        raise CLIError("--agent-option needs --agent (without it the run's agent and options are used)")
    def progress(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            click.echo(f"  forked {done}/{total} points", err=True)

    try:
        report = paired_forks(get_host(), run_dir, harness, points=points, horizon=horizon, agent=agent,
                              agent_options=options, trials=trials, seed=seed, progress=progress)
    except PairedForkError as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
    click.echo(f"paired forks: {report['path']}", err=True)
