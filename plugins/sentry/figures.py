"""Sentry's columns in study tables (`register_figures`).

- `soft_repairs` and `need_check_declined`, per episode. "Declined" counts the steps where Sentry's own progress
  or grounding detectors fired on the first proposal and no intervention followed: what the intervention-need
  check (threshold or LLM judgment, with the cooldown) and the per-episode repair cap let pass.
- Against the failures a failure-injection agent (`noisy`) injected (`injected.py`; instrument figures): Sentry's
  detectors' macro recall, precision and F1 over the labels (window 3 steps, labels matched by failure mode:
  `measure.py` states the rule) and their recall and precision per label (a column per label); the verifier's
  agreement with whether the repaired failure really ended (and Cohen's kappa); and the share of stored lessons
  whose failure truly was resolved (labels matched exactly, as the instrument sweeps published it). They are None
  for a cell where Sentry did not run or nothing was injected; the study `sentry-instrument-detectors` plays the
  detectors alone (`sentry-detect-only`) and with their repairs (`sentry`).

- From the paired forks a study's pipeline ran (`paired.py`, the step `sentry.paired_forks`): each arm's local
  recovery and final success with their intervals, the paired differences and p, the share of points the repair
  changed, and local recovery per intervention kind (`paired_*`; of the cell's harness's forks).

The rest of what Sentry's table showed (success, the paired McNemar test, the resolved share, tokens, usable judge
replies) the study table and the host's figures show for every method. All are read from the episodes' traces
(None for a run whose traces were left out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from playground.api import Event, Figure, per_episode, per_episode_from_events
from playground.core.events import DetectionEvent, InterventionEvent
from playground.core.records import EpisodeRecord
from playground.plugins.sentry.harness import OWN_DETECTORS
from playground.plugins.sentry.injected import (
    VerdictTruth,
    detections,
    injections,
    label_matcher,
    ran_sentry,
    verdict_truths,
)
from playground.plugins.sentry.measure import LabelScore, cohen_kappa, macro, score

WINDOW = 3  # steps after an injection in which a detection still counts for it


def declined_detections(events: list[Event]) -> int:
    """Steps where Sentry's progress or grounding detectors fired on the first proposal and no intervention followed."""
    detected = {e.step for e in events
                if isinstance(e, DetectionEvent) and e.attempt == 0 and e.detector in OWN_DETECTORS
                and e.failure_type != "action_validity"}
    intervened = {e.step for e in events if isinstance(e, InterventionEvent) and e.attempt == 0}
    return len(detected - intervened)


def _sentry_traces(records: Sequence[EpisodeRecord], events: Any) -> list[list[Event]]:
    """The traces of the cell's episodes that Sentry ran in."""
    return [trace for record in records if (trace := events(record)) and ran_sentry(trace)]


def label_scores(traces: Sequence[Sequence[Event]]) -> dict[str, LabelScore] | None:
    """{label: LabelScore} of Sentry's detections against the injections of these episodes (None where nothing
    was injected)."""
    injected = [i for trace in traces for i in injections(trace)]
    if not injected:
        return None
    hits = [h for trace in traces for h in detections(trace)]
    return score(injected, hits, WINDOW, label_matcher(traces))


def _detector(key: str) -> Callable[[Sequence[EpisodeRecord], Any], float | None]:
    def of(records: Sequence[EpisodeRecord], events: Any) -> float | None:
        rows = label_scores(_sentry_traces(records, events))
        return None if rows is None else macro(rows)[key]

    return of


def _by_label(key: str) -> Callable[[Sequence[EpisodeRecord], Any], dict[str, float | None] | None]:
    def of(records: Sequence[EpisodeRecord], events: Any) -> dict[str, float | None] | None:
        rows = label_scores(_sentry_traces(records, events))
        return None if rows is None else {label: getattr(row, key) for label, row in rows.items()}

    return of


def cell_verdicts(traces: Sequence[Sequence[Event]], match: str = "mode") -> list[VerdictTruth]:
    """Every verdict of Sentry's in these episodes, with its ground truth (labels matched by `match`)."""
    matcher = label_matcher(traces, match)
    return [v for trace in traces for v in verdict_truths(trace, WINDOW, matcher)]


def _judged(records: Sequence[EpisodeRecord], events: Any) -> list[tuple[bool, bool]]:
    """(verifier said resolved, truly resolved) for each verdict about an injected failure."""
    return [(v.verdict == "resolved", bool(v.truth)) for v in cell_verdicts(_sentry_traces(records, events))
            if v.verdict in ("resolved", "unresolved") and v.truth is not None]


def _agreement(records: Sequence[EpisodeRecord], events: Any) -> float | None:
    judged = _judged(records, events)
    return sum(a == b for a, b in judged) / len(judged) if judged else None


def _kappa(records: Sequence[EpisodeRecord], events: Any) -> float | None:
    return cohen_kappa(_judged(records, events))


