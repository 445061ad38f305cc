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
`json.loads` only, ACE lines through one regular expression.

ACE playbooks (https://github.com/ace-agent/ace) have no failure types, so every ACE bullet
becomes a lesson of the failure type "procedure", which the playbook plugin declares with
one label per canonical ACE section; see `read_ace` for the whole mapping, and `write_ace`
for the way back (an ACE file read and written again keeps its bullets: ids, sections in
their order with their headers as written, counters, and each bullet's text byte for byte;
sections with no bullet are not kept, since a playbook holds lessons). Like ACE's own
parsers, reading skips the lines it cannot use (prose, bullets with no text), with a
warning naming file and line; `strict=True` refuses the whole file instead.

Failure types and labels are checked against a `LabelRegistry`: the one given, else the
process-wide host's (`playground.host.manager.default_labels`).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from playground.core.errors import PlaygroundError
from playground.core.labels import FailureLabel, FailureType, LabelRegistry, UnknownFailure
from playground.host_api import atomic_write, default_labels

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

ACE_FAILURE_TYPE = "procedure"
# The sections ACE's generator writes, and the label each one maps to. A section not
# listed here keeps its title as the lesson's subtype and gets the label "others".
ACE_SECTIONS = {
    "STRATEGIES AND HARD RULES": "strategies_and_hard_rules",
    "APIS TO USE FOR SPECIFIC INFORMATION": "apis_to_use",
    "USEFUL CODE SNIPPETS AND TEMPLATES": "code_snippets_and_templates",
    "COMMON MISTAKES AND CORRECT STRATEGIES": "common_mistakes",
    "PROBLEM-SOLVING HEURISTICS AND WORKFLOWS": "heuristics_and_workflows",
    "VERIFICATION CHECKLIST": "verification_checklist",
    "TROUBLESHOOTING AND PITFALLS": "troubleshooting_and_pitfalls",
    "OTHERS": "others",
}
# What the playbook plugin declares through `register_failure_labels`.
FAILURE_LABELS = (
    FailureType(ACE_FAILURE_TYPE, "procedure_breadth",
                "procedural knowledge without a diagnosed failure, e.g. imported ACE playbooks"),
    *(FailureLabel(label, ACE_FAILURE_TYPE) for label in ACE_SECTIONS.values()),
)

_ACE_BULLET = re.compile(r"^\[(?P<id>[^\]]*[^\]\s][^\]]*)\]\s*(?P<rest>.*)$")  # ids may hold spaces, as in ACE
_ACE_COUNTERS = re.compile(r"^helpful=(?P<helpful>\S*)\s+harmful=(?P<harmful>\S*)\s*::(?P<text>.*)$")
_TRIGGER_OPENERS = ("for ", "when ", "whenever ", "if ", "before ", "after ", "while ", "during ")


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


class PlaybookImportWarning(UserWarning):
    """A line of an ACE playbook that a tolerant import skipped (the message names file and line)."""


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


def _file_text_lines(path: Path) -> list[tuple[int, bytes]]:
    """Return (line number, raw line) pairs of a file, after checking that it can be read at all."""
    if not path.is_file():
        raise PlaybookImportError(path, ["not a readable file"])
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PlaybookImportError(path, [f"file is {size:,} bytes, more than {MAX_FILE_BYTES:,}"])
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


def read_jsonl(path: str | os.PathLike, labels: LabelRegistry | None = None) -> list[dict]:
    """Return the normalized lesson records of a JSONL playbook, or raise PlaybookImportError
    listing every bad line; blank lines are skipped. Labels are checked against `labels` (default: the host's)."""
    path = Path(path)
    records: list[dict] = []
    problems: list[str] = []
    for number, raw in _file_text_lines(path):
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


def ace_trigger(text: str, section: str) -> str:
    """Return the trigger of an ACE bullet: its opening condition ("For file deletion tasks",
    "When syncing contacts across platforms") or, when it has none, "ACE section: SECTION"."""
    lowered = text.lower()
    if lowered.startswith(_TRIGGER_OPENERS) and not lowered.startswith(("for example", "for instance")):
        depth = 0
        for position, char in enumerate(text[:300]):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and char in ":,." and position > 4:
                return text[:position].strip()
    return f"ACE section: {section or 'none'}"


def _ace_bullet(rest: str) -> tuple[tuple[str, int | None, int | None], list[str]]:
    """The (text, helpful, harmful) of an ACE bullet after its id, and what is wrong with it: counters that are
    not `helpful=N harmful=N ::` with N from 0 to MAX_COUNTER, or no text."""
    helpful = harmful = None
    if rest.startswith(("helpful=", "harmful=")):
        counters = _ACE_COUNTERS.match(rest)
        if counters is None:
            return ("", None, None), [f"counters must read 'helpful=N harmful=N :: text', not {rest[:60]!r}"]
        problems = []
        values = {}
        for name in ("helpful", "harmful"):
            raw = counters[name]
            value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 20 else raw
            values[name] = value
            problems += counter_problems(name, value)
        if problems:
            return ("", None, None), problems
        helpful, harmful, rest = int(values["helpful"]), int(values["harmful"]), counters["text"].strip()
    if not rest:
        return ("", None, None), ["the bullet has no text"]
    return (rest, helpful, harmful), []


def read_ace(path: str | os.PathLike, labels: LabelRegistry | None = None, *, strict: bool = False,
             skipped: list[str] | None = None) -> list[dict]:
    """Return the lesson records of an ACE playbook.

    A usable line is blank, a `#` header, or a `[id] (helpful=X harmful=Y ::) text` bullet with a
    text and, where given, counters from 0 to MAX_COUNTER. Any other line is skipped, as ACE's
    parsers skip it: its "line N: why" is appended to `skipped` when given, else issued as a
    PlaybookImportWarning naming the file. With `strict`, such lines raise PlaybookImportError
    listing them all instead (and nothing is returned).

    Mapping: failure type "procedure"; label = the section's ACE_SECTIONS label ("others" for an
    unknown section); subtype = the section title (trailing colon dropped); principle = the bullet
    text exactly as written; trigger = `ace_trigger(text, section)`; helped = helpful; provenance =
    {"source": "ace", "id": ..., "harmful": ..., "header": the section title as written, when it
    differs from the subtype}. Lessons keep the file's order in their ids and share one created_at.
    Labels are checked against `labels` (default: the host's).
    """
    path = Path(path)
    now = time.time()
    section = header = ""
    records: list[dict] = []
    problems: list[str] = []
    for number, raw in _file_text_lines(path):
        text = _decoded(number, raw, problems)
        if text is None or not text.strip():
            continue
        text = text.strip()
        if text.startswith("#"):
            if text.startswith("## "):
                header = text[3:].strip()
                section = header.rstrip(":").strip()
            continue
        match = _ACE_BULLET.match(text)
        if not match:
            problems.append(f"line {number}: not a '## SECTION' header or an '[id] text' bullet: {text[:60]!r}")
            continue
        bullet, bullet_problems = _ace_bullet(match["rest"])
        if bullet_problems:
            problems += [f"line {number}: {problem}" for problem in bullet_problems]
            continue
        principle, helpful, harmful = bullet
        provenance: dict[str, Any] = {"source": "ace", "id": match["id"]}
        if harmful is not None:
            provenance["harmful"] = harmful
        if header != section:
            provenance["header"] = header
        record = {
            "failure_type": ACE_FAILURE_TYPE,
            "labels": [ACE_SECTIONS.get(section.upper(), "others")],
            "subtype": section,
            "trigger": ace_trigger(principle, section),
            "principle": principle,
            "provenance": provenance,
            "created_at": now,
            "helped": helpful or 0,
        }
        line_problems = lesson_problems(record, labels=labels)
        problems += [f"line {number}: {problem}" for problem in line_problems]
        if not line_problems:
            records.append({**normalized(record), "line": number})
    if problems and strict:
        raise PlaybookImportError(path, problems)
    for problem in problems:
        if skipped is not None:
            skipped.append(problem)
        else:
            warnings.warn(f"{path}: {problem} (skipped)", PlaybookImportWarning, stacklevel=2)
    return records


ACE_FALLBACK_SECTION = "TROUBLESHOOTING AND PITFALLS"  # where `write_ace` puts lessons that are not ACE bullets


def ace_bullet(record: dict) -> tuple[str, str, int, int, str]:
    """Return a lesson record as an ACE bullet: (section header, id, helpful, harmful, one-line text).

    The inverse of `read_ace` for "procedure" lessons: the section is the header as written (from
    the provenance), else the subtype, else the section of the label; the id and harmful count come
    from the provenance (a lesson that has no ACE id gets `pb-<its id>`), helpful is `helped`, the
    text is the principle, unchanged but for \\r and \\n (written as spaces, to keep one line).
    Any other lesson (a recovery lesson of a diagnosed failure) goes to TROUBLESHOOTING AND
    PITFALLS as "When TRIGGER: PRINCIPLE".
    """
    provenance = record.get("provenance") or {}
    ace = provenance.get("source") == "ace" and isinstance(provenance.get("id"), str)
    bullet_id = provenance["id"] if ace else f"pb-{int(record.get('id') or 0):05d}"
    if record["failure_type"] == ACE_FAILURE_TYPE:
        by_label = {label: section for section, label in ACE_SECTIONS.items()}
        header = provenance.get("header")
        header = header.strip() if ace and isinstance(header, str) else ""
        section = (header or record.get("subtype")
                   or by_label.get((record.get("labels") or ["others"])[0], "OTHERS"))
        text = record["principle"]
    else:
        section, text = ACE_FALLBACK_SECTION, f"When {record['trigger']}: {record['principle']}"
    harmful = provenance.get("harmful", 0)
    harmful = harmful if isinstance(harmful, int) and not isinstance(harmful, bool) and harmful >= 0 else 0
    one_line = re.sub(r"[\r\n]+", " ", text)  # a file line ends at "\n"; "\r" would end it for other readers
    return section, bullet_id, int(record.get("helped") or 0), harmful, one_line.strip()


def ace_text(records: Iterable[dict]) -> str:
    """Return lesson records as an ACE playbook: `## SECTION` headers, each section where its first
    lesson comes (so an imported file keeps its section order), and `[id] helpful=X harmful=Y :: text`
    bullets in record order."""
    sections: dict[str, list[str]] = {}
    for record in records:
        section, bullet_id, helpful, harmful, text = ace_bullet(record)
        sections.setdefault(section, []).append(f"[{bullet_id}] helpful={helpful} harmful={harmful} :: {text}")
    blocks = [f"## {name}\n" + "".join(line + "\n" for line in lines) for name, lines in sections.items()]
    return "\n".join(blocks)


def write_ace(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write lesson records as an ACE playbook (`ace_text`), replacing `path` only once written; return the count."""
    records = list(records)
    text = ace_text(records)
    atomic_write(path, lambda handle: handle.write(text))
    return len(records)
