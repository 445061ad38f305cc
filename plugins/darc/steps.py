"""DARC's stages as a study's pipeline steps (`register_pipeline_steps`) and as its commands: `darc.diagnose` (a
profiling run's failure signatures to a mode and its admissible interventions), `darc.evidence` (a run of each
intervention alone, beside base, as evidence), `darc.distill` (the cost-aware chain that wins on the evidence,
frozen to policy.json), `darc.policy_controls` (Table 6's correct, generic and mismatched policies) and
`darc.agreement` (Table 15: the rule's and the LLM's diagnoses against the mode the evidence says fixes most
failures). Each step writes into the pipeline's folder; `playground darc diagnose` and `evidence` are the steps
themselves as commands (`PipelineStep.command`: they run in RUN_DIR, or in a copy of it with `--out`), and
`playground darc distill` (over any evidence.csv) calls the same function as its step, so a study and the
commands do one thing (the controls and the agreement are experiments about the method, run as
the darc-table6 and darc-table15 studies).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from playground.api import JudgeSettings, PlaygroundError

if TYPE_CHECKING:
    from playground.host_api import Host

VERIFIERS = Literal["env:won", "agent:done", "agent:self-check"]
AGREEMENT_FILE = "agreement.json"
INSTRUMENT_FILE = "instrument.json"  # beside diagnosis.json when the instrument was the diagnoser: its grades


class StepError(PlaygroundError, ValueError):
    """DARC's stage cannot run as asked: names what is wrong."""


