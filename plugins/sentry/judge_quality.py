"""Figures of a run played by the failure-injection instrument as the judges' model: how Sentry's mechanism
depends on judge quality (instrument figures: never a claim about any LLM).

Read from a run directory's files only (records and traces):

- `judge_grades`: each kind of judge role's graded calls (`judge_call` events' `graded`) and the share right:
  the accuracy the instrument was set to, or a real model's measured accuracy when it answered (`by` "model");
- `lesson_precision`: the share of stored lessons that come from a truly resolved failure, graded by the
  injected truth (`injected.verdict_truths`, unverified lessons included), beside the base rate (the share of all
  soft repairs whose failure truly was resolved, whatever the verdict);
- `learning_curve`: success by episode index (the order the harness played its tasks), first and last quarter;
- `success_against`: a harness's success beside another's on the same tasks, with the exact McNemar test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playground.api import Event
from playground.core.events import JudgeCallEvent
from playground.host_api import EpisodeRecord, compare, load_records, read_events, record_trace, wilson_interval
from playground.plugins.sentry.figures import cell_verdicts


def harness_records(run_dir: str | Path, harness: str) -> list[EpisodeRecord]:
    """The finished (not errored) episode records of `harness`, in the order they were played."""
    return [r for r in load_records(run_dir) if r.harness == harness and r.status != "error"]


def traces(run_dir: str | Path, harness: str) -> list[list[Event]]:
    """The trace events of `harness`'s finished episodes, in the order they were played."""
    return [read_events(record_trace(run_dir, r)) for r in harness_records(run_dir, harness)]


def judge_grades(run_dir: str | Path, harness: str, shadow: bool = False) -> dict[str, dict[str, Any]]:
    """{kind: {"calls", "right", "accuracy", "ci95", "by"}} over the graded judge calls of `harness`'s episodes: the
    replies the run used, or (`shadow`) those of the shadow model asked the same requests."""
    grades: dict[str, dict[str, Any]] = {}
    for events in traces(run_dir, harness):
        for event in events:
            if not isinstance(event, JudgeCallEvent) or not event.graded:
                continue
            graded = event.graded.get("shadow") if shadow else event.graded
            if not graded:
                continue
            row = grades.setdefault(str(event.graded.get("kind")), {"calls": 0, "right": 0, "by": set()})
            row["calls"] += 1
            row["right"] += bool(graded.get("correct"))
            row["by"].add("shadow" if shadow else str(graded.get("by")))
    return {kind: {"calls": r["calls"], "right": r["right"], "accuracy": r["right"] / r["calls"],
                   "ci95": wilson_interval(r["right"], r["calls"]), "by": ",".join(sorted(r["by"]))}
            for kind, r in sorted(grades.items())}


def lesson_precision(run_dir: str | Path, harness: str, match: str = "label") -> dict[str, Any]:
    """Lessons stored by `harness` and the share from a truly resolved failure, beside the base rate."""
    verdicts = cell_verdicts(traces(run_dir, harness), match)
    lessons = [v for v in verdicts if v.lesson]
    true_lessons = sum(bool(v.truth) for v in lessons)
    truly = sum(bool(v.truth) for v in verdicts)
    return {"repairs": len(verdicts), "truly_resolved": truly,
            "base_rate": truly / len(verdicts) if verdicts else None,
            "lessons": len(lessons), "true_lessons": true_lessons,
            "precision": true_lessons / len(lessons) if lessons else None}


def learning_curve(run_dir: str | Path, harness: str) -> dict[str, Any]:
    """Success by episode index: each episode's outcome in play order, and the first and last quarter's rates."""
    won = [r.won for r in harness_records(run_dir, harness)]
    quarter = max(1, len(won) // 4)
    first, last = won[:quarter], won[-quarter:]
    return {"episodes": len(won), "won": won,
            "first_quarter": sum(first) / len(first) if first else None,
            "last_quarter": sum(last) / len(last) if last else None}


def success_against(run_dir: str | Path, harness: str, reference: str = "base") -> dict[str, Any]:
    """`harness`'s success with its Wilson interval, and the exact McNemar test against `reference` on the tasks
    both played (`playground.run.stats.compare`; b: reference won and harness lost; c: the reverse)."""
    mine, theirs = harness_records(run_dir, harness), harness_records(run_dir, reference)
    wins = sum(r.won for r in mine)
    row = {"episodes": len(mine), "won": wins, "success": wins / len(mine) if mine else None,
           "ci95": wilson_interval(wins, len(mine)), "pairs": 0, "b": 0, "c": 0, "p": None}
    if mine and theirs:
        comparison = compare(theirs, mine, label_a=reference, label_b=harness)
        success = comparison.metric("success")
        b, c = success.discordant or (0, 0)
        row.update(pairs=comparison.n_pairs, b=b, c=c, p=success.p_value)
    return row
