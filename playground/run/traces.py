"""Episode traces: one append-only JSONL stream of typed events per episode, written and read back.

The first line is a `header` event naming the trace format version (`trace_version`), the env, its package
version, the task set's seeds or data hash, the task, harness and agent (with its options), the seed, the step
budget and the parameters: enough to rebuild the episode's start state. Then come the loop's events: reset,
checkpoint, proposal (with the view the agent saw), prompt (each long text of those views once, by hash),
detection, intervention, rollback, step, verification, lesson, error, end; and `judge_call`, each model call a
plugin's role made (`playground.agents.structured.ask_structured`): its role, token counts (apart from the
agent's), whether its reply was usable and how it was constrained (`mode`). Each type is a class of
`playground.core.events`, which maps it to and from its JSON record; `TraceWriter` writes events and
`read_events` reads them back (a version-1 trace upgraded, a newer version than this playground knows refused).
"""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path
from typing import Iterator, Protocol

from playground.core.errors import PlaygroundError
from playground.core.events import (
    EVENT_CLASSES,
    TRACE_VERSION,
    Event,
    EventError,
    HeaderEvent,
    fields_of,
    from_record,
    trace_version,
)
from playground.run.files import TEXT_ERRORS, PathEscapeError, confined

EVENT_TYPES = frozenset(EVENT_CLASSES)


def json_line(record: dict) -> str:
    """Return `record` as one JSON line (non-JSON values written with str())."""
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


class TraceSink(Protocol):
    """Where an attempt's trace events go, header first: a file (`TraceWriter`), or memory (`TraceBuffer`)."""

    def emit(self, event: Event) -> None:
        """Take one event, stamped with the time now."""

    def close(self) -> None:
        """End the trace."""


class TraceWriter:
    """Writes one episode's events to `path`, flushing each line as it is written.

    Opening a trace starts it afresh: an episode that was interrupted is replayed from
    its start, so its partial trace is replaced (by a new file: a study pipeline's hard-linked
    copy of the old one is left as it was) rather than appended to.
    """

    def __init__(self, path: Path, header: HeaderEvent) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)  # a new file, not the old one truncated: a hard link to it stays as it was
        # A lone surrogate (from a model's reply or an env's bytes) is written as its JSON escape `\udXXX`, which
        # reads back as the same string: it must not error the episode.
        self._file = open(self.path, "w", encoding="utf-8", errors=TEXT_ERRORS)
        if not isinstance(header, HeaderEvent) or header.trace_version != TRACE_VERSION:
            self._file.close()
            raise ValueError(f"a trace starts with a header of version {TRACE_VERSION}, not {header!r:.80}")
        self.emit(header)

    def emit(self, event: Event) -> None:
        """Append `event`, stamped with the time it is written."""
        self._file.write(event_line(event))
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def event_line(event: Event) -> str:
    """The JSON line a trace holds for `event`, stamped with the time now (ValueError for what is not an event)."""
    if not isinstance(event, Event) or type(event) is Event:
        raise ValueError(f"not a trace event: {event!r:.80}")
    return json_line({"type": event.TYPE, "t": round(time.time(), 3), **fields_of(event)})


