"""Scoring exactly as the XBRL Finance benchmark defines it (no format leniency added).

- Formula (ACE's `_formula_answer_is_correct`): commas are removed from both strings, so
  thousands separators do not matter ("27,432.79" matches 27432.79); then
  `float(answer) == float(target)`. When either side is not a number `float()` parses,
  the two comma-stripped strings must be equal. (Python's `float()` itself ignores
  surrounding whitespace and accepts "5", "5.0", "5.00", "5e0".)
- FiNER: the answer and the gold are split on commas, each part stripped and lowercased,
  and compared position by position. A missing position counts wrong; positions beyond
  the gold's count are ignored (the benchmark truncates them), so the denominator is
  always the number of gold tags. Entity-level accuracy = correct positions / gold tags;
  record-level accuracy = every position right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def parse_number(text: str) -> float | None:
    """Return `float(text)`, or None when Python's `float()` rejects it."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def formula_correct(answer: str, target: str) -> bool:
    """ACE's Formula check: commas removed, then float equality, else string equality."""
    answer, target = str(answer).replace(",", ""), str(target).replace(",", "")
    value, gold = parse_number(answer), parse_number(target)
    if value is None or gold is None:
        return answer == target
    return value == gold


def split_tags(text: str) -> list[str]:
    """Split a FiNER answer or gold on commas; strip and lowercase each part."""
    return [part.strip().lower() for part in str(text).split(",")]


def finer_positions(answer: str, target: str) -> list[bool]:
    """Return, for each gold position, whether the answer has the same tag there."""
    predicted, gold = split_tags(answer), split_tags(target)
    predicted += [""] * (len(gold) - len(predicted))
    return [p == g for p, g in zip(predicted, gold)]


@dataclass(frozen=True)
class Score:
    """One answer's score: `score` out of `max_score`, and whether it is fully right."""

    score: float
    max_score: float

    @property
    def won(self) -> bool:
        """True when every point was earned."""
        return self.max_score > 0 and math.isclose(self.score, self.max_score)


def score_answer(family: str, answer: str, target: str) -> Score:
    """Score `answer` against `target` for a task family ("formula" or "finer")."""
    if family == "formula":
        return Score(1.0 if formula_correct(answer, target) else 0.0, 1.0)
    if family == "finer":
        positions = finer_positions(answer, target)
        return Score(float(sum(positions)), float(len(positions)))
    raise ValueError(f"finance: unknown task family {family!r} (expected 'formula' or 'finer')")
