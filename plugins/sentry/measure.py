"""Detectors scored against injected failures: the matching rule, precision/recall/F1, Cohen's kappa, the tables.

Pure functions over small records; reading them from an episode's trace events is `injected.py`'s job.

The matching rule, with a window of `window` steps (default 3):

- An **injection** is one failure streak of a failure-injection agent (`Proposal.injected`):
  the steps of one streak id with one label, from its first step `s` to its last step `e`.
- A **detection** of label L at step t is a true positive when an injection of a label that
  *matches* L was made at some step u with t - window <= u <= t (at the step itself, or
  shortly before: a loop is detectable only after it repeats).
- An injection is **detected** when some detection of a matching label falls at a step t
  with s <= t <= e + window.
- Labels match under `match="label"` when they are equal, and under `match="mode"` (the
  default) also when the label registry maps both to the same failure mode (e.g.
  `planning_stall` and `repetition_or_looping`, both `progress`).

precision = true-positive detections / detections; recall = detected injections / injections;
F1 their harmonic mean (0 for a label injected but never detected). Undefined values (precision
without detections, recall and F1 without injections) are None and left out of the macro averages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

DEFAULT_WINDOW = 3
MATCHES = ("mode", "label")


@dataclass(frozen=True)
class Injection:
    """One injected failure streak: its episode, label, streak id and first and last step."""

    episode: str
    label: str
    streak: int
    first: int
    last: int


@dataclass(frozen=True)
class Hit:
    """One label a detector reported at a step of an episode."""

    episode: str
    step: int
    label: str
    detector: str


@dataclass
class LabelScore:
    """The counts of one (detector, label) row and the figures derived from them."""

    injections: int = 0
    detected: int = 0
    detections: int = 0
    true_positives: int = 0

    @property
    def precision(self) -> float | None:
        """True-positive detections / detections (None without detections)."""
        return self.true_positives / self.detections if self.detections else None

    @property
    def recall(self) -> float | None:
        """Detected injections / injections (None without injections)."""
        return self.detected / self.injections if self.injections else None

    @property
    def f1(self) -> float | None:
        """The harmonic mean of precision and recall: None without injections, 0 when nothing was detected."""
        p, r = self.precision, self.recall
        if r is None:
            return None
        if p is None or p + r == 0:  # no detections (so recall 0), or both 0
            return 0.0
        return 2 * p * r / (p + r)


def streaks(records: Iterable[tuple[str, int, str, int]]) -> list[Injection]:
    """Injections from per-step records (episode, step, label, streak id): one per (episode, streak, label)."""
    spans: dict[tuple[str, int, str], list[int]] = {}
    for episode, step, label, streak in records:
        spans.setdefault((episode, streak, label), []).append(step)
    return [Injection(episode, label, streak, min(steps), max(steps))
            for (episode, streak, label), steps in sorted(spans.items())]


@dataclass(frozen=True)
class Matcher:
    """Whether a detected label matches an injected one (`match` "label" or "mode"; see module docstring)."""

    mode_of: Callable[[str], str]
    match: str = "mode"

    def __post_init__(self) -> None:
        if self.match not in MATCHES:
            raise ValueError(f"match must be one of {', '.join(MATCHES)}, got {self.match!r}")

    def __call__(self, detected: str, injected: str) -> bool:
        return detected == injected or (self.match == "mode" and self.mode_of(detected) == self.mode_of(injected))


def score(injections: list[Injection], hits: list[Hit], window: int, matches: Matcher) -> dict[str, LabelScore]:
    """{label: LabelScore} of one detector: its detections by label, and the injections by label.

    A label the detector never reported and no injection has gets no row.
    """
    if window < 0:
        raise ValueError(f"window must be 0 or more steps, got {window}")
    rows: dict[str, LabelScore] = {}
    by_episode: dict[str, list[Injection]] = {}
    for injection in injections:
        by_episode.setdefault(injection.episode, []).append(injection)
        row = rows.setdefault(injection.label, LabelScore())
        row.injections += 1
        if any(h.episode == injection.episode and matches(h.label, injection.label)
               and injection.first <= h.step <= injection.last + window for h in hits):
            row.detected += 1
    for hit in hits:
        row = rows.setdefault(hit.label, LabelScore())
        row.detections += 1
        if any(matches(hit.label, i.label) and i.first <= hit.step and hit.step - window <= i.last
               for i in by_episode.get(hit.episode, ())):
            row.true_positives += 1
    return dict(sorted(rows.items()))


def macro(rows: dict[str, LabelScore]) -> dict[str, float | None]:
    """The mean precision, recall and F1 over the rows where each is defined."""
    def mean(values: list[float | None]) -> float | None:
        defined = [v for v in values if v is not None]
        return sum(defined) / len(defined) if defined else None

    return {"precision": mean([r.precision for r in rows.values()]), "recall": mean([r.recall for r in rows.values()]),
            "f1": mean([r.f1 for r in rows.values()])}


def cohen_kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two raters' yes/no calls; None when it is undefined (no pairs, or chance agreement 1)."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    yes_a, yes_b = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    chance = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)
