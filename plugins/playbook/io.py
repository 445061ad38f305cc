"""Playbook files: checking lesson records, reading and writing JSONL, reading and writing ACE playbooks.

A lesson record is the plain-dict form of a lesson (what one JSONL line holds):

    {"failure_type": "progress", "labels": ["planning_stall"], "subtype": "",
     "trigger": "...", "principle": "...", "provenance": {"run": ..., "task": ...},
     "created_at": 1730000000.0, "retrieved": 0, "verified": 0, "helped": 0}

`failure_type`, `labels`, `trigger` and `principle` are required; the rest have defaults.
An exported line also carries the lesson's `id`, which an import ignores (lessons get new
ids in the receiving playbook). Counters are integers from 0 to 2**53 - 1 (the largest
every JSON reader keeps exact); `created_at` is seconds since the epoch, from 0 to a day
past now (a lesson from the future would rank newest for ever and never be pruned by
age), so a record outside either range is refused, not clamped.

Nothing read from a playbook file is ever executed or evaluated: JSONL lines go through
`json.loads` only, ACE lines through regular expressions.

ACE playbooks (https://github.com/ace-agent/ace) have no failure types, so every ACE bullet
becomes a lesson of the failure type "procedure", which the playbook plugin declares with
one label per canonical ACE section; see `read_ace` for the whole mapping. The text format
itself (which lines are headers and bullets, and writing a playbook back) is `ace_format`,
whose rules are docs/playbook-ace-format.md; its public names are also importable from here.
An ACE file imported into a playbook and exported again keeps its bullets (ids, sections with
their headers as written, counters, each bullet's text byte for byte), in file order, and its
header lines where they were (empty sections and a header that comes twice included). Like
ACE, reading skips the lines the rules do not read as a header or a bullet, with a warning
naming file and line; `strict=True` refuses the whole file instead.

Failure types and labels are checked against a `LabelRegistry`: the one given, else the
process-wide host's (`playground.host.manager.default_labels`).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from playground.core.errors import PlaygroundError
from playground.core.labels import FailureLabel, FailureType, LabelRegistry, UnknownFailure
from playground.host_api import atomic_write, default_labels
from playground.plugins.playbook.ace_format import ACE_FAILURE_TYPE as ACE_FAILURE_TYPE
from playground.plugins.playbook.ace_format import ACE_FALLBACK_SECTION as ACE_FALLBACK_SECTION
from playground.plugins.playbook.ace_format import ACE_SECTIONS as ACE_SECTIONS
from playground.plugins.playbook.ace_format import EMPTY_BULLET_TEXT, AceLine, ace_lines, parse_ace_line
from playground.plugins.playbook.ace_format import ace_bullet as ace_bullet
from playground.plugins.playbook.ace_format import ace_text as ace_text
from playground.plugins.playbook.ace_format import ace_trigger as ace_trigger
from playground.plugins.playbook.ace_format import write_ace as write_ace

MAX_TEXT_CHARS = 4_000  # trigger, principle
MAX_SUBTYPE_CHARS = 200
MAX_LABELS = 16
MAX_LABEL_CHARS = 100
MAX_PROVENANCE_CHARS = 4_000  # as JSON
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_LINE_BYTES = 128 * 1024
MAX_REPORTED_PROBLEMS = 20  # in an error message; `problems` keeps them all

REQUIRED_FIELDS = ("failure_type", "labels", "trigger", "principle")
OPTIONAL_FIELDS = ("id", "subtype", "provenance", "created_at", "retrieved", "verified", "helped")
COUNTERS = ("retrieved", "verified", "helped")
MAX_COUNTER = 2**53 - 1  # the largest integer every JSON reader keeps exact
MAX_CLOCK_SKEW_S = 86_400.0  # how far past this machine's clock a created_at may lie (another machine's clock)

# What the playbook plugin declares through `register_failure_labels`.
FAILURE_LABELS = (
    FailureType(ACE_FAILURE_TYPE, "procedure_breadth",
                "procedural knowledge without a diagnosed failure, e.g. imported ACE playbooks"),
    *(FailureLabel(label, ACE_FAILURE_TYPE) for label in ACE_SECTIONS.values()),
)



class PlaybookError(PlaygroundError):
    """A playbook file that cannot be used (corrupt, foreign, newer schema) or a failed write."""


class PlaybookImportError(PlaybookError):
    """A playbook file to import has bad lines; `problems` lists each as 'line N: why'."""

    def __init__(self, path: str | os.PathLike, problems: list[str]):
        self.path = str(path)
        self.problems = problems
        shown = problems[:MAX_REPORTED_PROBLEMS]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(f"{self.path}: nothing imported, {len(problems)} problem(s):\n  "
                         + "\n  ".join(shown) + more)

    def __reduce__(self):
        return type(self), (self.path, self.problems)


@dataclass(frozen=True)
class ImportReport:
    """What an import added: how many lessons, and the range of ids they got."""

    path: str
    imported: int
    first_id: int | None = None
    last_id: int | None = None
    skipped: tuple[str, ...] = ()  # "line N: why" for each line a tolerant import skipped
    already_held: int = 0  # lessons not added because the playbook holds them already (same text and provenance)
    notes: tuple[str, ...] = ()  # what an ACE import did that the file may not expect (a bullet kept twice, ...)


class PlaybookImportWarning(UserWarning):
    """A line of an ACE playbook that a tolerant import skipped, or a note on how one was read (the message names
    file and line)."""


def label_key(labels: Iterable[str]) -> str:
    """Return the canonical form of a label set: sorted and comma-joined."""
    return ",".join(sorted(labels))


def lesson_problems(record: Any, taxonomy: bool = True, labels: LabelRegistry | None = None) -> list[str]:
    """Return what is wrong with a lesson record (empty when it is a valid lesson); with
    `taxonomy`, a failure type or label unknown to `labels` (default: the host's) is one of the problems."""
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {type(record).__name__}"]
    problems = [f"missing field {name!r}" for name in REQUIRED_FIELDS if name not in record]
    unknown = sorted(set(record) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        problems.append(f"unknown field(s) {', '.join(map(repr, unknown))}")
    problems += _type_problems(record)
    if taxonomy and not problems:
        try:
            (labels if labels is not None else default_labels()).check(record["failure_type"], record["labels"])
        except UnknownFailure as error:
            problems.append(str(error))
    return problems


def _type_problems(record: dict) -> list[str]:
    problems = []
    for name in ("failure_type", "trigger", "principle"):
        if name in record and not (isinstance(record[name], str) and record[name].strip()):
            problems.append(f"{name!r} must be a non-empty string")
    for name, limit in (("trigger", MAX_TEXT_CHARS), ("principle", MAX_TEXT_CHARS), ("subtype", MAX_SUBTYPE_CHARS)):
        value = record.get(name, "")
        if not isinstance(value, str):
            problems.append(f"{name!r} must be a string")
        elif len(value) > limit:
            problems.append(f"{name!r} is {len(value):,} characters, more than {limit:,}")
    if "labels" in record:
        problems += _label_problems(record["labels"])
    provenance = record.get("provenance", {})
    if not isinstance(provenance, dict):
        problems.append("'provenance' must be an object")
    elif len(json.dumps(provenance, ensure_ascii=False, default=str)) > MAX_PROVENANCE_CHARS:
        problems.append(f"'provenance' is more than {MAX_PROVENANCE_CHARS:,} characters as JSON")
    problems += _created_at_problems(record.get("created_at", 0.0))
    for name in COUNTERS:
        problems += counter_problems(name, record.get(name, 0))
    problems += _surrogate_problems(record)
    return problems


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate (never valid Unicode, e.g. from an observation's broken bytes) written as
    U+FFFD, so a lesson a run writes from what it saw can be stored."""
    return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)


def _surrogate_problems(record: dict) -> list[str]:
    """A lone surrogate (JSON's "\\udc80", never valid Unicode) in any text of the record: SQLite cannot store it."""
    problems = []
    for name in ("failure_type", "trigger", "principle", "subtype", "labels", "provenance"):
        text = json.dumps(record.get(name), ensure_ascii=False, default=str)
        surrogate = next((i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"), None)
        if surrogate is not None:
            problems.append(f"{name!r} holds a lone surrogate ({ascii(text[surrogate])}): not valid Unicode")
    return problems


def _created_at_problems(value: Any) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return ["'created_at' must be a finite number (seconds since the epoch)"]
    latest = time.time() + MAX_CLOCK_SKEW_S
    if not 0 <= value <= latest:
        return [f"'created_at' {value!r} is outside 0 to {latest:.0f} "
                "(seconds since the epoch, at most a day from now)"]
    return []


def counter_problems(name: str, value: Any) -> list[str]:
    """What is wrong with a lesson counter's value (empty when it is an integer from 0 to MAX_COUNTER)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNTER:
        shown = repr(value) if len(repr(value)) <= 30 else repr(value)[:27] + "..."
        return [f"{name!r} must be an integer from 0 to {MAX_COUNTER}, not {shown}"]
    return []


def _label_problems(labels: Any) -> list[str]:
    if not isinstance(labels, list | tuple) or not all(isinstance(label, str) for label in labels):
        return ["'labels' must be a list of strings"]
    if not 1 <= len(labels) <= MAX_LABELS:
        return [f"'labels' must hold 1 to {MAX_LABELS} labels, not {len(labels)}"]
    if len(set(labels)) != len(labels):
        return ["'labels' has duplicates"]
    bad = [label for label in labels if not label or "," in label or len(label) > MAX_LABEL_CHARS]
    if bad:
        return [f"bad label(s) {', '.join(map(repr, bad))}: a label is 1 to {MAX_LABEL_CHARS} characters, no commas"]
    return []


def normalized(record: dict) -> dict:
    """Return a valid record with every optional field filled in and labels sorted."""
    return {
        "failure_type": record["failure_type"],
        "labels": tuple(sorted(record["labels"])),
        "subtype": record.get("subtype", ""),
        "trigger": record["trigger"],
        "principle": record["principle"],
        "provenance": dict(record.get("provenance") or {}),
        "created_at": float(record["created_at"]) if record.get("created_at") is not None else time.time(),
        **{name: record.get(name, 0) for name in COUNTERS},
    }


def _check_readable(path: Path) -> None:
    """Raise PlaybookImportError unless `path` is a file of at most MAX_FILE_BYTES."""
    if not path.is_file():
        raise PlaybookImportError(path, ["not a readable file"])
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PlaybookImportError(path, [f"file is {size:,} bytes, more than {MAX_FILE_BYTES:,}"])


def _file_text_lines(path: Path) -> list[tuple[int, bytes]]:
    """Return (line number, raw line) pairs of a file (lines end at LF), after checking that it can be read at all."""
    _check_readable(path)
    with open(path, "rb") as handle:
        return list(enumerate(handle, start=1))


def _decoded(number: int, raw: bytes, problems: list[str]) -> str | None:
    if len(raw) > MAX_LINE_BYTES:
        problems.append(f"line {number}: line is {len(raw):,} bytes, more than {MAX_LINE_BYTES:,}")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(f"line {number}: not UTF-8 ({error.reason} at byte {error.start})")
        return None


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def read_jsonl(path: str | os.PathLike, labels: LabelRegistry | None = None, *,
               progress: Callable[[int, int | None], None] | None = None) -> list[dict]:
    """Return the normalized lesson records of a JSONL playbook, or raise PlaybookImportError
    listing every bad line; blank lines are skipped. Labels are checked against `labels` (default: the host's).
    `progress`, when given, is called with (lines read, lines in the file) after each line."""
    path = Path(path)
    records: list[dict] = []
    problems: list[str] = []
    lines = _file_text_lines(path)
    for number, raw in lines:
        if progress is not None:
            progress(number, len(lines))
        text = _decoded(number, raw, problems)
        if text is None or not text.strip():
            continue
        try:
            record = json.loads(text, parse_constant=_no_constants)
        except (ValueError, RecursionError) as error:
            problems.append(f"line {number}: not valid JSON ({error})")
            continue
        line_problems = lesson_problems(record, labels=labels)
        problems += [f"line {number}: {problem}" for problem in line_problems]
        if not line_problems:
            records.append({**normalized(record), "line": number, "source_id": record.get("id")})
    if problems:
        raise PlaybookImportError(path, problems)
    return records


def write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write records as JSONL, replacing `path` only once the whole file is written; return the count."""
    count = 0

    def write(handle) -> None:
        nonlocal count
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    atomic_write(path, write)
    return count




def _ace_record(line: AceLine, header: str | None, now: float) -> tuple[dict, list[str]]:
    """The lesson record of an ACE bullet under `header` (None: before any header), and what is wrong with its
    counters (they must be whole numbers from 0 to MAX_COUNTER)."""
    problems = [problem for name, value in (("helpful", line.helpful), ("harmful", line.harmful))
                if value is not None for problem in counter_problems(name, value)]
    section = (header or "").rstrip(":").strip()
    subtype = section[:MAX_SUBTYPE_CHARS]  # a longer title is kept whole as the header
    provenance: dict[str, Any] = {"source": "ace", "id": line.bullet_id}
    if line.harmful is not None:
        provenance["harmful"] = line.harmful
    if header is not None and (header != subtype or not header):
        provenance["header"] = header  # as written: a trailing colon, a long title, an empty `##` (not "no header")
    if not line.text:
        provenance["empty"] = True
    principle = line.text or EMPTY_BULLET_TEXT
    return {
        "failure_type": ACE_FAILURE_TYPE,
        "labels": [ACE_SECTIONS.get(section.upper(), "others")],
        "subtype": subtype,
        "trigger": ace_trigger(line.text, subtype),
        "principle": principle,
        "provenance": provenance,
        "created_at": now,
        "helped": line.helpful or 0,
    }, problems


def read_ace(path: str | os.PathLike, labels: LabelRegistry | None = None, *, strict: bool = False,
             skipped: list[str] | None = None, notes: list[str] | None = None,
             headers: list[tuple[int, str]] | None = None,
             progress: Callable[[int, int | None], None] | None = None, data: bytes | None = None) -> list[dict]:
    """Return the lesson records of an ACE playbook, one per bullet, in file order (`data`: the playbook's bytes,
    read from elsewhere than `path`, which then only names it in messages).

    Lines are read by the rules of `ace_format` (docs/playbook-ace-format.md): blank lines, `##`
    headers and bullets are used; any other line, and a bullet the playbook cannot hold (counters
    over MAX_COUNTER, a text over MAX_TEXT_CHARS, ...), is skipped: its "line N: why" is appended
    to `skipped` when given, else issued as a PlaybookImportWarning naming the file. With `strict`,
    such lines raise PlaybookImportError listing them all instead (and nothing is returned).
    `notes` (else warnings) receives what was read but may surprise: a bullet identical to an
    earlier one (kept as a lesson of its own, marked `"copy": N` in its provenance), a non-blank
    file with no bullet. `headers` receives (line number, name as written) for each header line.

    Mapping: failure type "procedure"; label = the section's ACE_SECTIONS label ("others" for an
    unknown section or none); subtype = the section title (trailing colon dropped; "" before any
    header; at most MAX_SUBTYPE_CHARS, the header keeping the whole title); principle = the bullet
    text exactly as written (EMPTY_BULLET_TEXT for an empty one, with `"empty": true`); trigger =
    `ace_trigger(text, section)`; helped = helpful; provenance = {"source": "ace", "id": ...,
    "harmful": ... (bullets with counters), "header": the section title as written, when it differs
    from the subtype or is empty}.
    Lessons keep the file's order in their ids and share one created_at. Labels are checked
    against `labels` (default: the host's). `progress`, when given, is called with (lines read, None) after
    each line.
    """
    path = Path(path)
    if data is None:
        _check_readable(path)
    now = time.time()
    header: str | None = None
    records: list[dict] = []
    problems: list[str] = []
    found: list[str] = []
    seen: dict[str, tuple[int, int]] = {}  # a bullet's identity -> (its first line, copies so far)
    used = last = 0  # non-blank lines, the number of the last
    for number, raw in ace_lines(path.read_bytes() if data is None else data):
        if progress is not None:
            progress(number, None)
        text = _decoded(number, raw, problems)
        line = parse_ace_line(text) if text is not None else None
        if text is None or line is not None:  # a line that is not UTF-8 (or too long) is not blank
            used, last = used + 1, number
        if line is None:
            continue
        if line.kind == "header":
            header = line.text
            if headers is not None:
                headers.append((number, header))
            continue
        if line.kind != "bullet":
            problems.append(f"line {number}: {line.problem}")
            continue
        record, line_problems = _ace_record(line, header, now)
        identity = json.dumps([record["subtype"], record["principle"], record["provenance"]], ensure_ascii=False)
        if identity in seen:
            first, copies = seen[identity]
            seen[identity] = (first, copies + 1)
            record["provenance"]["copy"] = copies + 1
            found.append(f"line {number}: the same bullet as line {first} (section, id, text, harmful count); kept as "
                         f"a lesson of its own, marked \"copy\": {copies + 1} in its provenance (counters not added)")
        else:
            seen[identity] = (number, 1)
        if not line_problems:
            line_problems = lesson_problems(record, labels=labels)
        problems += [f"line {number}: {problem}" for problem in line_problems]
        if not line_problems:
            records.append({**normalized(record), "line": number})
    if problems and strict:
        raise PlaybookImportError(path, problems)
    if not records and used:
        where = "line 1" if last == 1 else f"lines 1-{last}"
        found.append(f"{where}: no bullet in {used} non-blank line(s) ({len(problems)} skipped); nothing to import")
    for problem in problems:
        if skipped is not None:
            skipped.append(problem)
        else:
            warnings.warn(f"{path}: {problem} (skipped)", PlaybookImportWarning, stacklevel=2)
    for note in found:
        if notes is not None:
            notes.append(note)
        else:
            warnings.warn(f"{path}: {note}", PlaybookImportWarning, stacklevel=2)
    return records
