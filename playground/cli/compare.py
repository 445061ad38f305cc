"""`playground compare`: a paired per-task comparison of two runs or two harnesses."""

from __future__ import annotations

import json

import click

from playground.cli.options import CLIError


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
    """Paired per-task comparison of two runs (or two harnesses of one run): bootstrap CIs, McNemar, Holm."""
    from playground.run.stats import ComparisonError, compare, format_comparison, split_by_harness

    records_a = _harness_records(run_a, harness_a, split_by_harness)
    records_b = _harness_records(run_b, harness_b, split_by_harness)
    try:
        result = compare(records_a, records_b, label_a=f"{run_a}:{harness_a or ''}",
                         label_b=f"{run_b}:{harness_b or ''}",
                         group_key=group_key, resamples=resamples, seed=seed)
    except ComparisonError as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else format_comparison(result))


def _harness_records(run_dir: str, harness: str | None, split_by_harness) -> list[dict]:
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
