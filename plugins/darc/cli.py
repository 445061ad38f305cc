"""`playground darc ...`: the method over run directories: diagnose a profiling run, gather the evidence of a run
of the library's interventions, distil a policy (deploy with `playground run --harness darc:POLICY`). Each command's
options are its pipeline step's parameters (`steps.py`, through `model_options`); the runs themselves are
`playground run` or a study (docs/methods/darc.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, model_options, nonempty, pass_host, path_callback
from playground.plugins.darc.steps import DiagnoseParams, DistillParams, EvidenceParams

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("darc")
def darc_group() -> None:
    """DARC: diagnose failures, gather evidence, distil a cost-aware recovery chain."""


@darc_group.command("diagnose")
@click.argument("run_dir", callback=path_callback)
@click.option("--out", callback=path_callback, required=True, help="folder for diagnosis.json")
@model_options(DiagnoseParams)
@pass_host
def diagnose_command(host: Host, run_dir: str, out: str, params: DiagnoseParams) -> None:
    """Count the failure signatures of a profiling run (RUN_DIR, played with --harness darc-profile:DETECTORS),
    write OUT/diagnosis.json."""
    from playground.plugins.darc.evaluate import eval_harnesses
    from playground.plugins.darc.profile import library
    from playground.plugins.darc.steps import StepError, diagnose

    nonempty(out, "--out")
    try:
        result = diagnose(host, Path(run_dir), Path(out), params)
    except StepError as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps({k: result[k] for k in ("diagnoser", "mode", "why", "admissible_interventions",
                                                  "modes_per_episode")}, indent=2))
    env = str(json.loads((Path(run_dir) / "config.json").read_text()).get("env"))
    names = result["admissible_interventions"] or sorted(spec.name for spec in library(host, env))
    if result["mode"] is None:
        click.echo(f"{result['why']}: no intervention is admissible; gather the whole library's evidence", err=True)
    click.echo(f"diagnosis: {Path(out) / 'diagnosis.json'}", err=True)
    click.echo("evidence run (on the train split): playground run " + " ".join(
        f"--harness {h}" for h in eval_harnesses(names)) + " ...; then darc evidence RUN_DIR", err=True)


@darc_group.command("evidence")
@click.argument("run_dir", callback=path_callback)
@click.option("--out", callback=path_callback, required=True, help="folder for evidence.csv, base.csv, evidence.json")
@model_options(EvidenceParams)
@pass_host
def evidence_command(host: Host, run_dir: str, out: str, params: EvidenceParams) -> None:
    """Read a run of base and each intervention alone (--harness darc-eval:NAME) on every task; write
    OUT/evidence.csv."""
    from playground.plugins.darc.evaluate import gather_evidence

    nonempty(out, "--out")
    try:
        path, names, tasks = gather_evidence(host, run_dir, out, params.diagnosis, params.base_from)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"evidence of {len(names)} interventions on {tasks} tasks: {path}")


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
