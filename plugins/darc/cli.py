"""`playground darc ...`: the method over run directories: diagnose a profiling run, gather the evidence of a run
of the library's interventions, distil a policy (deploy with `playground run --harness darc:POLICY`), agreement,
efficiency. The runs themselves are `playground run` or a study (docs/methods/darc.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from pydantic import BaseModel

from playground.host_api import CLIError, nonempty, pass_host, path_callback

if TYPE_CHECKING:
    from playground.host_api import Host

P = TypeVar("P", bound=BaseModel)


def checked(model: type[P], values: dict) -> P:
    """The options as a step's parameters; CLIError names an option pydantic refuses (`--max-len`)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise CLIError(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}") from None


@click.group("darc")
def darc_group() -> None:
    """DARC: diagnose failures, gather evidence, distil a cost-aware recovery chain."""


@darc_group.command("diagnose")
@click.argument("run_dir", callback=path_callback)
@click.option("--harness", default=None,
              help="the profiling harness of RUN_DIR [default: its one darc-profile:DETECTORS harness]")
@click.option("--diagnoser", type=click.Choice(["rule", "llm", "instrument"]), default="rule", show_default=True,
              help="who names the mode: the rule over failure onsets, a judge model reading the failed traces, or "
                   "the failure-injection instrument as that judge (the noisy agent's recorded truth; "
                   "--diagnoser-accuracy)")
@click.option("--diagnoser-accuracy", type=click.FloatRange(0.0, 1.0), default=None,
              help="--diagnoser instrument: the probability that the instrument's judge names the injected mode "
                   "(a realistic mistake otherwise)")
@click.option("--judge-base-url", default=None, help="--diagnoser llm: an OpenAI-compatible endpoint")
@click.option("--judge-model", default=None, help="--diagnoser llm: the model at --judge-base-url")
@click.option("--judge-local", is_flag=True, help="--diagnoser llm: the embedded local model")
@click.option("--modes", "modes_option", default="paper", show_default=True,
              help="the candidate failure modes: 'paper' (action_validity, procedure_breadth, format_precision), "
                   "'all' (also Sentry's progress and grounding: a deviation), or a comma-separated list")
@click.option("--out", callback=path_callback, required=True, help="folder for diagnosis.json")
@pass_host
def diagnose_command(host: Host, run_dir: str, harness: str | None, diagnoser: str, diagnoser_accuracy: float | None,
                     judge_base_url: str | None, judge_model: str | None, judge_local: bool, modes_option: str,
                     out: str) -> None:
    """Count the failure signatures of a profiling run (RUN_DIR, played with --harness darc-profile:DETECTORS),
    write OUT/diagnosis.json."""
    from playground.plugins.darc.evaluate import eval_harnesses
    from playground.plugins.darc.profile import library
    from playground.plugins.darc.steps import DiagnoseParams, StepError, diagnose

    nonempty(out, "--out")
    params = checked(DiagnoseParams, {
        "harness": harness, "diagnoser": diagnoser, "diagnoser_accuracy": diagnoser_accuracy,
        "judge_base_url": judge_base_url or "", "judge_model": judge_model or "", "judge_local": judge_local,
        "modes": modes_option})
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
@click.option("--diagnosis", callback=path_callback, default=None,
              help="diagnosis.json from darc diagnose: gather only its admissible interventions "
                   "[default: every darc-eval:NAME harness of RUN_DIR]")
@click.option("--base-from", callback=path_callback, default=None,
              help="a profiling run (darc-profile:DETECTORS) played with the same settings: take the base attempts "
                   "from its episodes instead of RUN_DIR's base harness")
@click.option("--out", callback=path_callback, required=True, help="folder for evidence.csv, base.csv, evidence.json")
@pass_host
def evidence_command(host: Host, run_dir: str, diagnosis: str | None, base_from: str | None, out: str) -> None:
    """Read a run of base and each intervention alone (--harness darc-eval:NAME) on every task; write
    OUT/evidence.csv."""
    from playground.plugins.darc.evaluate import gather_evidence

    nonempty(out, "--out")
    try:
        path, names, tasks = gather_evidence(host, run_dir, out, diagnosis, base_from)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"evidence of {len(names)} interventions on {tasks} tasks: {path}")


@darc_group.command("distill")
@click.option("--evidence", "evidence_path", callback=path_callback,
              required=True, help="evidence.csv from darc evidence")
@click.option("--max-len", type=int, default=3, show_default=True, help="longest chain L")
@click.option("--lam", type=float, default=0.02, show_default=True, help="cost weight lambda")
@click.option("--tau-free", type=float, default=None,
              help="cost allowed for free "
                   "[default: the mean cost of a base attempt, from base.csv next to the evidence]")
@click.option("--bootstrap", type=click.IntRange(min=0), default=0, show_default=True,
              help="also resample the tasks N times: how many distinct chains win, selection and test success")
@click.option("--seed", type=int, default=0, show_default=True, help="--bootstrap: the resampling seed")
@click.option("--interventions", default=None, help="comma-separated subset of the evidence's interventions")
@click.option("--count-only", is_flag=True, help="print only the size of the search space")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="chains to print")
@click.option("--plot", "plot_path", callback=path_callback,
              default=None, help="also draw the cost-success frontier to this PNG")
@click.option("--out", callback=path_callback,
              default=None, help="policy.json to write [default: next to the evidence]")
@click.option("--force", is_flag=True, help="replace an existing policy (--out) or plot (--plot)")
@click.option("--verifier", type=click.Choice(["env:won", "agent:done", "agent:self-check"]), default="env:won",
              show_default=True, help="what the deployed cascade stops on: the benchmark's grade (env:won) or a "
                                      "grade-blind deployment verifier")
def distill_command(evidence_path: str, max_len: int, lam: float, tau_free: float | None, bootstrap: int, seed: int,
                    interventions: str | None, count_only: bool, top: int, plot_path: str | None, out: str | None,
                    force: bool, verifier: str) -> None:
    """Score every short-circuit chain on the evidence, print the best, freeze the winner to policy.json."""
    from playground.host_api import OutputError, check_output
    from playground.plugins.darc.distill import count_chains
    from playground.plugins.darc.evidence import load_evidence
    from playground.plugins.darc.steps import DistillParams, StepError, distill_policy

    names = [n.strip() for n in interventions.split(",") if n.strip()] if interventions else None
    if max_len < 1:
        raise CLIError(f"--max-len must be at least 1, got {max_len}")
    path = Path(nonempty(out, "--out")) if out is not None else Path(evidence_path).with_name("policy.json")
    if not count_only:  # every output checked before any work, so nothing is half done
        check_output(path, force=force, inputs=[evidence_path], what="policy (--out)")
        if plot_path is not None:
            check_output(plot_path, force=force, inputs=[evidence_path, path], what="plot (--plot)")
            if Path(plot_path).resolve() == path.resolve():
                raise OutputError("--plot and --out name the same file")
    if count_only:
        try:
            click.echo(count_chains(len(load_evidence(evidence_path, names).interventions), max_len))
        except (ValueError, OSError) as exc:
            raise CLIError(str(exc)) from None
        return
    params = checked(DistillParams, {"max_len": max_len, "lam": lam, "tau_free": tau_free, "bootstrap": bootstrap,
                                     "seed": seed, "interventions": names, "verifier": verifier})
    try:
        result, tau_free, tau_source, stability = distill_policy(evidence_path, path, params)
    except StepError as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"tau_free = {tau_free:g} ({tau_source})")
    click.echo(f"search space: {result.search_space} chains over {len(result.interventions)} interventions "
               f"(L={max_len}), {result.n_tasks} tasks")
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
