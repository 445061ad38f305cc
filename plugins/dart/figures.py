"""DART's columns in study tables (`register_figures`): what its bench counted, read from the episodes' traces.

Per episode (`episode_figures`, one pass over the trace's events):

- `replayed`: env steps taken minus the steps of the final branch (the work a rollback threw away);
- `preserved`: instances committed at the step each rollback restored (the work a rollback kept);
- `rollbacks` / `reruns`: restores of a checkpoint after step 0, and of step 0 (the whole task again);
- `blocked`: rollbacks an intervention declined (`details.blocked`), rerunning instead;
- `refused_calls`: steps the env refused or did not know (an agent's own error, not an injected fault);
- from the env's ground truth (`StepEvent.truth`/`RollbackEvent.truth`, written by the loop for measurement and
  never shown to a plugin; the workflow and AppWorld envs' `ground_truth()`): `unsafe` restores that crossed an
  irreversible effect, `false_blocks` (blocked where restoring the decision's candidate would have crossed none),
  and where the env says so, whether the task has a fault (`faulty`) and whether it fired (`fault_reached`: a fault
  is silent until its faulty write).

The study table shows the per-episode means (`faults_reached`: the share of faulted episodes whose fault fired);
the truth-based figures are None for a cell whose env writes no ground truth.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from playground.api import Event, Figure
from playground.core.events import InterventionEvent, RollbackEvent, StepEvent
from playground.core.records import EpisodeRecord

COUNTS = ("replayed", "preserved", "rollbacks", "reruns", "blocked", "refused_calls")


def crosses_irreversible(truth: Mapping[str, Any], step: int) -> bool:
    """Whether restoring the state of `step` would cross a live irreversible effect (the env's own rule: step 0
    starts a new attempt, so it never does)."""
    return step > 0 and any(clock >= step for clock in truth.get("irreversible", ()))


def episode_figures(events: Sequence[Event]) -> dict[str, Any]:
    """One episode's figures from its trace events (the truth-based ones None where the env wrote no truth)."""
    figures: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    figures.update(steps=0, false_blocks=0)
    position = 0
    committed_at: dict[int, int] = {}
    truth: Mapping[str, Any] | None = None
    for event in events:
        if isinstance(event, StepEvent):
            figures["steps"] += 1
            position = event.step + 1
            failure = event.failure or {}
            figures["refused_calls"] += not event.valid_action and (not failure or bool(failure.get("rejected")))
            truth = event.truth or truth
            committed_at[position] = int(truth.get("committed", 0)) if truth else 0
        elif isinstance(event, RollbackEvent):
            figures["preserved"] += committed_at.get(event.to_step, 0)
            figures["rollbacks" if event.to_step > 0 else "reruns"] += 1
            position = event.to_step
            truth = event.truth or truth
        elif isinstance(event, InterventionEvent) and event.details.get("blocked"):
            figures["blocked"] += 1
            candidate = event.details.get("candidate")
            if truth is not None and candidate is not None and not crosses_irreversible(truth, int(candidate)):
                figures["false_blocks"] += 1
    figures["replayed"] = figures["steps"] - position
    if truth is None:
        figures.update(unsafe=None, false_blocks=None, faulty=None, fault_reached=None)
    else:
        faulty = truth.get("faulty")  # None: the env does not say whether its task has a fault
        figures.update(unsafe=int(truth["unsafe_restores"]), faulty=faulty,
                       fault_reached=None if faulty is None else bool(faulty and truth.get("fired")))
    return figures


def _mean(key: str) -> Callable[[Sequence[EpisodeRecord], Any], float | None]:
    """The mean of one of `episode_figures`' values over the cell's episodes that have it (None where none has)."""

    def of(records: Sequence[EpisodeRecord], events: Any) -> float | None:
        values = [episode_figures(trace)[key] for record in records if (trace := events(record))]
        values = [value for value in values if value is not None]
        return sum(values) / len(values) if values else None

    return of


def _faults_reached(records: Sequence[EpisodeRecord], events: Any) -> float | None:
    """The share of the cell's faulted episodes whose fault fired (None where no episode's task has a fault)."""
    figures = [episode_figures(trace) for record in records if (trace := events(record))]
    faulted = [f for f in figures if f["faulty"]]
    return sum(f["fault_reached"] for f in faulted) / len(faulted) if faulted else None


FIGURES = (
    Figure("replayed", "env steps a rollback threw away (steps taken minus the final branch's), per episode",
           _mean("replayed")),
    Figure("preserved", "committed instances the rollbacks kept, per episode", _mean("preserved")),
    Figure("rollbacks", "restores of a checkpoint after step 0, per episode", _mean("rollbacks")),
    Figure("reruns", "restores of step 0 (the whole task again), per episode", _mean("reruns")),
    Figure("blocked", "rollbacks an intervention declined (rerunning instead), per episode", _mean("blocked")),
    Figure("unsafe", "restores that crossed an irreversible effect (the env's ground truth), per episode",
           _mean("unsafe")),
    Figure("false_blocks", "blocked rollbacks whose candidate would have crossed no irreversible effect (the env's "
                           "ground truth), per episode", _mean("false_blocks")),
    Figure("refused_calls", "steps the env refused or did not know (the agent's own errors), per episode",
           _mean("refused_calls")),
    Figure("faults_reached", "the share of faulted episodes whose fault fired (the env's ground truth)",
           _faults_reached, share=True),
)
