"""Sentry's template lesson summariser: a verified recovery becomes a reusable lesson.

Triggers and principles name verbs and failure patterns, never the episode's objects,
so a lesson can apply to other tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.plugins.sentry.repair import GENERAL_ADVICE
from playground.plugins.sentry.verifier import Verdict

TRIGGERS = {
    "repetition_or_looping": "the agent repeats '{verb} ...' and the observation stops changing",
    "planning_stall": "several actions in a row ('{verb} ...') change nothing in the world",
    "over_exploration": "the agent keeps moving and inspecting ('{verb} ...') without acting on what it found",
    "termination_miscalibration": "the agent wants to stop while the visible score shows the task unfinished",
    "hallucination": "the agent acts on an object it has never observed ('{verb} ...')",
    "objective_drift": "the agent handles objects the goal never mentions ('{verb} ...')",
    "reasoning_action_mismatch": "the agent's stated target differs from what its action '{verb} ...' touches",
}


@dataclass(frozen=True)
class LessonDraft:
    """A lesson ready to be added to the playbook."""

    failure_type: str
    labels: tuple[str, ...]
    subtype: str
    trigger: str
    principle: str


def _verb(action: str | None) -> str:
    return (action or "").strip().split(" ", 1)[0].lower() or "stop"


def summarise(verdict: Verdict, failing_action: str) -> LessonDraft:
    """Turn a resolved repair into a lesson draft (failure type, labels, trigger, principle)."""
    detection = verdict.watch.detection
    label = detection.labels[0]
    verb = _verb(failing_action)
    trigger = TRIGGERS.get(label, "the failure '{verb}' recurs").format(verb=verb)
    recovery = _verb(verdict.watch.progress_action)
    principle = (f"{GENERAL_ADVICE.get(label, 'Change course.')} What worked: switching to a "
                 f"'{recovery} ...' action that changed the world; progress resumed within {verdict.watch.cycles} steps.")
    return LessonDraft(detection.failure_type, tuple(detection.labels), f"{detection.subtype}:{verb}", trigger, principle)
