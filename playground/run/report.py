"""Counting: per-episode tallies from trace events, and the run summary from episode records.

The loop only emits events; everything counted here is derived from them, so new
metrics never need a change to the loop.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from playground.core.events import (
    DetectionEvent,
    Event,
    InterventionEvent,
    JudgeCallEvent,
    LessonEvent,
    ProposalEvent,
    StepEvent,
    VerificationEvent,
)
from playground.core.records import TRACE_COUNTED, EpisodeRecord
from playground.run.judge_quality import JudgmentTally, flag_lines, flagged_columns, summarise_judgments
from playground.run.traces import TraceError, read_events
from playground.run.trials import trial_fields


def merge_failures(records: Iterable[EpisodeRecord]) -> dict[str, dict[str, int]]:
    """The `failures` counts of several records (a cascade's attempts, a harness's episodes) added up."""
    return add_failures(record.failures for record in records)


def add_failures(failures: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """Several `failures` counts ("failure_type/label" -> counts) added up."""
    total: dict[str, Counter[str]] = {}
    for counts_by_key in failures:
        for key, counts in counts_by_key.items():
            total.setdefault(key, Counter()).update(counts)
    return {key: dict(counts) for key, counts in sorted(total.items())}


def tally_trace(events: Iterable[Event]) -> EpisodeTally:
    """The counts of one episode from its trace events (for records written before a count existed)."""
    tally = EpisodeTally()
    for event in events:
        tally.add(event)
    return tally


def merge_cache_use(records: Iterable[EpisodeRecord]) -> dict[str, int] | None:
    """The `response_cache` hits and misses of several records added up; None when none of them used the cache."""
    used = [record.response_cache for record in records if record.response_cache]
    if not used:
        return None
    return {"hits": sum(int(u.get("hits") or 0) for u in used), "misses": sum(int(u.get("misses") or 0) for u in used)}


def merge_judge_replies(records: Iterable[EpisodeRecord]) -> dict[str, dict[str, Any]]:
    """The `judge_replies` of several records (a cascade's attempts, a harness's episodes) added up
    (`add_judge_replies`)."""
    return add_judge_replies(record.judge_replies for record in records)


def add_judge_replies(replies: Iterable[Mapping[str, Mapping[str, Any]] | None]) -> dict[str, dict[str, Any]]:
    """Several `judge_replies` added up: per role,
    its calls, the unusable ones among them and the calls per mode; and, where a failure-injection instrument graded
    the replies against its truth, how many it graded and how many were right (`graded`, `right`)."""
    total: dict[str, dict[str, Any]] = {}
    for by_role in replies:
        for role, counts in (by_role or {}).items():
            entry = total.setdefault(role, {"calls": 0, "unusable": 0, "modes": Counter(), "graded": 0, "right": 0})
            entry["calls"] += int(counts.get("calls") or 0)
            entry["unusable"] += int(counts.get("unusable") or 0)
            entry["modes"].update({str(mode): int(n) for mode, n in (counts.get("modes") or {}).items()})
            entry["graded"] += int(counts.get("graded") or 0)
            entry["right"] += int(counts.get("right") or 0)
    return {role: {"calls": entry["calls"], "unusable": entry["unusable"],
                   "modes": dict(sorted(entry["modes"].items())),
                   **({"graded": entry["graded"], "right": entry["right"]} if entry["graded"] else {})}
            for role, entry in sorted(total.items())}


def error_cause(record: EpisodeRecord, width: int = 160) -> str | None:
    """The one-line cause of an episode that ended in an error (its error's first line, cut to `width` characters),
    or None for an episode that did not."""
    if record.status != "error":
        return None
    lines = str(record.error or "").strip().splitlines()
    line = lines[0].strip() if lines else "no cause recorded"
    return line if len(line) <= width else line[:width - 1] + "…"


def complete_record(run_path: Path, record: EpisodeRecord) -> EpisodeRecord:
    """The record with the counts older records lack (`TRACE_COUNTED`), counted from its trace(s); unchanged when it
    has them."""
    if not any(record.lacks(name) for name in TRACE_COUNTED):
        return record
    traces = [a.trace for a in record.attempts or []] or [record.trace]
    tallies = []
    for trace in traces:
        if isinstance(trace, str) and (Path(run_path) / trace).is_file():
            try:
                tallies.append(tally_trace(read_events(Path(run_path) / trace)))
            except TraceError:
                continue
    return record.model_copy(update={"failures": add_failures(t.failures for t in tallies),
                                     "lessons_retrieved": sum(t.lessons_retrieved for t in tallies),
                                     "lessons_helped": sum(t.lessons_helped for t in tallies)})


def asked_a_model(proposal: ProposalEvent) -> bool:
    """Whether the agent's proposal came from a model (it has a prompt, or spent tokens); a scripted agent's has
    neither. A reply the response cache held counts too."""
    return bool(proposal.prompt or proposal.prompt_tokens or proposal.completion_tokens)


class EpisodeTally:
    """Counts what one episode's events show (fed event by event, as they are written).

    Besides the totals it keeps, for the report and the viewer: `failures`, by
    `failure_type/label` (the type alone for a detection without labels), how many were
    detected and how many of their repairs a verifier judged resolved or unresolved (a
    verdict counts for the labels detected with its failure type at its repair step);
    `lessons_retrieved`, the lesson ids interventions showed the agent (an intervention
    lists them in its decision's `details["lessons"]`); and `lessons_helped`, verdicts of
    "resolved" on repairs that showed lessons; and `judge_replies`, per role of the plugins' model
    calls (`judge_call` events), the calls, the unusable replies among them and the calls per
    mode (in the record only when the episode made judge calls); and, with them, `judgments`: what the judges
    decided, per source, to tell judgments that say something from empty ones (`playground.run.judge_quality`).
    """

    OPTIONAL_COUNTERS = ("schema_invalid_steps",)  # in the record only where the env gives what they count

    def __init__(self) -> None:
        self.invalid_actions = 0
        self.detected_failures = 0
        self.interventions: Counter[str] = Counter()
        self.verified_recoveries = 0
        self.unresolved_recoveries = 0
        self.lessons_added = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.judge_prompt_tokens = 0  # spent by the plugins' model roles (judges, reflectors, ...), not the agent
        self.judge_completion_tokens = 0
        self.judge_replies: dict[str, dict[str, Any]] = {}  # per role: calls, unusable replies, calls per mode
        self.judgments = JudgmentTally()  # what the judgments said, per source (kept where judges were called)
        self.agent_calls = 0  # the agent's proposals that came from a model (`asked_a_model`)
        self.schema_checked = False  # the env checks actions against a schema (proposals carry `schema_problems`)
        self.schema_invalid_steps = 0  # actions sent to the env although its schema check found problems
        self._proposed: tuple[str, bool] | None = None  # the last proposal's action, and whether it broke the schema
        self.failures: dict[str, Counter[str]] = {}
        self.lessons_retrieved = 0
        self.lessons_helped = 0
        self._detected_at: dict[tuple[int, str], set[str]] = {}  # (step, failure type) -> failure keys detected
        self._lessons_at: set[int] = set()  # steps whose intervention showed lessons

    def add(self, event: Event) -> None:
        """Count one event."""
        self.judgments.add(event)
        if isinstance(event, StepEvent):
            self.invalid_actions += not event.valid_action
            self.schema_invalid_steps += self._proposed == (event.action, True)
        elif isinstance(event, DetectionEvent):
            self.detected_failures += 1
            failure_type = event.failure_type or "?"
            keys = [f"{failure_type}/{label}" for label in event.labels] or [failure_type]
            for key in keys:
                self.failures.setdefault(key, Counter())["detected"] += 1
            self._detected_at.setdefault((event.step, failure_type), set()).update(keys)
        elif isinstance(event, InterventionEvent):
            self.interventions[event.kind or "?"] += 1
            lessons = event.details.get("lessons")
            if isinstance(lessons, (list, tuple)) and lessons:
                self.lessons_retrieved += len(lessons)
                self._lessons_at.add(event.step)
        elif isinstance(event, VerificationEvent):
            resolved = event.verdict == "resolved"
            if resolved:
                self.verified_recoveries += 1
            else:
                self.unresolved_recoveries += 1
            step, failure_type = event.repair_step, event.failure_type or "?"
            for key in self._detected_at.get((step, failure_type), {failure_type}):
                self.failures.setdefault(key, Counter())["resolved" if resolved else "unresolved"] += 1
            self.lessons_helped += resolved and step in self._lessons_at
        elif isinstance(event, LessonEvent):
            self.lessons_added += 1
        elif isinstance(event, JudgeCallEvent):
            self.judge_prompt_tokens += event.prompt_tokens
            self.judge_completion_tokens += event.completion_tokens
            entry = self.judge_replies.setdefault(event.role or "unknown",
                                                  {"calls": 0, "unusable": 0, "modes": Counter()})
            entry["calls"] += 1
            entry["unusable"] += event.usable is False
            entry["modes"][event.mode or "unknown"] += 1
            if event.graded:  # a failure-injection instrument graded the reply against its truth
                entry["graded"] = entry.get("graded", 0) + 1
                entry["right"] = entry.get("right", 0) + bool(event.graded.get("correct"))
        elif isinstance(event, ProposalEvent):
            self.prompt_tokens += event.prompt_tokens
            self.completion_tokens += event.completion_tokens
            self.agent_calls += asked_a_model(event)
            checked = event.schema_problems is not None
            self.schema_checked |= checked
            self._proposed = (event.action, bool(event.schema_problems)) if checked else None

    def as_record(self) -> dict[str, Any]:
        """Return the counts as a JSON-ready dict."""
        return {
            "invalid_actions": self.invalid_actions,
            "detected_failures": self.detected_failures,
            "interventions": dict(self.interventions),
            "verified_recoveries": self.verified_recoveries,
            "unresolved_recoveries": self.unresolved_recoveries,
            "lessons_added": self.lessons_added,
            "lessons_retrieved": self.lessons_retrieved,
            "lessons_helped": self.lessons_helped,
            "failures": {key: dict(counts) for key, counts in sorted(self.failures.items())},
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "judge_prompt_tokens": self.judge_prompt_tokens,
            "judge_completion_tokens": self.judge_completion_tokens,
            **({"judge_replies": add_judge_replies([self.judge_replies])}
               if self.judge_replies else {}),
            **({"judgments": judgments} if self.judge_replies and (judgments := self.judgments.as_record()) else {}),
            **({"schema_invalid_steps": self.schema_invalid_steps} if self.schema_checked else {}),
            **({"agent_calls": self.agent_calls} if self.agent_calls else {}),
        }


def summarise_harness(records: list[EpisodeRecord]) -> dict[str, Any]:
    """Return the summary.json entry for one harness from its episode records."""
    n = len(records)
    interventions: Counter[str] = Counter()
    for record in records:
        interventions.update(record.interventions)
    total = lambda name: sum(int(getattr(record, name) or 0) for record in records)  # noqa: E731
    wins = sum(1 for record in records if record.won)
    return {
        "episodes": n,
        "success_rate": wins / n if n else 0.0,
        "mean_steps": total("steps") / n if n else 0.0,
        "invalid_actions_per_episode": total("invalid_actions") / n if n else 0.0,
        "schema_invalid_per_episode": _mean_of(records, "schema_invalid_steps"),
        "detected_failures": total("detected_failures"),
        "interventions": dict(sorted(interventions.items())),
        "verified_recoveries": total("verified_recoveries"),
        "lessons_added": total("lessons_added"),
        "lessons_retrieved": total("lessons_retrieved"),
        "lessons_helped": total("lessons_helped"),
        "failures": merge_failures(records),
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
        "judge_prompt_tokens": total("judge_prompt_tokens"),
        "judge_completion_tokens": total("judge_completion_tokens"),
        "tokens_per_episode": _per_episode(records, "prompt_tokens", "completion_tokens"),
        "judge_tokens_per_episode": _per_episode(records, "judge_prompt_tokens", "judge_completion_tokens"),
        **({"judge_replies": merge_judge_replies(records)}
           if any(record.judge_replies is not None for record in records) else {}),
        **({"judgments": summarise_judgments(records)} if any(record.judgments for record in records) else {}),
        **({"response_cache": cache} if (cache := merge_cache_use(records)) else {}),
        "success_ci95": wilson_interval(wins, n),
        "resolved_share": _share(total("verified_recoveries"),
                                 total("verified_recoveries") + total("unresolved_recoveries")),
        "seconds_per_step": _share(sum(record.seconds for record in records), total("steps")),
        "mean_score": _mean_score(records),
        "scored_episodes": sum(1 for record in records if scored(record)),
        "errors": sum(1 for record in records if record.status == "error"),
        "statuses": dict(sorted(Counter(record.status for record in records).items())),
        **_cascade_fields(records),
        **trial_fields(records),
    }


def _cascade_fields(records: list[EpisodeRecord]) -> dict[str, Any]:
    """For cascade harnesses: the verifier used, mean summed cost and attempts per task."""
    cascades = [record for record in records if record.attempts is not None]
    if not cascades:
        return {}
    return {"verifier": cascades[0].verifier,
            "mean_cost": sum(record.cost or 0.0 for record in cascades) / len(cascades),
            "mean_attempts": sum(len(record.attempts or ()) for record in cascades) / len(cascades)}


def wilson_interval(successes: int, n: int, z: float = 1.96) -> list[float]:
    """Return the 95% Wilson score interval [low, high] for a success rate (the whole range when n == 0)."""
    if n == 0:
        return [0.0, 1.0]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _per_episode(records: list[EpisodeRecord], *names: str) -> float | None:
    """The sum of fields `names` per episode; None when the episodes spent none (no model, or one that counts no
    tokens)."""
    spent = sum(int(getattr(record, name) or 0) for record in records for name in names)
    return spent / len(records) if spent else None


def _mean_of(records: list[EpisodeRecord], name: str) -> float | None:
    """Mean of field `name` over the records that have it (None when none does)."""
    values = [float(value) for record in records if (value := getattr(record, name)) is not None]
    return sum(values) / len(values) if values else None


def scored(record: EpisodeRecord) -> bool:
    """Whether the env scored the episode: it reports a score and a (non-zero) max score."""
    return record.score is not None and bool(record.max_score)


def score_ratios(records: list[EpisodeRecord]) -> list[float] | None:
    """Each episode's score / max score, an episode the env did not score (it ended before the env evaluated it,
    or errored) counted as 0, as it is not won; None when no episode was scored (the env reports no score)."""
    if not any(scored(r) for r in records):
        return None
    return [(record.score or 0.0) / (record.max_score or 1.0) if scored(record) else 0.0 for record in records]


def _mean_score(records: list[EpisodeRecord]) -> float | None:
    """Mean of `score_ratios` over all episodes (None when the env scored none)."""
    ratios = score_ratios(records)
    return sum(ratios) / len(ratios) if ratios else None


def summarise_run(env: str, agent: str, harnesses: list[str], records: Iterable[EpisodeRecord]) -> dict[str, Any]:
    """Return the summary.json contract: env, agent, task count and one entry per harness."""
    by_harness: dict[str, list[EpisodeRecord]] = {h: [] for h in harnesses}
    tasks: set[str] = set()  # distinct tasks: a task played in several trials counts once
    for record in records:
        by_harness.setdefault(record.harness, []).append(record)
        tasks.add(record.task_id)
    cache = merge_cache_use(r for rs in by_harness.values() for r in rs)
    return {
        "env": env,
        "agent": agent,
        "tasks": len(tasks),
        "harnesses": {h: summarise_harness(rs) for h, rs in by_harness.items()},
        **({"response_cache": cache} if cache else {}),
    }


TABLE_COLUMNS = [
    ("harness", None),
    ("episodes", "episodes"),
    ("success", "success_rate"),
    ("95% CI", "success_ci95"),
    ("score", "mean_score"),
    ("scored", "scored_episodes"),
    ("steps", "mean_steps"),
    ("tokens/ep", "tokens_per_episode"),
    ("judge/ep", "judge_tokens_per_episode"),
    ("invalid/ep", "invalid_actions_per_episode"),
    ("schema/ep", "schema_invalid_per_episode"),
    ("detected", "detected_failures"),
    ("interventions", "interventions"),
    ("verified", "verified_recoveries"),
    ("resolved", "resolved_share"),
    ("lessons", "lessons_added"),
    ("errors", "errors"),
    ("pass^k", "pass_k"),
    ("flip", "flip_rate"),
    ("noise", "noise_floor"),
]
# Columns shown only when some harness has a value (the env reports a score; it checks actions against a
# schema; a verifier judged a recovery; tasks were played in several trials; a model spent tokens).
OPTIONAL_COLUMNS = {"mean_score", "resolved_share", "schema_invalid_per_episode", "pass_k", "flip_rate", "noise_floor",
                    "tokens_per_episode", "judge_tokens_per_episode"}
TOKEN_COLUMNS = {"tokens_per_episode", "judge_tokens_per_episode"}
PERCENT_COLUMNS = {"success_rate", "mean_score", "resolved_share", "flip_rate", "noise_floor"}
LEGEND = {
    "success": "share of episodes won",
    "95% CI": "Wilson interval of the success rate",
    "score": "mean score / max score over all episodes; one the env did not score (not evaluated, errored) counts 0",
    "scored": "episodes the env scored, of all (shown when some were not)",
    "steps": "mean env steps per episode",
    "tokens/ep": "the agent's prompt + completion tokens per episode",
    "judge/ep": "prompt + completion tokens per episode of the interventions' model roles (judges, reflectors, ...)",
    "invalid/ep": "actions the env rejected, per episode",
    "schema/ep": "actions sent although the env's schema check found problems, per episode",
    "detected": "failures detected",
    "interventions": "interventions made (re-asks, replaced actions, stops, rollbacks)",
    "verified": "repairs a verifier judged resolved",
    "resolved": "verified / (verified + unresolved) repairs",
    "lessons": "lessons added to the playbook",
    "errors": "episodes ended by an error",
    "pass^k": "chance that all k trials of a task succeed (k = the number of trials; --trials)",
    "flip": "mean flip rate: share of a task's pairs of trials with different outcomes",
    "noise": "noise floor: success difference two identical configurations show (95%, from half-split trials)",
}


JUDGES_LEGEND = ("a count whose judgments look empty: constant, echoing the schema or prompt, or one word "
                 "(the judges: lines say which and how many)")


def format_table(summary: dict[str, Any], legend: bool = True) -> str:
    """Return a plain-text table with one row per harness, then a `judges:` line per source of judgments that look
    empty (its counts marked "?"; `playground.run.judge_quality`), then (with `legend`) what each column means."""
    harnesses = summary["harnesses"]
    columns = [(title, key) for title, key in TABLE_COLUMNS if _shown(key, harnesses.values())]
    rows = [[title for title, _ in columns]]
    for name, h in harnesses.items():
        row, doubtful = [], flagged_columns(h)
        for _title, key in columns:
            value = name if key is None else h.get(key)
            if value is None:
                value = "-"
            elif key == "pass_k":
                k, last = max(value.items(), key=lambda item: int(item[0]))
                value = f"{last:.0%} (k={k})"
            elif key == "scored_episodes":
                value = f"{value}/{h.get('episodes', 0)}"
            elif key in TOKEN_COLUMNS:
                value = f"{value:,.0f}"
            elif key in PERCENT_COLUMNS:
                value = f"{value:.0%}"
            elif isinstance(value, float):
                value = f"{value:.2f}"
            elif isinstance(value, dict):
                value = sum(value.values())
            elif isinstance(value, list):
                value = f"{value[0]:.0%}-{value[1]:.0%}"
            row.append(f"{value}?" if key in doubtful else str(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    judges = flag_lines(harnesses)
    lines += judges
    if legend:
        shown = [title for title, _ in columns if title in LEGEND]
        width = max(len(title) for title in shown)
        lines += [""] + [f"{title.rjust(width)}: {LEGEND[title]}" for title in shown]
        if judges:
            lines.append(f"{'?'.rjust(width)}: {JUDGES_LEGEND}")
    return "\n".join(lines)


def _shown(key: str | None, harnesses: Iterable[dict]) -> bool:
    """Whether the table shows the column of `key`: an optional one when some harness has a value; the scored
    count when some harness with a score has episodes the env did not score."""
    if key == "scored_episodes":
        return any(h.get("mean_score") is not None and h.get(key, h.get("episodes")) != h.get("episodes")
                   for h in harnesses)
    return key not in OPTIONAL_COLUMNS or any(h.get(key) is not None for h in harnesses)