class DiagnoseParams(JudgeSettings):
    """`darc.diagnose`: the profiling harness, who names the mode, and the candidate modes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    harness: str | None = Field(default=None, description="the profiling harness [default: the run's one "
                                                          "darc-profile:DETECTORS harness]")
    diagnoser: Literal["rule", "llm", "instrument"] = Field(
        default="rule", description="who names the mode: the rule over failure onsets, a judge model reading the "
                                    "failed traces (judge_*), or the failure-injection instrument as that judge (the "
                                    "noisy agent's recorded truth; diagnoser_accuracy)")
    diagnoser_accuracy: float | None = Field(default=None, ge=0.0, le=1.0,
                                             description="instrument: the probability that it names the injected "
                                                         "mode (a realistic mistake otherwise)")
    modes: str = Field(default="paper", description="the candidate failure modes: 'paper' (action_validity, "
                                                    "procedure_breadth, format_precision), 'all' (also Sentry's "
                                                    "progress and grounding: a deviation), or a comma-separated list")


class EvidenceParams(BaseModel):
    """`darc.evidence`: which interventions (a diagnosis's admissible ones, else every darc-eval harness), and
    where the base attempts come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnosis: str | None = Field(default=None, description="a diagnosis.json: gather only its admissible "
                                                            "interventions [default: every darc-eval:NAME harness]")
    base_from: str | None = Field(default=None, description="a profiling run (darc-profile:DETECTORS) played with "
                                                            "the same settings, whose episodes are the base attempts")


class DistillParams(BaseModel):
    """`darc.distill`: the chain search and what the deployed cascade stops on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int = Field(default=3, ge=1, description="the longest chain L")
    lam: float = Field(default=0.02, description="the cost weight lambda")
    tau_free: float | None = Field(default=None, description="the cost allowed for free [default: the mean base "
                                                              "cost]")
    bootstrap: int = Field(default=0, ge=0, description="resample the tasks N times: distinct winners, selection "
                                                        "and test success")
    seed: int = Field(default=0, description="the resampling seed")
    interventions: list[str] | None = Field(default=None, description="a subset of the evidence's interventions")
    verifier: VERIFIERS = Field(default="env:won", description="what the deployed cascade stops on: the "
                                                               "benchmark's grade (env:won) or a grade-blind "
                                                               "deployment verifier")


class ControlsParams(BaseModel):
    """`darc.policy_controls`: Table 6's controls from a diagnosis and the whole library's evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnosis: str = Field(description="the diagnosis.json the correct policy follows")
    generic: list[str] = Field(default_factory=lambda: ["sentry"], min_length=1,
                               description="the chain deployed whatever the diagnosis")
    mismatched_mode: str | None = Field(default=None, description="the mode of the mismatched policy [default: the "
                                                                  "first other mode with evidence]")
    max_len: int = Field(default=3, ge=1)
    lam: float = 0.02
    tau_free: float | None = None
    verifier: VERIFIERS = "env:won"


class AgreementParams(BaseModel):
    """`darc.agreement`: the diagnosis to score against the whole library's evidence in the folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnosis: str = Field(description="the diagnosis.json of a dev-split profile (`{out}/FOLDER/diagnosis.json`; "
                                       "an LLM or instrument diagnoser gives the LLM row)")


def diagnose_step(host: Host, run_dir: Path, params: DiagnoseParams) -> dict:
    """`darc.diagnose` (and `playground darc diagnose`): RUN_DIR/diagnosis.json (and, with the instrument as the
    diagnoser, its grade of each reply by episode in RUN_DIR/instrument.json); return its outcome (who diagnosed,
    the mode, why, the admissible interventions, onsets per episode by mode) and the harnesses of the evidence run
    that comes next. StepError names what is wrong."""
    from playground.host_api import atomic_write_text, read_config
    from playground.plugins.darc.evaluate import eval_harnesses
    from playground.plugins.darc.profile import diagnose_run, library

    judged = bool(params.judge_base_url or params.judge_model or params.judge_local)
    if params.diagnoser != "llm" and judged:
        raise StepError("--judge-base-url, --judge-model and --judge-local (judge_*) need --diagnoser llm")
    if params.diagnoser != "instrument" and params.diagnoser_accuracy is not None:
        raise StepError("--diagnoser-accuracy needs --diagnoser instrument")
    modes = candidate_modes(host, params.modes)
    config = read_config(run_dir / "config.json")
    judge = None
    if params.diagnoser != "rule":
        judge = model_diagnoser(host, run_dir, config, params)
    try:
        diagnosis = diagnose_run(host, run_dir, judge, modes, params.harness)
    except ValueError as exc:
        raise StepError(str(exc)) from None
    if params.diagnoser == "instrument" and judge is not None:  # its grade of each reply: figures, never the method
        grades = judge.model.grades
        atomic_write_text(run_dir / INSTRUMENT_FILE, json.dumps(
            {"accuracy": params.diagnoser_accuracy, "graded": len(grades),
             "right": sum(bool(g["correct"]) for g in grades.values()), "episodes": grades}, indent=1) + "\n")
    # no mode (so no admissible set): the evidence run gathers the whole library usable on the env
    names = diagnosis["admissible_interventions"] or sorted(spec.name for spec in library(host, str(config["env"])))
    return {**{key: diagnosis[key] for key in ("diagnoser", "mode", "why", "admissible_interventions",
                                               "modes_per_episode")},
            "evidence_harnesses": eval_harnesses(names)}


def model_diagnoser(host: Host, run_dir: Path, config: dict, params: DiagnoseParams) -> Any:
    """The LLM diagnoser over a judge model, or over the failure-injection instrument as that model."""
    from playground.host_api import TraceInstrumentJudge
    from playground.plugins.darc.llm_diagnosis import LLMDiagnoser, make_model

    remove_grade_text = host.grade_text_remover(str(config.get("env")))  # refused for an env not loaded
    if params.diagnoser == "instrument":
        if config.get("agent") != "noisy":
            raise StepError(f"--diagnoser instrument reads the failures the noisy agent injected: {run_dir} was "
                            f"played by {config.get('agent')!r}, not noisy")
        if params.diagnoser_accuracy is None:
            raise StepError("--diagnoser instrument needs --diagnoser-accuracy A (a probability in [0, 1])")
        model = TraceInstrumentJudge({spec.role: spec for spec in host.instrument_judges}, params.diagnoser_accuracy)
        return LLMDiagnoser(model, host.labels, name=f"instrument (accuracy {params.diagnoser_accuracy:g})",
                            remove_grade_text=remove_grade_text)
    try:
        return LLMDiagnoser(make_model(params.judge_base_url, params.judge_model, params.judge_local), host.labels,
                            remove_grade_text=remove_grade_text)
    except ValueError as exc:
        raise StepError(str(exc)) from None


def candidate_modes(host: Host, option: str) -> tuple[str, ...] | None:
    """The candidate modes `--modes` names: the paper's three, every mode (None), or a checked list."""
    from playground.plugins.darc.profile import PAPER_MODES

    if option == "paper":
        return PAPER_MODES
    if option == "all":
        return None
    modes = tuple(m.strip() for m in option.split(",") if m.strip())
    known = {host.labels.mode_of(t) for t in host.labels.types()} | {
        m for spec in host.interventions for m in spec.modes}
    unknown = [m for m in modes if m not in known]
    if not modes or unknown:
        raise StepError(f"--modes: unknown mode(s) {', '.join(unknown) or '(none given)'}; "
                        f"choose from: paper, all, {', '.join(sorted(known))}")
    return modes


def distill_policy(evidence_path: str | Path, out: Path, params: DistillParams) -> tuple[Any, float, str, Any]:
    """Distil the evidence and freeze the winner to OUT (policy.json); return (the distillation, tau_free, where
    tau_free came from, the bootstrap's stability or None)."""
    from playground.plugins.darc.distill import bootstrap_stability, distill, policy_dict, save_policy
    from playground.plugins.darc.evidence import base_tau_free, evidence_meta, load_evidence

    try:
        evidence = load_evidence(evidence_path, params.interventions)
        tau_free, tau_source = ((params.tau_free, "--tau-free") if params.tau_free is not None
                                else base_tau_free(evidence_path))
        result = distill(evidence, params.max_len, params.lam, tau_free)
        meta = evidence_meta(evidence_path)
    except (ValueError, OSError) as exc:
        raise StepError(str(exc)) from None
    units = {name: info.get("cost_unit") for name, info in meta.get("interventions", {}).items()
             if name in evidence.interventions}
    extra: dict = {"tau_free_source": tau_source, "cost_units": units, "verifier": params.verifier}
    stability = None
    if params.bootstrap:
        stability = bootstrap_stability(evidence, params.max_len, params.lam, tau_free, params.bootstrap, params.seed)
        extra["bootstrap"] = stability.to_dict()
    save_policy(out, policy_dict(result, str(evidence_path), **extra))
    return result, tau_free, tau_source, stability


def policy_controls(evidence_path: str | Path, out: Path, params: ControlsParams) -> tuple[dict, dict[str, Path]]:
    """Write the correct, generic and mismatched policies to OUT/{correct,generic,mismatched}.json; return the
    policies and their paths."""
    from playground.plugins.darc.controls import mode_policies, write_policies
    from playground.plugins.darc.evidence import base_tau_free, load_evidence

    try:
        diagnosis = json.loads(Path(params.diagnosis).read_text())
        evidence = load_evidence(evidence_path)
        tau_free = params.tau_free if params.tau_free is not None else base_tau_free(evidence_path)[0]
        policies = mode_policies(diagnosis, evidence, evidence_path, list(params.generic), params.mismatched_mode,
                                 params.max_len, params.lam, tau_free, params.verifier)
        return policies, write_policies(policies, out)
    except (ValueError, OSError) as exc:
        raise StepError(str(exc)) from None


def evidence_step(host: Host, run_dir: Path, params: EvidenceParams) -> dict:
    """`darc.evidence`: RUN_DIR/evidence.csv, base.csv and evidence.json; return the evidence's path, its
    interventions and its number of tasks."""
    from playground.plugins.darc.evaluate import gather_evidence

    try:
        path, names, tasks = gather_evidence(host, run_dir, params.diagnosis, params.base_from)
    except ValueError as exc:
        raise StepError(str(exc)) from None
    return {"evidence": str(path), "interventions": names, "tasks": tasks}


def distill_step(host: Host, run_dir: Path, params: DistillParams) -> None:
    """`darc.distill`: RUN_DIR/policy.json from RUN_DIR/evidence.csv."""
    distill_policy(run_dir / "evidence.csv", run_dir / "policy.json", params)


def controls_step(host: Host, run_dir: Path, params: ControlsParams) -> None:
    """`darc.policy_controls`: RUN_DIR/policies/{correct,generic,mismatched}.json from RUN_DIR/evidence.csv."""
    policy_controls(run_dir / "evidence.csv", run_dir / "policies", params)


def agreement_step(host: Host, run_dir: Path, params: AgreementParams) -> None:
    """`darc.agreement`: RUN_DIR/agreement.json, the diagnosis scored against RUN_DIR/evidence.csv (the whole
    library's evidence on the profiled tasks, base.csv beside it)."""
    from playground.host_api import atomic_write_text
    from playground.plugins.darc.agreement import agreement

    try:
        result = agreement(params.diagnosis, run_dir / "evidence.csv")
    except (ValueError, OSError) as exc:
        raise StepError(str(exc)) from None
    atomic_write_text(run_dir / AGREEMENT_FILE, json.dumps(result.to_dict(), indent=2) + "\n")
