"""`playground darc distill`: distil a policy from an evidence table (deploy it with `playground run --harness
darc:POLICY`); its options are the `darc.distill` step's parameters (`steps.py`, through `model_options`). The
group's `diagnose` and `evidence` are the pipeline steps themselves, mounted as commands by the host
(`PipelineStep.command`); the runs are `playground run` or a study (docs/methods/darc.md)."""

from __future__ import annotations

from pathlib import Path

import click

from playground.host_api import CLIError, model_options, nonempty, path_callback
from playground.plugins.darc.steps import DistillParams


@click.group("darc")
def darc_group() -> None:
    """DARC: diagnose failures, gather evidence, distil a cost-aware recovery chain."""


@darc_group.command("distill")
@click.option("--evidence", "evidence_path", callback=path_callback,
              required=True, help="evidence.csv from darc evidence")
@model_options(DistillParams)
@click.option("--count-only", is_flag=True, help="print only the size of the search space")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="chains to print")
@click.option("--plot", "plot_path", callback=path_callback,
              default=None, help="also draw the cost-success frontier to this PNG")
@click.option("--out", callback=path_callback,
              default=None, help="policy.json to write [default: next to the evidence]")
@click.option("--force", is_flag=True, help="replace an existing policy (--out) or plot (--plot)")
def distill_command(evidence_path: str, params: DistillParams, count_only: bool, top: int, plot_path: str | None,
                    out: str | None, force: bool) -> None:
    """Score every short-circuit chain on the evidence, print the best, freeze the winner to policy.json."""
    from playground.host_api import OutputError, check_output
    from playground.plugins.darc.distill import count_chains
    from playground.plugins.darc.evidence import load_evidence
    from playground.plugins.darc.steps import StepError, distill_policy

    path = Path(nonempty(out, "--out")) if out is not None else Path(evidence_path).with_name("policy.json")
    if not count_only:  # every output checked before any work, so nothing is half done
        check_output(path, force=force, inputs=[evidence_path], what="policy (--out)")
        if plot_path is not None:
            check_output(plot_path, force=force, inputs=[evidence_path, path], what="plot (--plot)")
            if Path(plot_path).resolve() == path.resolve():
                raise OutputError("--plot and --out name the same file")
    if count_only:
        try:
            click.echo(count_chains(len(load_evidence(evidence_path, params.interventions).interventions),
                                    params.max_len))
        except (ValueError, OSError) as exc:
            raise CLIError(str(exc)) from None
        return
    try:
        result, tau_free, tau_source, stability = distill_policy(evidence_path, path, params)
    except StepError as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"tau_free = {tau_free:g} ({tau_source})")
    click.echo(f"search space: {result.search_space} chains over {len(result.interventions)} interventions "
               f"(L={params.max_len}), {result.n_tasks} tasks")
    click.echo(f"{'rank':>4}  {'J':>7}  {'succ':>6}  {'cost':>8}  chain")
    for rank, chain in enumerate(result.ranked()[:top], 1):
        click.echo(f"{rank:>4}  {chain.J:7.4f}  {chain.succ:6.3f}  {chain.cost:8.3f}  {' -> '.join(chain.names)}")
    if stability is not None:
        click.echo(stability.report())
    click.echo(f"policy: {path} (deploy: playground run --harness darc:{path})", err=True)
    if plot_path:
        from playground.plugins.darc.frontier import PlotUnavailable, plot_frontier

        try:
            plot_frontier(result, plot_path)
        except PlotUnavailable as exc:
            raise CLIError(str(exc)) from None
        click.echo(f"frontier: {plot_path}", err=True)
