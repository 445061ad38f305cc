"""Comparing a cascade with a single attempt fairly: attempts, their cost, and pass@L for both.

A cascade harness plays a task up to L times (one intervention, or one chain step, per
attempt) and stops at the first attempt its verifier accepts, so its success is a pass@L,
not a pass@1. Set beside a bare agent's pass@1 it looks better by construction. This
module states what each side spent and what the bare agent reaches with the same budget:

- the cascade: L (its attempt budget), pass@L (its success), the attempts it used and their
  cost per task, and the verifier that decided the retries (`env:won` is the benchmark's
  own grade: a deployment would not have it);
- the other side: pass@1 (its first trial), and pass@L when it was played with at least L
  trials per task (`playground run --trials L`; `trials.pass_at_k`), else why not.

Only records are read; nothing is played.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from playground.core.records import EpisodeRecord
from playground.host.registry import GRADE_VERIFIER
from playground.run.trials import outcomes_by_task, pass_at_k


@dataclass(frozen=True)
class CascadeSide:
    """What a cascade harness spent and reached."""

    label: str
    tasks: int
    budget: int                # L: the most attempts a task may get
    pass_at_budget: float      # its success rate: won within L attempts
    attempts_per_task: float
    cost_per_task: float
    steps_per_task: float
    verifier: str


@dataclass(frozen=True)
class SingleSide:
    """A single-attempt harness: pass@1, and pass@L when its trials allow."""

    label: str
    tasks: int
    pass_at_1: float
    pass_at_budget: float | None
    trials: int                # the fewest trials any task has
    steps_per_task: float
    why_no_pass_at_budget: str = ""


def is_cascade(records: Sequence[EpisodeRecord]) -> bool:
    """True when the records come from a cascade harness (each keeps its attempts)."""
    return bool(records) and all(record.attempts is not None for record in records)


def cascade_side(label: str, records: Sequence[EpisodeRecord]) -> CascadeSide:
    """The cascade's budget, success and spend (first trial of each task)."""
    first = [record for record in records if record.trial == 1]
    budget = max(record.cascade_length or len(record.attempts or ()) for record in first)
    verifiers = sorted({record.verifier or GRADE_VERIFIER for record in first})
    n = len(first)
    return CascadeSide(label, n, budget, sum(record.won for record in first) / n,
                       sum(len(record.attempts or ()) for record in first) / n,
                       sum(record.cost or 0.0 for record in first) / n,
                       sum(record.steps for record in first) / n, ", ".join(verifiers))


def single_side(label: str, records: Sequence[EpisodeRecord], budget: int) -> SingleSide:
    """pass@1 and, given enough trials, pass@`budget` of a single-attempt harness."""
    outcomes = outcomes_by_task(records)
    first = [record for record in records if record.trial == 1]
    n = len(first)
    trials = min((len(o) for o in outcomes.values()), default=0)
    at_budget = pass_at_k(outcomes, budget) if trials >= budget else None
    why = "" if at_budget is not None else (
        f"it has {trials} trial(s) per task; play it with --trials {budget} to give it the cascade's budget")
    return SingleSide(label, n, sum(record.won for record in first) / n, at_budget, trials,
                      sum(record.steps for record in first) / n, why)


def deployment(label_a: str, records_a: Sequence[EpisodeRecord], label_b: str,
               records_b: Sequence[EpisodeRecord]) -> dict | None:
    """The attempt-budget view when exactly one side is a cascade (else None)."""
    cascades = [(label, records) for label, records in ((label_a, records_a), (label_b, records_b))
                if is_cascade(records)]
    if len(cascades) != 1:
        return None
    cascade = cascade_side(*cascades[0])
    label, records = next((lb, rs) for lb, rs in ((label_a, records_a), (label_b, records_b))
                          if lb != cascade.label)
    single = single_side(label, records, cascade.budget)
    return {"cascade": asdict(cascade), "single": asdict(single),
            "grade_verifier": cascade.verifier == GRADE_VERIFIER}


def format_deployment(view: dict) -> str:
    """The attempt-budget view as printed by `playground compare`."""
    c, s = view["cascade"], view["single"]
    budget = c["budget"]
    at_budget = (f"{s['pass_at_budget']:.3f}" if s["pass_at_budget"] is not None
                 else f"not measured ({s['why_no_pass_at_budget']})")
    lines = [f"attempt budget: {c['label']} is a cascade of up to L = {budget} attempts per task",
             f"  {c['label']}: pass@{budget} {c['pass_at_budget']:.3f} "
             f"({c['attempts_per_task']:.2f} attempts, cost {c['cost_per_task']:.1f}, "
             f"{c['steps_per_task']:.1f} steps per task; verifier {c['verifier']})",
             f"  {s['label']}: pass@1 {s['pass_at_1']:.3f} ({s['steps_per_task']:.1f} steps per task); "
             f"pass@{budget} {at_budget}"]
    if view["grade_verifier"]:
        lines.append(f"  the cascade retried on the benchmark's own grade ({GRADE_VERIFIER}), which a deployed "
                     "agent does not have: compare its pass@L with the other side's pass@L, not its pass@1")
    return "\n".join(lines)
