"""Sentry's columns in study tables (`register_figures`): soft repairs and the detections the intervention-need
check declined, per episode. The rest of what Sentry's table showed (success, the paired McNemar test, the
resolved share, tokens, usable judge replies) the study table and the host's figures show for every method.

"Declined" counts the steps where Sentry's own progress or grounding detectors fired on the first proposal and no
intervention followed: what the intervention-need check (threshold or LLM judgment, with the cooldown) and the
per-episode repair cap let pass. It is read from the episodes' traces (None for a run whose traces were left out).
"""

from __future__ import annotations

from playground.api import Event, Figure, per_episode, per_episode_from_events
from playground.core.events import DetectionEvent, InterventionEvent
from playground.plugins.sentry.harness import OWN_DETECTORS


def declined_detections(events: list[Event]) -> int:
    """Steps where Sentry's progress or grounding detectors fired on the first proposal and no intervention followed."""
    detected = {e.step for e in events
                if isinstance(e, DetectionEvent) and e.attempt == 0 and e.detector in OWN_DETECTORS
                and e.failure_type != "action_validity"}
    intervened = {e.step for e in events if isinstance(e, InterventionEvent) and e.attempt == 0}
    return len(detected - intervened)


FIGURES = (
    Figure("soft_repairs", "Sentry's soft repairs (a lesson or hint shown, the agent asked again) per episode",
           per_episode(lambda record: record.interventions.get("soft_repair", 0))),
    Figure("need_check_declined", "detections of Sentry's progress and grounding detectors that no intervention "
                                  "followed (the need check or the repair cap let them pass), per episode",
           per_episode_from_events(declined_detections)),
)
