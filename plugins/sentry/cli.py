"""`playground sentry ...`: Sentry's own commands (added through `register_commands`)."""

from __future__ import annotations

import json

import click

from playground.cli.options import CLIError
from playground.host.manager import get_host


@click.group("sentry")
def sentry_group() -> None:
    """Sentry: measure its detectors and verifier."""


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
def detectors_command(run_dir: str, window: int, match: str, llm_sample: int, judge_local: bool,
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
    report = measure_run(get_host(), run_dir, window=window, match=match, llm_sample=llm_sample, judge=judge)
    click.echo(json.dumps(report, indent=2) if as_json else tables([report]))


def _judge(local: bool, base_url: str | None, model: str | None):
    """The LLM detector over the chosen judge model (the embedded one unless an endpoint is named)."""
    from playground.plugins.sentry.judges import LLMDetector, make_judge_model

    params = {"judge_base_url": base_url or "", "judge_model": model or "", "judge_local": local or not base_url}
    try:
        return LLMDetector(make_judge_model(params))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
