"""`playground sentry ...`: Sentry's own commands (`paired-forks`; `detectors`). A run's harnesses against
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
    """Sentry: paired forks over its harnesses and its detectors measured (the held-out protocol of Table 4 is the
    study `sentry-table4-heldout`)."""


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


@sentry_group.command("detectors")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--window", type=click.IntRange(min=0), default=3, show_default=True,
              help="steps after an injection in which a detection still counts for it")
@click.option("--match", type=click.Choice(["mode", "label"]), default="mode", show_default=True,
              help="a detection matches an injection of the same label, or (mode) of the same failure mode")
@click.option("--llm-sample", type=click.IntRange(min=0), default=0, show_default=True,
              help="steps the LLM judge is asked about (0: no judge)")
@click.option("--judge-local", is_flag=True, help="the judge is the embedded local model (the default judge)")
@click.option("--judge-base-url", default=None, help="the judge at an OpenAI-compatible endpoint")
@click.option("--judge-model", default=None, help="the model at --judge-base-url")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON instead of tables")
@pass_host
def detectors_command(host: Host, run_dir: str, window: int, match: str, llm_sample: int, judge_local: bool,
                      judge_base_url: str | None, judge_model: str | None, as_json: bool) -> None:
    """Score Sentry's detectors (and verifier) in RUN_DIR against the failures its agent injected.

    RUN_DIR is a run of a failure-injection agent (`--agent noisy`) with harness `base` (the
    detectors are replayed over it) and, for the verifier's agreement, `sentry`.
    """
    from playground.plugins.sentry.bench import measure_run, tables

    judge = None
    if llm_sample:
        judge = _judge(judge_local, judge_base_url, judge_model)
    elif judge_local or judge_base_url or judge_model:
        raise CLIError("--judge-local, --judge-base-url and --judge-model need --llm-sample N")
    report = measure_run(host, run_dir, window=window, match=match, llm_sample=llm_sample, judge=judge)
    click.echo(json.dumps(report, indent=2) if as_json else tables([report]))


def _judge(local: bool, base_url: str | None, model: str | None):
    """The LLM detector over the chosen judge model (the embedded one unless an endpoint is named)."""
    from playground.plugins.sentry.judges import LLMDetector, make_judge_model

    params = {"judge_base_url": base_url or "", "judge_model": model or "", "judge_local": local or not base_url}
    try:
        return LLMDetector(make_judge_model(params))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
