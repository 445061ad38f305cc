"""Answer-format checks for Finance tasks, read from the question alone (never the gold answer).

`expected_format(context)` reads what a question asks for: one number (Formula), or N
comma-separated tags from a tag list given in the question (FiNER, and the generated
tagging tasks). `check_answer(fmt, answer)` lists what is wrong with an answer's *format*,
with quoted evidence, under the `format_precision` labels:

- `prose_around_answer`: words or decoration around the number or a tag ("The answer is 5.0");
- `extra_fields`: more than the answer: a second number, or values and numbering next to tags;
- `wrong_tag_count`: not as many comma-separated tags as items asked;
- `unknown_tag`: a tag that is not in the question's tag list (or an empty one);
- `unparseable_number`: no number the benchmark's check reads ("$5", "5%", "five", ""); that
  check removes commas before `float()`, so thousands separators ("1,000.50") are well-formed.

A well-formed answer can still be wrong; a malformed one is scored as the benchmark
scores it. These checks decide only whether re-asking for the format is worthwhile.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

FAILURE_TYPE = "format_precision"
LABELS = ("prose_around_answer", "extra_fields", "wrong_tag_count", "unknown_tag", "unparseable_number")

_TAG_RUN = re.compile(r"[A-Z][A-Za-z0-9]*(?:[ \t]*,[ \t]*[A-Z][A-Za-z0-9]*){4,}")
_COUNT = re.compile(r"\b(\d+)\s+(?:independent\s+questions|(?:US\s+GAAP\s+)?tags)\b", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_DECORATION = re.compile(r"[\s*_`\"'\[\]{}]*")  # markdown emphasis, quotes, brackets


def parse_ok(text: str) -> bool:
    """True when `float()` reads `text`, commas removed as the scorer removes them, as a finite number."""
    try:
        return math.isfinite(float(text.replace(",", "")))
    except ValueError:
        return False


@dataclass(frozen=True)
class AnswerFormat:
    """What a question asks for: one number, or `count` tags from `tags` (lowercased)."""

    kind: str  # "number" or "tags"
    count: int = 1
    tags: frozenset[str] = frozenset()

    def describe(self) -> str:
        """The exact expected format, in words an agent can follow."""
        if self.kind == "number":
            return ("one plain number and nothing else: digits with an optional leading minus sign and a decimal "
                    "point (e.g. 1234.57 or -0.25), rounded to 2 decimal places; no currency symbols, percent signs, "
                    "thousands separators, units, labels or words")
        example = ",".join(f"<tag {i}>" for i in range(1, self.count + 1))
        return (f"exactly {self.count} tags copied from the tag list, separated by commas, one per question in "
                f"question order ({example}); no numbering, values, explanations or other text")


@dataclass(frozen=True)
class FormatProblem:
    """One format failure: its label and the quoted evidence."""

    label: str
    evidence: str


@functools.lru_cache(maxsize=512)
def expected_format(context: str) -> AnswerFormat:
    """Read from the question whether it wants one number or N tags from a tag list."""
    runs = [m.group(0) for m in _TAG_RUN.finditer(context)]
    if runs:
        tags = frozenset(t.strip().lower() for t in max(runs, key=len).split(","))
        stated = _COUNT.search(context)
        count = int(stated.group(1)) if stated else len(_NUMBERED.findall(context))
        if count > 0:
            return AnswerFormat("tags", count, tags)
    return AnswerFormat("number")


def check(context: str, answer: str) -> list[FormatProblem]:
    """Return the format problems of `answer` to the question `context` (empty: well-formed)."""
    return check_answer(expected_format(context), answer)


def check_answer(fmt: AnswerFormat, answer: str) -> list[FormatProblem]:
    """Return the format problems of `answer` for the expected format `fmt` (empty: well-formed)."""
    problems = _check_number(answer) if fmt.kind == "number" else _check_tags(fmt, answer)
    first: dict[str, FormatProblem] = {}
    for problem in problems:
        first.setdefault(problem.label, problem)
    return [first[label] for label in LABELS if label in first]


def quote(text: str, limit: int = 120) -> str:
    """Return `text` quoted for evidence, shortened to about `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_number(answer: str) -> list[FormatProblem]:
    text = answer.strip()
    if not text:
        return [FormatProblem("unparseable_number", "empty answer")]
    try:
        value = float(text.replace(",", ""))  # the scorer removes commas too
    except ValueError:
        value = None
    if value is not None:
        return ([] if math.isfinite(value)
                else [FormatProblem("unparseable_number", f"not a finite number: {quote(text)}")])
    numbers, words = _NUMBER.findall(text), _WORD.findall(text)
    problems = []
    if len(numbers) > 1:
        problems.append(FormatProblem("extra_fields",
                                      f"{len(numbers)} numbers ({', '.join(numbers[:4])}) in {quote(text)}"))
    if numbers and words:
        problems.append(FormatProblem("prose_around_answer", f"words around the number: {quote(text)}"))
    if len(numbers) == 1 and not words:
        if _DECORATION.fullmatch(text.replace(numbers[0], "", 1)) and parse_ok(numbers[0]):
            problems.append(FormatProblem("prose_around_answer", f"decoration around the number: {quote(text)}"))
        else:
            problems.append(FormatProblem("unparseable_number", f"float() cannot read {quote(text)}"))
    if not numbers:
        problems.append(FormatProblem("unparseable_number", f"no number in {quote(text)}"))
    return problems


def _check_tags(fmt: AnswerFormat, answer: str) -> list[FormatProblem]:
    if not answer.strip():
        return [FormatProblem("wrong_tag_count", f"empty answer; expected {fmt.count} tags")]
    parts = answer.split(",")
    problems = []
    if len(parts) != fmt.count:
        problems.append(FormatProblem("wrong_tag_count", f"{len(parts)} comma-separated items, expected {fmt.count}: "
                                                         f"{quote(answer)}"))
    for position, raw in enumerate(parts, 1):
        problems += _check_tag(fmt, position, raw.strip())
    return problems


def _check_tag(fmt: AnswerFormat, position: int, part: str) -> list[FormatProblem]:
    if not part:
        return [FormatProblem("unknown_tag", f"item {position} is empty")]
    if _IDENT.fullmatch(part):
        if part.lower() in fmt.tags:
            return []
        return [FormatProblem("unknown_tag", f"item {position}: {quote(part)} is not in the tag list")]
    known = [word for word in _IDENT.findall(part) if word.lower() in fmt.tags]
    if not known:
        return [FormatProblem("prose_around_answer", f"item {position} is not a tag: {quote(part)}")]
    if len(known) > 1:
        return [FormatProblem("extra_fields", f"item {position} holds {len(known)} tags (separate tags with commas): "
                                              f"{quote(part)}")]
    rest = part.replace(known[0], " ")
    problems = []
    if re.search(r"\d", rest):
        problems.append(FormatProblem("extra_fields", f"item {position} carries more than the tag: {quote(part)}"))
    if _WORD.search(rest) or not problems:
        problems.append(FormatProblem("prose_around_answer", f"item {position} has text around the tag: {quote(part)}"))
    return problems