def _lesson_precision(records: Sequence[EpisodeRecord], events: Any) -> float | None:
    lessons = [v for v in cell_verdicts(_sentry_traces(records, events), match="label") if v.lesson]
    return sum(bool(v.truth) for v in lessons) / len(lessons) if lessons else None


def _paired(metric: str, keyed: bool = True) -> Callable[[Any, Sequence[EpisodeRecord]], Any]:
    """A column of the paired forks of the cell's harness (`paired.py`, the pipeline step `sentry.paired_forks`):
    `metric`'s rate per arm and the paired difference, each with its 95% interval (keyed), or one figure of the
    report."""
    def of(folder: Any, records: Sequence[EpisodeRecord]) -> Any:
        from playground.plugins.sentry.paired import read_report

        report = read_report(folder, records[0].harness) if records else None
        if report is None:
            return None
        figures = report["figures"]
        if not keyed:
            return figures[metric]
        rates = figures[metric]
        return {f"{arm}{end}": value for arm, rate in (("repair", rates["repair"]), ("original", rates["original"]),
                                                      ("difference", rates["difference"]))
                for end, value in (("", rate.get("rate", rate.get("difference"))), (" low", rate["ci95"][0]),
                                   (" high", rate["ci95"][1]))}
    return of


def _paired_p(metric: str) -> Callable[[Any, Sequence[EpisodeRecord]], Any]:
    def of(folder: Any, records: Sequence[EpisodeRecord]) -> Any:
        rates = _paired(metric, keyed=False)(folder, records)
        return None if rates is None else rates["difference"]["p_value"]
    return of


def _paired_changed(folder: Any, records: Sequence[EpisodeRecord]) -> float | None:
    points = _paired("points", keyed=False)(folder, records)
    return None if not points else _paired("changed", keyed=False)(folder, records) / points


def _paired_by_kind(folder: Any, records: Sequence[EpisodeRecord]) -> dict[str, float] | None:
    kinds = _paired("local_recovery_by_kind", keyed=False)(folder, records)
    return None if kinds is None else {f"{kind} {arm}": v[arm] for kind, v in kinds.items() for arm in ("repair",
                                                                                                         "original")}


FIGURES = (
    Figure("soft_repairs", "Sentry's soft repairs (a lesson or hint shown, the agent asked again) per episode",
           per_episode(lambda record: record.interventions.get("soft_repair", 0))),
    Figure("need_check_declined", "detections of Sentry's progress and grounding detectors that no intervention "
                                  "followed (the need check or the repair cap let them pass), per episode",
           per_episode_from_events(declined_detections)),
    Figure("detector_recall", "Sentry's detectors against the injected failures: macro recall over the labels "
                              "(window 3, labels matched by failure mode)", _detector("recall"), share=True),
    Figure("detector_precision", "... macro precision over the labels", _detector("precision"), share=True),
    Figure("detector_f1", "... macro F1 over the labels", _detector("f1"), share=True),
    Figure("detector_recall_by_label", "Sentry's detectors against the injected failures: recall per injected "
                                       "label (detected streaks / injected streaks)", _by_label("recall"), share=True),
    Figure("detector_precision_by_label", "Sentry's detectors against the injected failures: precision per detected "
                                          "label (true-positive detections / detections)", _by_label("precision"),
           share=True),
    Figure("verifier_agreement", "the share of Sentry's verdicts about an injected failure that agree with whether "
                                 "it really ended within the horizon without recurring", _agreement, share=True),
    Figure("verifier_kappa", "Cohen's kappa of those verdicts against the truth", _kappa),
    Figure("lesson_precision", "the share of stored lessons whose injected failure truly was resolved (labels "
                               "matched exactly)",
           _lesson_precision, share=True),
    Figure("paired_points", "Sentry's paired forks: intervention points forked (the pipeline step "
                            "sentry.paired_forks)", of_folder=_paired("points", keyed=False)),
    Figure("paired_local_recovery", "Sentry's paired forks: local recovery (blind judge) with the repair and with "
                                    "the original proposal, and their paired difference, each with its 95% interval "
                                    "over episodes", of_folder=_paired("local_recovery"), share=True),
    Figure("paired_local_recovery_p", "... the difference's paired sign-flip p over episodes",
           of_folder=_paired_p("local_recovery")),
    Figure("paired_final_success", "Sentry's paired forks: the env's grade at the fork's end, per arm and paired "
                                   "(never seen by the judge)", of_folder=_paired("final_success"), share=True),
    Figure("paired_changed", "Sentry's paired forks: the share of points where the repair changed the action",
           of_folder=_paired_changed, share=True),
    Figure("paired_local_recovery_by_kind", "Sentry's paired forks: local recovery per intervention kind and arm",
           of_folder=_paired_by_kind, share=True),
)
