"""What a failure-injection agent injected, read back from one episode's trace events, beside what Sentry made of
it: its detections and its verdicts (for Sentry's columns in study tables, `figures.py`).

The agent (`noisy`) records each failure it injects in `Proposal.injected`; the loop writes that into the trace's
`proposal` events and hides it from every plugin, so Sentry never reads it. Sentry's own detections are the trace's
`detection` events of its detectors (`harness.OWN_DETECTORS`) on the first proposal of a step: the ones it made
live, as the agent saw the episode. Under `sentry-detect-only` (every repair off, nothing stored) they are made on
the same trajectory as under `base`.

Labels match (`label_matcher`) when they are equal or (by default) belong to the same failure mode: the failure
type the event gives for the label (the injection record's or the detection's), mapped to its mode by Sentry's
declared types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from playground.api import Event
from playground.core.events import (
    DetectionEvent,
    HeaderEvent,
    InterventionEvent,
    ProposalEvent,
    RollbackEvent,
    VerificationEvent,
)
from playground.plugins.sentry.harness import DEFAULTS, NAME, OWN_DETECTORS
from playground.plugins.sentry.labels import TYPES
from playground.plugins.sentry.measure import Hit, Injection, Matcher, streaks

MODES = {t.name: t.mode for t in TYPES}


def episode_id(events: Sequence[Event]) -> str:
    """The episode's id from its trace header ("" without one)."""
    header = next((e for e in events if isinstance(e, HeaderEvent)), None)
    return (header.episode_id or f"{header.harness}/{header.task_id}") if header else ""


def ran_sentry(events: Sequence[Event]) -> bool:
    """Whether Sentry was one of the episode's interventions (its header says so)."""
    return any(isinstance(e, HeaderEvent) and NAME in e.interventions for e in events)


def proposals_by_step(events: Sequence[Event]) -> dict[int, list[ProposalEvent]]:
    """Each step's proposals, attempts in order, on the surviving path (a rollback drops the steps it undid)."""
    steps: dict[int, list[ProposalEvent]] = {}
    for event in events:
        if isinstance(event, ProposalEvent):
            steps.setdefault(event.step, []).append(event)
        elif isinstance(event, RollbackEvent):
            steps = {step: found for step, found in steps.items() if step < event.to_step}
    return steps


def injected_at(proposal: ProposalEvent) -> tuple[str, int] | None:
    """(label, streak) a proposal event says was injected, or None (no injection, or an unusable record)."""
    record = proposal.injected
    if not isinstance(record, Mapping) or not record.get("label"):
        return None
    return str(record["label"]), int(record.get("streak") or 0)


def injections(events: Sequence[Event]) -> list[Injection]:
    """The episode's injected failure streaks, from the executed (last) proposal of each step."""
    name = episode_id(events)
    return streaks((name, step, *mark) for step, proposals in sorted(proposals_by_step(events).items())
                   if (mark := injected_at(proposals[-1])) is not None)


def detections(events: Sequence[Event]) -> list[Hit]:
    """Sentry's own detections on the first proposal of each step: one hit per (step, label)."""
    name = episode_id(events)
    found = {(e.step, label) for e in events if isinstance(e, DetectionEvent) and e.attempt == 0
             and e.detector in OWN_DETECTORS for label in e.labels}
    return [Hit(name, step, label, NAME) for step, label in sorted(found)]


def label_matcher(events_of_cell: Sequence[Sequence[Event]], match: str = "mode") -> Matcher:
    """Labels matched by failure mode (or, `match` "label", only when equal), each label's failure type read from
    the cell's events."""
    types: dict[str, str] = {}
    for events in events_of_cell:
        for event in events:
            if isinstance(event, ProposalEvent) and isinstance(event.injected, Mapping):
                types.setdefault(str(event.injected.get("label")), str(event.injected.get("failure_type", "")))
            elif isinstance(event, DetectionEvent):
                types.update(dict.fromkeys(event.labels, event.failure_type))

    def mode_of(label: str) -> str:
        failure_type = types.get(label, label)
        return MODES.get(failure_type, failure_type)

    return Matcher(mode_of, match)


@dataclass
class VerdictTruth:
    """A Sentry verdict on a soft repair, and what the injected failure it repaired really did."""

    repair_step: int
    verdict: str  # "resolved", "unresolved" or "unverified"
    injected_label: str | None = None  # None: the repair was about no injected failure
    ended: bool | None = None  # the injected streak was no longer being made within the horizon
    recurred: bool | None = None  # a new streak of the same label started within the horizon
    lesson: bool = False  # the verdict stored a lesson

    @property
    def truth(self) -> bool | None:
        """Whether the injected failure really was resolved: it ended and did not recur (None: no failure)."""
        return None if self.injected_label is None else bool(self.ended and not self.recurred)


def verdict_truths(events: Sequence[Event], window: int, matches: Matcher) -> list[VerdictTruth]:
    """Each of Sentry's verdicts in the episode with its ground truth.

    The repaired failure is the injected streak (a label matching the repair's) made at the repair step or within
    `window` steps before it, the latest such (an exact label first). Over the verifier's horizon H (the episode's
    `horizon` parameter: the repair step and the H - 1 after it) it **ended** when the executed proposal of some
    step no longer belongs to it, and **recurred** when a proposal of a later step makes a new streak of the same
    label.
    """
    header = next((e for e in events if isinstance(e, HeaderEvent)), None)
    horizon = int((header.params if header else {}).get("horizon", DEFAULTS["horizon"]))
    steps = proposals_by_step(events)
    repairs = {e.step: tuple(e.detections[0].get("labels") or ()) for e in events
               if isinstance(e, InterventionEvent) and e.kind == "soft_repair" and e.detections}
    found = []
    for event in events:
        if not isinstance(event, VerificationEvent) or event.plugin != NAME:
            continue
        r, labels = event.repair_step, repairs.get(event.repair_step, ())
        truth = VerdictTruth(r, event.verdict, lesson=event.lesson is not None)
        made = [(at, *mark) for at in range(r - window, r + 1) for p in steps.get(at, ())
                if (mark := injected_at(p)) is not None and any(matches(label, mark[0]) for label in labels)]
        if made:
            _, truth.injected_label, streak = max(made, key=lambda m: (m[1] in labels, m[0]))
            span = [steps[at] for at in range(r, r + horizon) if steps.get(at)]
            truth.ended = any(injected_at(proposals[-1]) != (truth.injected_label, streak) for proposals in span)
            later = [mark for at in range(r + 1, r + horizon) for p in steps.get(at, ())
                     if (mark := injected_at(p)) is not None]
            truth.recurred = any(label == truth.injected_label and s != streak for label, s in later)
        found.append(truth)
    return found
