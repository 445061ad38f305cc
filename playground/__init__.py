"""playground: a plugin host for studying how agents fail and how they recover.

This module is the public API a plugin author imports from::

    from playground import Decision, InterventionMessage, hookimpl

Everything here is re-exported from `playground.core` (hooks, payloads, the env
contract, failure labels, errors) and `playground.agents.base` (the agent protocol).
"""

from playground.agents.base import Agent
from playground.core.env import EnvProvider, TextEnv
from playground.core.errors import PlaygroundError
from playground.core.hookspecs import hookimpl
from playground.core.labels import FailureLabel, FailureType
from playground.core.payloads import (
    AgentView,
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
)
from playground.core.task_sets import TaskSet

__version__ = "0.1.0"

__all__ = [
    "Agent", "AgentView", "Decision", "Detection", "EnvProvider", "EpisodeEnd", "EpisodeIds", "EpisodeStart",
    "FailureLabel", "FailureType", "InterventionMessage", "PayloadError", "PlaygroundError", "Proposal",
    "SchemaProblem", "StepContext", "StepOutcome", "TaskSet", "TextEnv", "Turn", "Verification", "hookimpl",
]
