"""ACE's playbook text format: the rules that read its lines (headers, bullets, the rest) and the writer.

The specification implemented here is docs/playbook-ace-format.md. In short: a file is UTF-8, a
leading byte-order mark is dropped, and lines end at CR, LF or CRLF (how Python's text mode, with
which ACE reads a playbook, splits them). Each line is stripped of whitespace; a blank line is
nothing, a line starting with `##` is a section header (its name: the text after the leading `#`s,
stripped, as written), `[ID] helpful=H harmful=M :: CONTENT` is a bullet with counters (ACE's
generator's form: ID one or more characters other than `]`, H and M one or more decimal digits of
any script read as by `int()`, whitespace optional around the counters and `::`, CONTENT possibly
empty) and `[ID] CONTENT` is a bullet without counters (ACE-AppWorld's form: CONTENT not empty and
not starting with `helpful=` or `harmful=`). Any other line is not part of the playbook.

This module only reads and writes text: `parse_ace_line` says what a line is, and `ace_text` /
`ace_file_text` write lesson records as a playbook. Turning bullets into lessons (and checking
them) is `io.read_ace`'s job.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from playground.host_api import atomic_write

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
ACE_FALLBACK_SECTION = "TROUBLESHOOTING AND PITFALLS"  # where the writers put lessons that are not ACE bullets
# The principle of a lesson made from a bullet with no content (ACE keeps such bullets; a lesson needs a text).
# Its provenance says `"empty": true`, and the writers write the bullet's content as empty again.
EMPTY_BULLET_TEXT = "(empty ACE bullet)"
BOM = b"\xef\xbb\xbf"

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BULLET = re.compile(r"\[(?P<id>[^\]]+)\]\s*(?P<rest>.*)", re.S)
# Counters with anything between `=` and the next separator, so that a bad one (`-1`, `1.5`) can be named.
_COUNTERS = re.compile(r"helpful=(?P<helpful>\S*?)\s*harmful=(?P<harmful>\S*?)\s*::\s*(?P<text>.*)", re.S)
_TRIGGER_OPENERS = ("for ", "when ", "whenever ", "if ", "before ", "after ", "while ", "during ")
_MAX_COUNTER_DIGITS = 30  # more significant digits than any counter a playbook keeps: left as written


@dataclass(frozen=True)
class AceLine:
    """What one non-blank line of an ACE playbook is: a section header, a bullet, or neither (`problem` says why).

    For a header, `text` is the section name as written; for a bullet, its content (empty for an empty `::`
    bullet) with `bullet_id` and the counters: an int each, None for a bullet without counters, or the
    text as written where it is not a number ACE reads (the reader refuses those)."""

    kind: str  # "header", "bullet" or "other"
    text: str
    bullet_id: str = ""
    helpful: int | str | None = None
    harmful: int | str | None = None
    problem: str = ""


def ace_lines(data: bytes) -> list[tuple[int, bytes]]:
    """The numbered lines (from 1) of an ACE playbook file's bytes: a leading UTF-8 byte-order mark dropped,
    split at CR, LF and CRLF (Python's universal newlines, with which ACE reads a file in text mode)."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    return list(enumerate(_LINE_END.split(data), start=1))


def ace_counter(raw: str) -> int | str:
    """A counter as ACE reads it: `int()` of one or more decimal digits of any script ("12", "١٢");
    anything else (and a number of more than 30 significant digits) is returned as written."""
    if not raw.isdecimal():
        return raw
    digits = "".join(str(unicodedata.decimal(char)) for char in raw).lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_COUNTER_DIGITS else raw


def parse_ace_line(line: str) -> AceLine | None:
    """Read one line (without its line ending) by the rules in the module docstring; None for a blank line."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("##"):
        return AceLine("header", text.lstrip("#").strip())
    if text.startswith("#"):
        return AceLine("other", text, problem=f"one '#' is not a section header (ACE's start with '##'): {text[:60]!r}")
    bullet = _BULLET.fullmatch(text)
    if bullet is None:
        return AceLine("other", text, problem=f"not a '## SECTION' header or an '[id] text' bullet: {text[:60]!r}")
    rest = bullet["rest"]
    if rest.startswith(("helpful=", "harmful=")):
        counters = _COUNTERS.fullmatch(rest)
        if counters is None:
            why = f"counters must read 'helpful=N harmful=N :: text', not {rest[:60]!r}"
            return AceLine("other", text, problem=why)
        return AceLine("bullet", counters["text"], bullet["id"], ace_counter(counters["helpful"]),
                       ace_counter(counters["harmful"]))
    if not rest:
        return AceLine("other", text, problem="the bullet has no text")
    return AceLine("bullet", rest, bullet["id"])


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


def _label_section(record: dict) -> str:
    """The section of a lesson's first label (OTHERS when it has none that is a section's)."""
    by_label = {label: section for section, label in ACE_SECTIONS.items()}
    return by_label.get((record.get("labels") or ["others"])[0], "OTHERS")


def ace_bullet(record: dict) -> tuple[str | None, str, int, int, str]:
    """Return a lesson record as an ACE bullet: (section header, id, helpful, harmful, one-line text).

    The inverse of `read_ace` for "procedure" lessons: the section is the header as written (from
    the provenance, where it differs from the subtype), else the subtype, else (a lesson not from an
    ACE file) the section of the label; None for a bullet that came before any header. The id and
    harmful count come from the provenance (a lesson that has no ACE id gets `pb-<its id>`), helpful
    is `helped`, the text is the principle ("" for an empty bullet), unchanged but for \\r and \\n
    (written as spaces, to keep one line). Any other lesson (a recovery lesson of a diagnosed
    failure) goes to TROUBLESHOOTING AND PITFALLS as "When TRIGGER: PRINCIPLE".
    """
    provenance = record.get("provenance") or {}
    ace = provenance.get("source") == "ace" and isinstance(provenance.get("id"), str)
    bullet_id = provenance["id"] if ace else f"pb-{int(record.get('id') or 0):05d}"
    section: str | None
    if record["failure_type"] == ACE_FAILURE_TYPE:
        header = provenance.get("header") if ace else None
        if isinstance(header, str):
            section = header.strip()
        elif record.get("subtype") or not ace:
            section = record.get("subtype") or _label_section(record)
        else:
            section = None
        text = "" if ace and provenance.get("empty") is True else record["principle"]
    else:
        section, text = ACE_FALLBACK_SECTION, f"When {record['trigger']}: {record['principle']}"
    harmful = provenance.get("harmful", 0)
    harmful = harmful if isinstance(harmful, int) and not isinstance(harmful, bool) and harmful >= 0 else 0
    one_line = re.sub(r"[\r\n]+", " ", text)  # a line ends at "\r" or "\n"
    return section, bullet_id, int(record.get("helped") or 0), harmful, one_line.strip()


def _bullet_line(bullet_id: str, helpful: int, harmful: int, text: str) -> str:
    return f"[{bullet_id}] helpful={helpful} harmful={harmful} ::" + (f" {text}" if text else "")


def _header_line(name: str) -> str:
    return f"## {name}" if name else "##"


def ace_text(records: Iterable[dict]) -> str:
    """Return lesson records as an ACE playbook grouped by section: `## SECTION` headers, each section
    where its first lesson comes, and `[id] helpful=X harmful=Y :: text` bullets in record order within
    it. (What the ACE baseline writes from its in-memory playbook; a playbook's export is `ace_file_text`.)"""
    sections: dict[str, list[str]] = {}
    for record in records:
        section, bullet_id, helpful, harmful, text = ace_bullet(record)
        name = section if section is not None else _label_section(record)
        sections.setdefault(name, []).append(_bullet_line(bullet_id, helpful, harmful, text))
    blocks = [_header_line(name) + "\n" + "".join(line + "\n" for line in lines) for name, lines in sections.items()]
    return "\n".join(blocks)


def ace_file_text(records: Iterable[dict], headers: Iterable[tuple[str, int | None]] = ()) -> str:
    """Return lesson records (with their ids, in id order) as an ACE playbook that keeps their order.

    Bullets are written in record order, never regrouped. `headers` are the header lines of imported
    ACE files, each (name as written, id of the lesson made from the first bullet after it, or None
    when none came after it): each is written just before the first record whose id is at least its
    anchor (those with None, and anchors past the last record, at the end), so empty sections and a
    header that came twice come back where they were. A record whose section differs from that of the
    last header written gets its own header; a bullet that came before any header is written before
    any header when it still comes first (else under its label's section).
    """
    order = sorted(enumerate(headers), key=lambda item: (item[1][1] is None, item[1][1] or 0, item[0]))
    pending = deque(header for _, header in order)
    lines: list[str] = []
    current: str | None = None  # the section of the last header written (None: none written yet)

    def header(name: str) -> None:
        nonlocal current
        if lines:
            lines.append("")
        lines.append(_header_line(name))
        current = name

    for record in records:
        while pending and pending[0][1] is not None and pending[0][1] <= int(record.get("id") or 0):
            header(pending.popleft()[0])
        section, bullet_id, helpful, harmful, text = ace_bullet(record)
        if section is None and current is not None:
            section = _label_section(record)
        if section is not None and section != current:
            header(section)
        lines.append(_bullet_line(bullet_id, helpful, harmful, text))
    for name, _ in pending:
        header(name)
    return "".join(line + "\n" for line in lines)


def write_ace(path: str | os.PathLike, records: Iterable[dict],
              headers: Iterable[tuple[str, int | None]] | None = None) -> int:
    """Write lesson records as an ACE playbook, replacing `path` only once written; return the count of bullets.
    With `headers` (a playbook's export) the text is `ace_file_text(records, headers)`, else `ace_text(records)`."""
    records = list(records)
    text = ace_text(records) if headers is None else ace_file_text(records, headers)
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")), binary=True)
    return len(records)
