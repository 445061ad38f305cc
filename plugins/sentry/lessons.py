"""Sentry's template lesson summariser: a verified recovery becomes a reusable lesson.

Triggers and principles name verbs and failure patterns, never the episode's objects,
so a lesson can apply to other tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.plugins.sentry.labels import label_text
from playground.plugins.sentry.verifier import Verdict


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
    trigger = label_text(label, "trigger", "the failure '{verb}' recurs").format(verb=verb)
    watch = verdict.watch
    recovery = _verb(watch.relevant_action or watch.progress_action)
    within = watch.progress_cycle or watch.cycles
    principle = (f"{label_text(label, 'advice', 'Change course.')} What worked: switching to a "
                 f"'{recovery} ...' action that changed the world; progress resumed within {within} steps.")
    return LessonDraft(detection.failure_type, tuple(detection.labels), f"{detection.subtype}:{verb}", trigger,
                       principle)
