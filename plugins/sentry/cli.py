"""`playground sentry ...`: Sentry's own commands (`heldout`: the paper's Table 4; `paired-forks`; `table`: a run's
harnesses against `sentry`; `detectors`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, episode_options, make_config, pass_host, path_callback
from playground.plugins.sentry.heldout import CONDITIONS, DEFAULT_REFERENCE, INIT_HARNESS

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("sentry")
def sentry_group() -> None:
    """Sentry: protocols over its harnesses (held-out playbook, paired forks) and its detectors measured."""


@sentry_group.command("heldout")
@episode_options(split=False)
@click.option("--init-split", default="train", show_default=True,
              help="split whose tasks grow the init playbook (phase 1)")
@click.option("--eval-split", default="test", show_default=True,
              help="split the four conditions are scored on (phase 2); no task may be in both splits")
@click.option("--reference", default=DEFAULT_REFERENCE, show_default=True,
              type=click.Choice([c.name for c in CONDITIONS]),
              help="the condition the paired differences are taken against")
@click.option("--out", callback=path_callback,
              required=True, help="folder for init/, eval/ and heldout.json; rerun it to resume")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="episodes played at once, in worker processes")
@click.option("--json", "as_json", is_flag=True, help="print heldout.json instead of the table")
@pass_host
def heldout_command(host: Host, init_split: str, eval_split: str, reference: str, out: str, workers: int,
                    as_json: bool, **options) -> None:
    """Grow a playbook under `sentry` on N init tasks, then score retrieval off, frozen, frozen + persistent
    exposure and evolving (each from its own copy of that playbook) on N disjoint eval tasks."""
    from playground.host_api import run_with_progress
    from playground.plugins.sentry.heldout import HeldoutError, check_protocol, format_report, heldout

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


@sentry_group.command("table")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--against", "reference", default="sentry", show_default=True,
              help="the reference harness every other harness is paired with (McNemar)")
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON instead of the table")
def table_command(run_dir: str, reference: str, as_json: bool) -> None:
    """Each harness of RUN_DIR against a reference: success [95% CI], paired McNemar, resolved repairs, soft
    repairs and need-check declines per episode, agent and judge tokens per episode, usable judge replies."""
    from playground.host_api import RunDirError
    from playground.plugins.sentry.table import format_table, harness_table, table_json

    try:
        rows = harness_table(run_dir, reference)
    except (RunDirError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps(table_json(rows), indent=2) if as_json else format_table(rows, reference))


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
