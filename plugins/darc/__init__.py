"""DARC (diagnosis before recovery): profile failures, gather evidence, distil and deploy a recovery chain.

The runs are the host's (`playground run` or a study) over the harnesses this plugin's loaders build; the
commands read their run directories. `profile` diagnoses the dominant failure mode of a profiling run (the base
agent watched by detect-only detectors); `evaluate` reads a run of each intervention alone into an evidence
table; `evidence` reads and writes that table; `distill` scores every short-circuit chain of interventions on it
and picks the one to freeze; `frontier` plots the candidates' cost against their success; `policy` deploys a
frozen chain as a cascade; `controls` and `factorial` hold the paper's control policies and harnesses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from playground.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from playground.api import Services
    from playground.plugins.darc.controls import DiagnosisNote, MetadataNote
    from playground.plugins.darc.params import DiagnosisNoteParams, MetadataNoteParams


@hookimpl
def register_harness_loaders(register) -> None:
    """`--harness darc:POLICY.json` deploys a frozen DARC policy as a cascade; `darc-profile:` builds the profiling
    harness (`darc diagnose` reads its run), `darc-eval:` one intervention alone (`darc evidence` reads their run),
    `darc-factorial:` a cell of the view x prompt factorial (darc-table13) and `darc-info:` a matched-information
    control (darc-table7)."""
    from playground.plugins.darc.controls import INFO_PREFIX, info_harness
    from playground.plugins.darc.evaluate import EVAL_PREFIX, eval_harness
    from playground.plugins.darc.factorial import PREFIX, cell_harness_spec
    from playground.plugins.darc.policy import cascade_harness
    from playground.plugins.darc.profile import PROFILE_HARNESS, profile_harness

    register("darc:", cascade_harness, description="deploy a frozen DARC policy (darc:POLICY.json) as a cascade")
    register(EVAL_PREFIX, eval_harness, description="one intervention alone (an evidence run: darc-eval:NAME)")
    register(PROFILE_HARNESS + ":", profile_harness,
             description="the base agent watched by detect-only detectors (a profiling run: darc-profile:DET1,DET2)")
    register(PREFIX, cell_harness_spec,
             description="one cell of the view x prompt factorial (darc-factorial:GUARD-VIEW-PROMPT)")
    register(INFO_PREFIX, info_harness,
             description="a matched-information control (darc-info:label:MODE, "
                         "darc-info:metadata:KEYS, darc-info:random:GUARD)")


@hookimpl
def register_interventions(register) -> None:
    """The notes of the matched-information controls (points of comparison, not in the library)."""
    from playground.plugins.darc.controls import LABEL_NOTE, METADATA_NOTE
    from playground.plugins.darc.params import DiagnosisNoteParams, MetadataNoteParams

    register(LABEL_NOTE, _diagnosis_note, cost_unit="steps", candidate=False, params_model=DiagnosisNoteParams,
             description="a standing note naming the diagnosed failure mode (parameter mode), nothing else")
    register(METADATA_NOTE, _metadata_note, cost_unit="steps", candidate=False, params_model=MetadataNoteParams,
             description="a standing note with the task facts of the env's reset info named by the parameter keys")


def _diagnosis_note(params: DiagnosisNoteParams, services: Services) -> DiagnosisNote:
    """`diagnosis-note`'s factory (the host hands it the validated `DiagnosisNoteParams`)."""
    from playground.plugins.darc.controls import DiagnosisNote

    return DiagnosisNote(params)


def _metadata_note(params: MetadataNoteParams, services: Services) -> MetadataNote:
    """`metadata-note`'s factory (the host hands it the validated `MetadataNoteParams`)."""
    from playground.plugins.darc.controls import MetadataNote

    return MetadataNote(params)


@hookimpl
def register_intervention_loaders(register) -> None:
    """`detect-only:NAME`: intervention NAME detecting and observing only (the profiling harness's detectors)."""
    from playground.plugins.darc.profile import DETECT_ONLY_PREFIX, detect_only_intervention

    register(DETECT_ONLY_PREFIX, detect_only_intervention,
             description="an intervention that detects and observes but never intervenes (detect-only:NAME)")


@hookimpl
def register_attempt_verifiers(register) -> None:
    """Deployment verifiers a cascade can stop on without the benchmark's grade: `agent:done`, `agent:self-check`."""
    from playground.plugins.darc.verifiers import agent_done, agent_self_check

    register("agent:done", agent_done, description="the agent's own stop: it declared the task done")
    register("agent:self-check", agent_self_check,
             description="the agent's own model judges, from what the agent saw, whether the goal was reached")


@hookimpl
def register_instrument_judges(register) -> None:
    """Say how the failure-injection instrument answers DARC's diagnoser role (`instrument.py`)."""
    register("darc.diagnoser", _answer_diagnosis, kind="diagnoser")  # llm_diagnosis.ROLE (tests ask by it)


def _answer_diagnosis(request):
    """`instrument.answer_diagnosis`, imported when the instrument first answers (plugin loading stays light)."""
    from playground.plugins.darc.instrument import answer_diagnosis

    return answer_diagnosis(request)


@hookimpl
def register_figures(register) -> None:
    """Add DARC's study table columns: success per 100 env steps (Table 10) and the share solved within each step
    budget (Figure 3)."""
    from playground.plugins.darc.figures import FIGURES

    for figure in FIGURES:
        register(figure)


@hookimpl
def register_pipeline_steps(register) -> None:
    """DARC's stages as a study's pipeline steps (`steps.py`): diagnose, evidence, distill, policy controls,
    agreement; diagnose and evidence are also `playground darc diagnose` and `darc evidence`."""
    from playground.api import PipelineStep
    from playground.plugins.darc import steps

    register(PipelineStep("darc.diagnose", "a profiling run's failure signatures to a mode and its admissible "
                                           "interventions (diagnosis.json)", steps.diagnose_step, steps.DiagnoseParams,
                          command="diagnose"))
    register(PipelineStep("darc.evidence", "each intervention alone beside base, as evidence (evidence.csv)",
                          steps.evidence_step, steps.EvidenceParams, command="evidence"))
    register(PipelineStep("darc.distill", "the cost-aware chain that wins on the evidence, frozen (policy.json)",
                          steps.distill_step, steps.DistillParams))
    register(PipelineStep("darc.policy_controls", "Table 6's correct, generic and mismatched policies "
                                                  "(policies/*.json)", steps.controls_step, steps.ControlsParams))
    register(PipelineStep("darc.agreement", "Table 15: the diagnoses against the mode whose interventions fix the most "
                                            "failures in the evidence (agreement.json)", steps.agreement_step,
                          steps.AgreementParams))


@hookimpl
def register_commands(cli) -> None:
    """Add the `darc` command group."""
    from playground.plugins.darc.cli import darc_group

    cli.add_command(darc_group)


@hookimpl
def register_studies(register) -> None:
    """Ship the plugin's studies as data (the paper's Tables 5, 6, 7, 9, 10, 13, 14 and 15, the instrument sweep;
    each distils the policies it deploys in its own pipelines): every `studies/*.toml` beside this module."""
    from pathlib import Path

    for path in sorted((Path(__file__).parent / "studies").glob("*.toml")):
        register(path)
