"""The baselines' memory files, next to the run's playbook (`memory.py` chooses between a file and PostgreSQL).

Each memory is one file, written under an exclusive lock (`locked`) so the worker processes
of a `--workers N` run can share it: JSONL records (`read_records`, `append_record`) or a
whole text replaced at once (ACE's playbook). By default a baseline's file sits beside the
playbook path the runner gives the harness (`DIR/playbooks/<harness>.sqlite` becomes
`DIR/playbooks/<harness>.<suffix>`); a baseline parameter can name another file, e.g. to
reuse what an earlier run learnt. Without a playbook path (`playground.testing.play` with
no `playbook`) there is no file and nothing is carried over.

What an episode writes carries its key (`playground.host_api.episode_key`: run, episode and
attempt, the host's exactly-once key) in each record, so a replayed episode (its process killed
after it wrote, before its record was) finds its writes there and does not write them again
(`memory.written_before`, `memory.append_once`, over a `FileMemory` of this file).
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from playground import EpisodeStart, PlaygroundError


class MemoryFileError(PlaygroundError):
    """A baseline's memory file cannot be read: the file and line are named."""


def memory_path(start: EpisodeStart, suffix: str, override: str = "", param: str = "") -> Path | None:
    """The memory file of a baseline: `override` if given, else the run's playbook path with `suffix`, else None.
    A playbook given as a URL has no folder to keep the file beside: MemoryFileError says to name the file with the
    baseline's parameter `param` (or to give a file playbook). (`memory.memory_for` keeps the memory in PostgreSQL
    beside a `postgresql://` playbook, before this is asked.)"""
    if override:
        return Path(override)
    if not start.playbook:
        return None
    if "://" in start.playbook:
        scheme = start.playbook.split("://", 1)[0]
        how = f"name the file with --param {param}=PATH" if param else "run it with a file --playbook"
        raise MemoryFileError(f"the playbook is a URL ({scheme}://...), and this baseline keeps its memory "
                              f"(*.{suffix}) in a file beside a file playbook: {how}")
    playbook = Path(start.playbook)
    return playbook.with_name(f"{playbook.stem}.{suffix}")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (through `path.lock`) while the block runs; makes its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_records(path: Path | None) -> list[dict]:
    """The JSON objects of a JSONL file, in order ([] when there is no file); a bad line is a MemoryFileError.

    A last line without its newline (a process killed mid-write) is ignored.
    """
    if path is None or not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] and not text.endswith("\n"):
        lines = lines[:-1]
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MemoryFileError(f"{path}:{number}: not JSON ({exc.msg}); fix or remove the line") from None
        if not isinstance(record, dict):
            raise MemoryFileError(f"{path}:{number}: expected a JSON object")
        records.append(record)
    return records


def append_record(path: Path, record: dict) -> None:
    """Append one JSON record to `path` (call under `locked(path)`), flushed to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        torn = handle.tell() > 0 and (handle.seek(-1, os.SEEK_END), handle.read(1))[1] != b"\n"
        handle.write((("\n" if torn else "") + json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
