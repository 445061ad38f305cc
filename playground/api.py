"""The plugin API's ground floor: everything an intervention, env or agent author imports, and nothing above
`playground.core`.

Hooks (`hookimpl`; the specifications are `playground.core.hookspecs`), the frozen payloads the hooks pass and
return, the env contract and task sets, failure labels, errors, the failure-injection instrument's request and
answer records, study table columns (`Figure`) and pipeline steps (`PipelineStep`), and what an intervention
factory receives: its parameter model (`JudgeSettings` for one that names a judge) and `Services`. Testing
fixtures are `playground.testing` (a pytest plugin). A plugin that drives whole runs (profiles, forks, replays,
its own commands) also uses the floor above, `playground.host_api`.

An import-linter contract in pyproject.toml keeps this module on the ground floor (it imports only
`playground.core`), and tests/test_layering.py plants a violation to see it break. docs/plugin-api.md lists and
counts the names.
"""

from __future__ import annotations

from playground.core.env import (
    EnvInfo,
    EnvProvider,
    ObservableFailure,
    TextEnv,
    UnknownTaskError,
    cut_grade_text,
    grade_text_pattern,
)
from playground.core.errors import MissingExtra, PlaygroundError
from playground.core.events import Event
from playground.core.figures import Figure, per_episode, per_episode_from_events
from playground.core.hookspecs import hookimpl
from playground.core.instrument import InstrumentState, JudgeAnswer, JudgeRequest
from playground.core.labels import FailureLabel, FailureType, LabelRegistry, UnknownFailure
from playground.core.payloads import (
    EFFECTS,
    AgentView,
    AttemptVerdict,
    AttemptView,
    Decision,
    Detection,
    EpisodeEnd,
    EpisodeIds,
    EpisodeStart,
    InterventionMessage,
    PayloadError,
    Proposal,
    SchemaProblem,
    StepContext,
    StepOutcome,
    Turn,
    Verification,
    keep_text,
)
from playground.core.pipeline_step import PipelineStep
from playground.core.services import JudgeSettings, ParameterError, Services, declared_values
from playground.core.task_sets import TaskSet, seed_range

__all__ = [
    # hooks and errors
    "hookimpl", "PlaygroundError", "MissingExtra", "PayloadError",
    # the env contract and task sets
    "TextEnv", "EnvProvider", "EnvInfo", "ObservableFailure", "UnknownTaskError", "TaskSet", "seed_range",
    "grade_text_pattern", "cut_grade_text", "keep_text", "SchemaProblem",
    # what the hooks pass and return
    "EpisodeIds", "EpisodeStart", "EpisodeEnd", "StepContext", "Turn", "AgentView", "Proposal", "Detection",
    "Decision", "EFFECTS", "InterventionMessage", "StepOutcome", "Verification", "AttemptView", "AttemptVerdict",
    "Event",
    # failure labels
    "FailureType", "FailureLabel", "LabelRegistry", "UnknownFailure",
    # the instrument as the judges' model (`register_instrument_judges`)
    "JudgeRequest", "JudgeAnswer", "InstrumentState",
    # what an intervention factory receives
    "JudgeSettings", "Services", "declared_values", "ParameterError",
    # study table columns (`register_figures`)
    "Figure", "per_episode", "per_episode_from_events",
    # what a study's pipelines run after the episodes (`register_pipeline_steps`)
    "PipelineStep",
]
