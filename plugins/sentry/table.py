"""Sentry's harness table for one run: each harness against a reference harness on the same tasks.

Per harness: success with its 95% Wilson interval, the paired exact McNemar test against the
reference (b: tasks only the reference won, c: tasks only this harness won), the share of
verified repairs judged resolved, soft repairs and detections the need check declined per
episode, agent and judge tokens per episode, and the usable judge replies per role.

"Declined" counts the steps where Sentry's own progress or grounding detectors fired on the
first proposal and no intervention followed: what the intervention-need check (threshold
or LLM judgment, with the cooldown) and the per-episode repair cap let pass. Everything is
read from the run's records and traces; nothing is played.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from playground.core.events import DetectionEvent, Event, InterventionEvent
from playground.host_api import (
    EpisodeRecord,
    load_records,
    mcnemar_exact,
    merge_judge_replies,
    read_events,
    record_trace,
    wilson_interval,
)
from playground.plugins.sentry.harness import OWN_DETECTORS


@dataclass
class HarnessRow:
    """One harness's figures in the table (see module docstring)."""

    harness: str
    episodes: int
    won: int
    ci95: list[float]
    b: int = 0  # tasks the reference won and this harness lost
    c: int = 0  # tasks this harness won and the reference lost
    p: float = 1.0
    resolved: int = 0
    verdicts: int = 0
    soft_repairs: int = 0
    declined: int = 0
    agent_tokens: int = 0
    judge_tokens: int = 0
    judge_replies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def success(self) -> float:
        """Share of episodes won."""
        return self.won / self.episodes if self.episodes else 0.0


def declined_detections(events: list[Event]) -> int:
    """Steps where Sentry's progress or grounding detectors fired on the first proposal and no intervention followed."""
    detected = {e.step for e in events
                if isinstance(e, DetectionEvent) and e.attempt == 0 and e.detector in OWN_DETECTORS
                and e.failure_type != "action_validity"}
    intervened = {e.step for e in events if isinstance(e, InterventionEvent) and e.attempt == 0}
    return len(detected - intervened)


def harness_table(run_dir: str | Path, reference: str = "sentry") -> list[HarnessRow]:
    """The rows of every harness of the run (the reference first), paired with `reference` on shared tasks.

    Errored episodes are left out of every figure (and of the pairing)."""
    records = [r for r in load_records(run_dir) if r.status != "error"]
    by_harness: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_harness.setdefault(record.harness, []).append(record)
    if reference not in by_harness:
        raise ValueError(f"{run_dir}: the reference harness {reference!r} has no finished episode; the run has: "
                         f"{', '.join(sorted(by_harness)) or '(none)'}")
    reference_won = {(r.task_id, r.trial): r.won for r in by_harness[reference]}
    rows = []
    for harness in [reference, *sorted(set(by_harness) - {reference})]:
        mine = by_harness[harness]
        won = sum(r.won for r in mine)
        row = HarnessRow(harness, len(mine), won, wilson_interval(won, len(mine)))
        for record in mine:
            key = (record.task_id, record.trial)
            if key in reference_won and harness != reference:
                row.b += reference_won[key] and not record.won
                row.c += record.won and not reference_won[key]
            row.resolved += record.verified_recoveries
            row.verdicts += record.verified_recoveries + record.unresolved_recoveries
            row.soft_repairs += record.interventions.get("soft_repair", 0)
            row.agent_tokens += record.prompt_tokens + record.completion_tokens
            row.judge_tokens += record.judge_prompt_tokens + record.judge_completion_tokens
            row.declined += declined_detections(read_events(record_trace(run_dir, record)))
        row.p = mcnemar_exact(row.b, row.c)
        row.judge_replies = merge_judge_replies(mine)
        rows.append(row)
    return rows


def format_table(rows: list[HarnessRow], reference: str) -> str:
    """The table as aligned text, one harness a line, then each harness's usable judge replies by role."""
    head = ("harness", "n", "success [95% CI]", f"vs {reference} b/c p", "resolved", "soft/ep", "declined/ep",
            "agent tok/ep", "judge tok/ep")
    lines = []
    for row in rows:
        n = row.episodes or 1
        lines.append((row.harness, str(row.episodes),
                      f"{row.success:.2f} [{row.ci95[0]:.2f}, {row.ci95[1]:.2f}]",
                      "-" if row.harness == reference else f"{row.b}/{row.c} p={row.p:.3g}",
                      f"{row.resolved}/{row.verdicts}" if row.verdicts else "-",
                      f"{row.soft_repairs / n:.2f}", f"{row.declined / n:.2f}",
                      f"{row.agent_tokens / n:,.0f}", f"{row.judge_tokens / n:,.0f}"))
    widths = [max(len(cells[i]) for cells in [head, *lines]) for i in range(len(head))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip() for cells in [head, *lines]]
    replies = [(row.harness, role, counts) for row in rows for role, counts in sorted(row.judge_replies.items())]
    if replies:
        text.append("")
        text.append("usable judge replies (harness, role: usable/calls)")
        for harness, role, counts in replies:
            usable = counts["calls"] - counts["unusable"]
            share = usable / counts["calls"] if counts["calls"] else 0.0
            text.append(f"  {harness}  {role}: {usable}/{counts['calls']} ({share:.0%})")
    return "\n".join(text)


def table_json(rows: list[HarnessRow]) -> list[dict]:
    """The rows as JSON-ready dicts, with each row's success share."""
    return [{**asdict(row), "success": row.success} for row in rows]