class TraceBuffer:
    """One episode's trace kept in memory, for a worker that must not write the run directory (a Ray actor): the
    JSON lines `TraceWriter` would write to `path`, in order, header first. The run's process writes them there
    (`write`), before it records the episode. Picklable: it travels back with the episode's record."""

    def __init__(self, path: Path, header: HeaderEvent) -> None:
        self.path = str(path)
        if not isinstance(header, HeaderEvent) or header.trace_version != TRACE_VERSION:
            raise ValueError(f"a trace starts with a header of version {TRACE_VERSION}, not {header!r:.80}")
        self.lines: list[str] = [event_line(header)]

    def emit(self, event: Event) -> None:
        """Keep `event`'s line, stamped with the time it is emitted."""
        self.lines.append(event_line(event))

    def close(self) -> None:
        """Nothing to close: the lines stay until they are written."""

    def __getstate__(self) -> dict:
        """Pickled with its lines compressed (zlib level 1: a cluster-bench episode's 26 kB in 3 kB, 0.12 ms): a
        trace is mostly the same JSON keys again, and a Ray reply of a few episodes stays under Ray's inline limit
        (100 kB), so it skips the object store. The bytes `write` writes are the same."""
        return {"path": self.path, "packed": zlib.compress("".join(self.lines).encode("utf-8", TEXT_ERRORS), 1)}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self.lines = [zlib.decompress(state["packed"]).decode("utf-8")]

    def write(self, root: Path) -> Path:
        """Write the lines to the trace's file, which must lie inside the run directory `root` (PathEscapeError
        otherwise), as `TraceWriter` writes them (the file replaced); return its path."""
        try:
            relative = Path(self.path).relative_to(root)
        except ValueError:
            raise PathEscapeError(f"trace {self.path!r} is outside {str(root)!r}; refusing to write it") from None
        path = confined(root, relative, what="trace")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors=TEXT_ERRORS) as f:
            f.writelines(self.lines)
        return path


class TraceError(PlaygroundError, ValueError):
    """A trace (or other JSONL) file that cannot be read; the message names the file and line."""


def read_jsonl(path: Path) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file, skipping a torn (unterminated) last line.

    TraceError names the file and line of anything else: bytes that are not UTF-8, a line
    that is not JSON, a line that is not a JSON object, or a file that cannot be read.
    """
    for _, record in _numbered(path):
        yield record


def _numbered(path: Path) -> Iterator[tuple[int, dict]]:
    """`read_jsonl`'s objects with their line numbers."""
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.endswith(b"\n"):
                    return  # written by a process killed mid-line
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise TraceError(f"{path}:{number}: not UTF-8 text (byte {exc.start})") from None
                except (ValueError, RecursionError) as exc:
                    raise TraceError(f"{path}:{number}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
                if not isinstance(record, dict):
                    raise TraceError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
                yield number, record
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_events(path: Path) -> list[Event]:
    """The events of a trace file, as `playground.core.events` classes (a version-1 trace upgraded on reading).

    TraceError names the file (and line) of a trace that cannot be read: one whose header names a format version
    newer than this playground reads, a line that is not an event of a known type, an event that lacks a field
    or holds one of the wrong JSON type. A trace without a header line is read as version 1.
    """
    events: list[Event] = []
    version = 1
    for number, record in _numbered(path):
        try:
            if not events and record.get("type") == HeaderEvent.TYPE:
                version = trace_version(record)
            events.append(from_record(record, version))
        except EventError as exc:
            raise TraceError(f"{path}:{number}: {exc}") from None
    return events


def read_header(path: Path) -> HeaderEvent | None:
    """The header of a trace file, read from its first line alone (None for a file that starts with none);
    TraceError as `read_events` gives it."""
    try:
        with open(path, "rb") as f:
            line = f.readline()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        record = json.loads(line.decode("utf-8")) if line.endswith(b"\n") else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise TraceError(f"{path}:1: not a JSON line") from None
    if not isinstance(record, dict) or record.get("type") != HeaderEvent.TYPE:
        return None
    try:
        header = from_record(record, trace_version(record))
    except EventError as exc:
        raise TraceError(f"{path}:1: {exc}") from None
    return header if isinstance(header, HeaderEvent) else None


def read_trace(path: Path) -> list[dict]:
    """The records of a trace file as written (plain JSON objects, not upgraded); TraceError names a line that is
    not an event, or a header of a format version newer than this playground reads. Code that reads events uses
    `read_events`."""
    records = list(read_jsonl(path))
    for number, record in enumerate(records, start=1):
        if not isinstance(record.get("type"), str):
            raise TraceError(f"{path}: event {number} has no 'type'")
    if records and records[0].get("type") == HeaderEvent.TYPE:
        try:
            trace_version(records[0])
        except EventError as exc:
            raise TraceError(f"{path}:1: {exc}") from None
    return records
