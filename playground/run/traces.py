"""Episode traces: one append-only JSONL stream of typed events per episode.

The first line is a `header` event naming the env, its package version, the task set's
seeds or data hash, the task, harness and agent (with its options), the seed, the step
budget and the parameters: enough to rebuild the episode's start state. Then come the
loop's events: reset, checkpoint, proposal (with the view the agent saw), prompt (each
long text of those views once, by hash), detection, intervention, rollback, step,
verification, lesson, error, end; and `judge_call`, each model call a plugin's role made
(`playground.agents.structured.ask_structured`): its role, token counts (apart from the
agent's), whether its reply was usable and how it was constrained (`mode`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

from playground.core.errors import PlaygroundError

EVENT_TYPES = frozenset({
    "header", "reset", "checkpoint", "proposal", "detection", "intervention", "rollback",
    "step", "verification", "lesson", "error", "end", "prompt", "judge_call", "attempt_verdict",
})


def json_line(record: dict) -> str:
    """Return `record` as one JSON line (non-JSON values written with str())."""
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


class TraceWriter:
    """Writes one episode's events to `path`, flushing each line as it is written.

    Opening a trace starts it afresh: an episode that was interrupted is replayed from
    its start, so its partial trace is replaced rather than appended to.
    """

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A lone surrogate (from a model's reply or an env's bytes) is written as its JSON escape `\udXXX`, which
        # reads back as the same string: it must not error the episode.
        self._file = open(self.path, "w", encoding="utf-8", errors="backslashreplace")
        self.emit("header", header)

    def emit(self, event_type: str, data: dict[str, Any]) -> None:
        """Append one event of `event_type` with `data`."""
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown trace event type {event_type!r}")
        self._file.write(json_line({"type": event_type, "t": round(time.time(), 3), **data}))
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class TraceError(PlaygroundError, ValueError):
    """A trace (or other JSONL) file that cannot be read; the message names the file and line."""


def read_jsonl(path: Path) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file, skipping a torn (unterminated) last line.

    TraceError names the file and line of anything else: bytes that are not UTF-8, a line
    that is not JSON, a line that is not a JSON object, or a file that cannot be read.
    """
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
                yield record
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_trace(path: Path) -> list[dict]:
    """Return all events of a trace file; TraceError names a line that is not an event."""
    events = list(read_jsonl(path))
    for number, event in enumerate(events, start=1):
        if not isinstance(event.get("type"), str):
            raise TraceError(f"{path}: event {number} has no 'type'")
    return events
