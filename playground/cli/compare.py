"""`playground compare`: a paired per-task comparison of two runs or two harnesses."""

from __future__ import annotations

import json

import click

from playground.cli.options import CLIError
from playground.core.records import EpisodeRecord


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--harness-a", default=None, help="harness of RUN_A to compare [default: its only one]")
@click.option("--harness-b", default=None, help="harness of RUN_B to compare [default: its only one]")
@click.option("--group-key", default=None, help="record field grouping tasks into scenarios (cluster bootstrap)")
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def compare_command(run_a: str, run_b: str, harness_a: str | None, harness_b: str | None, group_key: str | None,
                    resamples: int, seed: int, as_json: bool) -> None:
    """Paired per-task comparison of two runs (or two harnesses of one run): bootstrap CIs, McNemar, Holm; whether
    the success difference exceeds the runs' noise floor (with --trials); a warning when their locks differ; and,
    when one side is a cascade, its attempts and cost with both sides' pass@L."""
    from playground.run.deployment import deployment, format_deployment
    from playground.run.stats import ComparisonError, compare, format_comparison, split_by_harness

    records_a = _harness_records(run_a, harness_a, split_by_harness)
    records_b = _harness_records(run_b, harness_b, split_by_harness)
    try:
        result = compare(records_a, records_b, label_a=f"{run_a}:{harness_a or ''}",
                         label_b=f"{run_b}:{harness_b or ''}",
                         group_key=group_key, resamples=resamples, seed=seed)
    except ComparisonError as exc:
        raise CLIError(str(exc)) from None
    for line in _lock_warnings(run_a, run_b):
        click.echo(f"warning: {line}", err=True)
    noise = noise_verdict(records_a, records_b, result.metric("success").diff, seed)
    budget = deployment(result.label_a, records_a, result.label_b, records_b)
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "noise": noise, "attempt_budget": budget}, indent=2))
    else:
        click.echo(format_comparison(result) + "\n" + noise["text"]
                   + (f"\n{format_deployment(budget)}" if budget is not None else ""))


def noise_verdict(records_a: list[EpisodeRecord], records_b: list[EpisodeRecord], diff: float, seed: int = 0) -> dict:
    """Whether a success difference exceeds the noise floor of the runs' repeated trials (the larger of the two)."""
    from playground.run.trials import noise_floor, outcomes_by_task

    floors = [noise_floor(outcomes_by_task(records), seed=seed) for records in (records_a, records_b)]
    known = [f["noise_floor"] for f in floors if f is not None]
    if not known:
        return {"noise_floor": None, "exceeds": None,
                "text": "noise floor: unknown (neither run has repeated trials; run with --trials 2 or more)"}
    floor = max(known)
    exceeds = abs(diff) > floor
    return {"noise_floor": floor, "exceeds": exceeds,
            "text": f"noise floor (success, from half-split trials): {floor:.3f}; the difference {diff:+.3f} "
                    + ("exceeds it" if exceeds else "is within it: chance alone gives differences this large")}


def _lock_warnings(run_a: str, run_b: str) -> list[str]:
    """What differs between the two runs' lock.json in software, data, tasks or model (nothing when one has none)."""
    from pathlib import Path

    from playground.run.lock import COMPARE_FIELDS, LOCK_FILE, LockError, lock_differences, read_lock

    paths = [Path(run) / LOCK_FILE for run in (run_a, run_b)]
    if not all(path.is_file() for path in paths):
        return [f"no {LOCK_FILE} in {str(path.parent)!r}: cannot check that the runs used the same software "
                "and data" for path in paths if not path.is_file()]
    try:
        lock_a, lock_b = (read_lock(path) for path in paths)
    except LockError as exc:
        return [str(exc)]
    return [f"the runs' locks differ: {line}" for line in lock_differences(lock_a, lock_b, only=COMPARE_FIELDS)]


def _harness_records(run_dir: str, harness: str | None, split_by_harness) -> list[EpisodeRecord]:
    """The episode records of one harness of a run directory."""
    from playground.run.rundir import load_records

    by_harness = split_by_harness(load_records(run_dir))
    if harness is None:
        if len(by_harness) != 1:
            raise CLIError(f"{run_dir!r} has harnesses {', '.join(by_harness)}; "
                           "choose one with --harness-a/--harness-b")
        harness = next(iter(by_harness))
    if harness not in by_harness:
        raise CLIError(f"{run_dir!r} has no harness {harness!r}; choose from: {', '.join(by_harness)}")
    return by_harness[harness]
