"""AED: error-diagnosis pairs from traces, matched replay from the same state, training views.

`diagnose` turns each failed episode into checked error-diagnosis pairs (quotations that
occur in the trace, a correction admissible at the attributed step); `replay` runs each
correction against a retry of the original action from the same rebuilt state (the fork
machinery of `playground.run.forks`); `views` exports diagnosis, actor-recovery and
Agent Data Protocol views validated against the schemas in `schemas/`. Both stages are also a
study's pipeline steps (`steps.py`: `aed.diagnose`, `aed.replay`), and `figures.py` makes
their pass rates, paired interval and evidence grades study columns. See docs/methods/aed.md.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_commands(cli) -> None:
    """Add the `aed` command group."""
    from playground.plugins.aed.cli import aed_group

    cli.add_command(aed_group)


@hookimpl
def register_instrument_judges(register) -> None:
    """Say how the failure-injection instrument answers AED's LLM diagnoser (`instrument.py`)."""
    register("aed.diagnoser", _answer_diagnosis, kind="diagnoser")  # diagnose.LLM_ROLE (tests ask by it)


def _answer_diagnosis(request):
    """`instrument.answer_diagnosis`, imported when the instrument first answers (plugin loading stays light)."""
    from playground.plugins.aed.instrument import answer_diagnosis

    return answer_diagnosis(request)


@hookimpl
def register_studies(register) -> None:
    """Ship the plugin's studies as data (the source runs of the matched replay): every `studies/*.toml` beside
    this module."""
    from pathlib import Path

    for path in sorted((Path(__file__).parent / "studies").glob("*.toml")):
        register(path)


@hookimpl
def register_pipeline_steps(register) -> None:
    """AED's stages as a study's pipeline steps: `aed.diagnose` then `aed.replay`, over a copy of a grid's run; also
    `playground aed diagnose` and `replay`."""
    from playground.api import PipelineStep
    from playground.plugins.aed.steps import DiagnoseParams, ReplayParams, diagnose, replay

    register(PipelineStep("aed.diagnose", "the failed episodes as checked error-diagnosis pairs (aed/diagnoses.jsonl)",
                          diagnose, DiagnoseParams, command="diagnose"))
    register(PipelineStep("aed.replay", "each correction against a retry of the original action from the same "
                                        "rebuilt state (aed/replays.jsonl)", replay, ReplayParams, command="replay"))


@hookimpl
def register_figures(register) -> None:
    """AED's study columns: correction against retry, evidence grades, yield (`figures.py`)."""
    from playground.plugins.aed.figures import FIGURES

    for figure in FIGURES:
        register(figure)
