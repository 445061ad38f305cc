"""The run directory: config, per-episode traces, finished-episode records, summary.

Layout of `--out DIR`:

    config.json            what was asked for (checked again on resume)
    traces/<harness>/<task>.jsonl   one event stream per episode
    episodes.jsonl         one record per finished episode, appended and fsynced
    summary.json           written at the end of every run
    .lock                  held while a process runs in DIR

An episode counts as finished only once its record is in `episodes.jsonl`. A resumed
run skips those and replays any other, so a run killed at any moment loses at most the
episode in flight and never counts one twice.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.run.traces import json_line, read_jsonl

# Config keys that must match for a directory to be resumed; harnesses may be added.
IDENTITY_KEYS = ("env", "task_set", "split", "tasks", "agent", "agent_options", "seed", "max_steps", "params")


class RunDirError(PlaygroundError):
    """The directory cannot be used for this run; the message says why."""


def episode_key(harness: str, task_id: str) -> str:
    """Return the key identifying one episode of a run."""
    return f"{harness}/{task_id}"


class RunDir:
    """An open, locked run directory."""

    def __init__(self, path: str | Path, config: dict[str, Any]) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.path / ".lock", "w")
        except OSError as exc:
            raise RunDirError(f"cannot write to run directory {str(self.path)!r}: {exc.strerror}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"run directory {str(self.path)!r} is in use by another playground process") from None
        self.config = self._merge_config(config)
        self.episodes_path = self.path / "episodes.jsonl"
        self._drop_torn_tail()
        self.records: dict[str, dict] = {}
        if self.episodes_path.exists():
            for record in read_jsonl(self.episodes_path):
                self.records.setdefault(record["key"], record)

    def _merge_config(self, config: dict[str, Any]) -> dict[str, Any]:
        path = self.path / "config.json"
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise RunDirError(f"{path} is not a readable run config ({exc})") from None
            for key in IDENTITY_KEYS:
                if old.get(key) != config.get(key):
                    raise RunDirError(
                        f"{str(self.path)!r} holds a run with a different {key} "
                        f"({old.get(key)!r}, now {config.get(key)!r}); use another --out")
            config = {**config, "harnesses": old["harnesses"] + [h for h in config["harnesses"] if h not in old["harnesses"]]}
            if old.get("run_id"):  # the run's identity survives resumes (lessons are keyed by it)
                config["run_id"] = old["run_id"]
        _write_atomic(path, json.dumps(config, indent=2, default=str) + "\n")
        return config

    def _drop_torn_tail(self) -> None:
        """Cut a half-written last line (from a killed process) off episodes.jsonl."""
        if not self.episodes_path.exists():
            return
        data = self.episodes_path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.episodes_path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def is_finished(self, key: str) -> bool:
        """True when the episode `key` already has a record."""
        return key in self.records

    def trace_path(self, harness: str, task_id: str, attempt: int = 1) -> Path:
        """Return where the trace of one episode (or of a cascade's later attempt) goes."""
        return trace_path(self.path, harness, task_id, attempt)

    def record(self, record: dict[str, Any]) -> None:
        """Append a finished episode's record and force it to disk."""
        if record["key"] in self.records:
            raise RunDirError(f"episode {record['key']!r} is already recorded")
        with open(self.episodes_path, "a", encoding="utf-8") as f:
            f.write(json_line(record))
            f.flush()
            os.fsync(f.fileno())
        self.records[record["key"]] = record

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """Write summary.json atomically and return its path."""
        path = self.path / "summary.json"
        _write_atomic(path, json.dumps(summary, indent=2) + "\n")
        return path

    def close(self) -> None:
        """Release the directory lock."""
        self._lock.close()


def trace_path(run_path: Path, harness: str, task_id: str, attempt: int = 1) -> Path:
    """Return where, under the run directory `run_path`, the trace of one episode (or attempt) goes."""
    suffix = "" if attempt == 1 else f".attempt{attempt}"
    return Path(run_path) / "traces" / _safe(harness) / f"{_safe(task_id)}{suffix}.jsonl"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in name)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
