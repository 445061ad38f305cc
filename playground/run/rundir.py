"""The run directory: config, per-episode traces, finished-episode records, summary.

Layout of `--out DIR`:

    config.json            what was asked for (checked again on resume)
    traces/<harness>/<task>.jsonl   one event stream per episode
    episodes.jsonl         one record per finished episode, appended and fsynced
    summary.json           written at the end of every run
    episodes.quarantine.jsonl  bad lines moved out of episodes.jsonl by `--repair`
    .lock                  held while a process runs in DIR

An episode counts as finished only once its record is in `episodes.jsonl`. A resumed
run skips those and replays any other, so a run killed at any moment loses at most the
episode in flight and never counts one twice.

A damaged directory (a line of episodes.jsonl that is not a record, a record whose trace file
is gone, a config.json that is not a run config) is a RunDirError naming the file, the line or
the first few episodes, and how to recover; with `repair=True` such lines of episodes.jsonl are
moved to episodes.quarantine.jsonl (each as `{"line", "problem", "raw"}`, `raw` decoded with
surrogateescape so no byte is lost) and their episodes are played again.

A run grows: a resume may add harnesses, trials and tasks (a task list that begins with the
recorded one: `--episodes` with a larger N); config.json keeps the union. Any other change to
what decides the episodes (IDENTITY_KEYS) is refused, and a refusal names a few values, never
a whole task list.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.core.records import EpisodeRecord, RecordError, read_record
from playground.run.files import PathEscapeError, atomic_write_text, confined, is_run_dir, safe_file_name
from playground.run.traces import TraceError, json_line, read_header

QUARANTINE = "episodes.quarantine.jsonl"
UNFINISHED = "unfinished.jsonl"  # episodes that ended in an error, left for the next run to play again
# Config keys that must match for a directory to be resumed; harnesses may be added, and tasks after the recorded ones.
IDENTITY_KEYS = ("env", "task_set", "split", "tasks", "agent", "agent_options", "seed", "max_steps", "params")
SHOWN = 3  # a refusal names at most this many ids (tasks, episodes), then a count


def identity_mismatch(old: dict[str, Any], new: dict[str, Any], skip: tuple[str, ...] = ()) -> str | None:
    """The first of IDENTITY_KEYS (less `skip`) on which two recorded run configs differ; None when none does."""
    return next((key for key in IDENTITY_KEYS if key not in skip and old.get(key) != new.get(key)), None)


def merged_tasks(old: Any, new: Any) -> list | None:
    """The task list a resumed run records: the longer of the recorded `old` and the asked-for `new` when one begins
    with the other (a run grows by tasks after its own; a shorter rerun resumes it), else None (refused)."""
    if old == new:
        return new
    if not isinstance(old, list) or not isinstance(new, list):
        return None
    shorter, longer = sorted((old, new), key=len)
    return longer if longer[:len(shorter)] == shorter else None


def shown(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to about `limit` characters (with the whole length) so a message stays a line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def listed(texts: list[str]) -> str:
    """The first SHOWN of `texts`, then how many more there are: what a refusal says of a list of ids."""
    more = f" and {len(texts) - SHOWN:,} more" if len(texts) > SHOWN else ""
    return ", ".join(texts[:SHOWN]) + more


def describe_mismatch(key: str, old: Any, new: Any) -> str:
    """How the recorded `old` value of the identity key `key` differs from `new`, in a few words and ids."""
    if key != "tasks" or not isinstance(old, list) or not isinstance(new, list):
        return f"{shown(old)}, now {shown(new)}"
    differ = [f"#{i + 1} {shown(a)} now {shown(b)}" for i, (a, b) in enumerate(zip(old, new)) if a != b]
    where = f"{len(differ):,} {'differs' if len(differ) == 1 else 'differ'} in place: {listed(differ)}" if differ \
        else "one begins with the other"
    return f"{len(old):,} recorded, {len(new):,} now; {where}"


class RunDirError(PlaygroundError):
    """The directory cannot be used for this run; the message says why."""


class RunDir:
    """An open, locked run directory."""

    def __init__(self, path: str | Path, config: dict[str, Any], repair: bool = False) -> None:
        self.path = Path(path)
        _check_new_empty_or_run(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.path / ".lock", "w")
        except OSError as exc:
            raise RunDirError(f"cannot write to run directory {str(self.path)!r}: {exc.strerror}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"run directory {str(self.path)!r} is in use by another playground process") from None
        try:
            self.config = self._merge_config(config)
            self.episodes_path = self.path / "episodes.jsonl"
            self._drop_torn_tail()
            self.records: dict[str, EpisodeRecord] = {}
            self.missing_traces: list[str] = []  # episodes whose trace was gone, moved out by `repair` to replay
            if self.episodes_path.exists():
                numbered, problems = read_numbered_episodes(self.episodes_path)
                if problems and not repair:
                    raise RunDirError(describe_problems(self.episodes_path, problems, repairable=True))
                packed = (self.path / TRACES_LEFT_OUT).exists()  # traces removed on purpose: not damage
                gone = [(number, problem, raw, record.key) for number, raw, record in numbered
                        if not packed and (problem := missing_trace(self.path, record))]
                if gone and not repair:
                    raise RunDirError(describe_missing_traces(self.episodes_path, [(g[3], g[1]) for g in gone]))
                if problems or gone:
                    self.quarantined = quarantine(self.episodes_path, sorted(problems + [g[:3] for g in gone]))
                    self.missing_traces = [g[3] for g in gone]
                moved = {g[0] for g in gone}
                for number, _, record in numbered:
                    if number not in moved:
                        self.records.setdefault(record.key, record)
        except BaseException:
            self._lock.close()
            raise

    grown_from: int | None = None  # the tasks the run had before this open grew its task list
    quarantined = 0  # lines moved to episodes.quarantine.jsonl by this open (bad ones and those of missing_traces)

    def _merge_config(self, config: dict[str, Any]) -> dict[str, Any]:
        path = self.path / "config.json"
        if path.exists():
            old = read_config(path)
            key = identity_mismatch(old, config, skip=("tasks",))
            tasks = merged_tasks(old.get("tasks"), config.get("tasks"))
            grow = ""
            if key is None and tasks is None and old.get("tasks") != config.get("tasks"):
                key, grow = "tasks", " (a run grows only by tasks after its own: --episodes with a larger N)"
            if key:
                raise RunDirError(
                    f"{str(self.path)!r} holds a run with a different {key} "
                    f"({describe_mismatch(key, old.get(key), config.get(key))}){grow}; use another --out")
            old_prints = old.get("harness_fingerprints")
            new_prints = config.get("harness_fingerprints")
            if isinstance(old_prints, dict) and isinstance(new_prints, dict):
                changed = [h for h in new_prints if h in old_prints and old_prints[h] != new_prints[h]]
                if changed:
                    raise RunDirError(
                        f"{str(self.path)!r} holds a run whose harness {changed[0]!r} was defined differently "
                        "(another policy file content, parameters or interventions); use another --out")
                config = {**config, "harness_fingerprints": {**old_prints, **new_prints}}
            if tasks is not None and tasks != old.get("tasks"):
                self.grown_from = len(old["tasks"])
            config = {**config, **({"tasks": tasks} if tasks is not None else {}),
                      "harnesses": old["harnesses"] + [h for h in config["harnesses"] if h not in old["harnesses"]],
                      "trials": max(_trials(old), _trials(config))}
            if old.get("run_id"):  # the run's identity survives resumes (lessons are keyed by it)
                config["run_id"] = old["run_id"]
            elif (found := run_id_in_files(self.path)) is not None:  # a config.json that lost its id: as below
                config["run_id"] = found
        elif (found := run_id_in_files(self.path)) is not None:
            # config.json was moved away (as a damaged one is advised to be): the run keeps the id its episodes and
            # lessons carry, so an unfinished episode's lessons are still taken back when it is replayed
            config = {**config, "run_id": found}
        atomic_write_text(path, json.dumps(config, indent=2, default=str) + "\n")
        return config

    def _drop_torn_tail(self) -> None:
        """Cut a half-written last line (from a killed process) off episodes.jsonl."""
        if not self.episodes_path.exists():
            return
        try:
            data = self.episodes_path.read_bytes()
        except OSError as exc:
            raise RunDirError(f"{self.episodes_path}: cannot read ({exc.strerror or exc})") from None
        if data and not data.endswith(b"\n"):
            with open(self.episodes_path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def is_finished(self, key: str) -> bool:
        """True when the episode `key` already has a record."""
        return key in self.records

    def trace_path(self, harness: str, task_id: str, attempt: int = 1, trial: int = 1) -> Path:
        """Return where the trace of one episode (or of a cascade's later attempt) goes."""
        return trace_path(self.path, harness, task_id, attempt, trial)

    def record(self, record: EpisodeRecord) -> None:
        """Append a finished episode's record and force it to disk."""
        if record.key in self.records:
            raise RunDirError(f"episode {record.key!r} is already recorded")
        with open(self.episodes_path, "a", encoding="utf-8") as f:
            f.write(json_line(record.as_json()))
            f.flush()
            os.fsync(f.fileno())
        self.records[record.key] = record

    def note_unfinished(self, record: EpisodeRecord) -> None:
        """Log an episode that ended in an error and is left unfinished (unfinished.jsonl; the next run replays it)."""
        entry = {"key": record.key, "harness": record.harness, "task_id": record.task_id, "trial": record.trial,
                 "error": record.error, "trace": record.trace, "t": time.time()}
        with open(self.path / UNFINISHED, "a", encoding="utf-8") as f:
            f.write(json_line(entry))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """Write summary.json atomically and return its path."""
        path = self.path / "summary.json"
        atomic_write_text(path, json.dumps(summary, indent=2) + "\n")
        return path

    def close(self) -> None:
        """Release the directory lock."""
        self._lock.close()


def trace_path(run_path: Path, harness: str, task_id: str, attempt: int = 1, trial: int = 1) -> Path:
    """Return where, under the run directory `run_path`, the trace of one episode (or attempt) goes:
    `<task>.jsonl`, with `.trialN` for trial N > 1 and `.attemptN` for a cascade's attempt N > 1."""
    suffix = (f".trial{trial}" if trial > 1 else "") + (f".attempt{attempt}" if attempt > 1 else "")
    relative = Path("traces") / _safe(harness) / f"{_safe(task_id)}{suffix}.jsonl"
    return confined(run_path, relative, what=f"trace of {harness!r} on {task_id!r}")


def _trials(config: dict[str, Any]) -> int:
    """The trials a config asks for (1 in a config written before trials existed)."""
    trials = config.get("trials", 1)
    return trials if isinstance(trials, int) and not isinstance(trials, bool) and trials >= 1 else 1


def _safe(name: str) -> str:
    return safe_file_name(name)


# What a run directory holds from its first moment (.lock) on; a folder with none of them is not a run.
# A folder that holds only `playbooks/` is a run being set up (a command that puts the playbooks in first).
# A run directory kept without (some of) its traces on purpose, e.g. for a repository: its episodes stay finished
# on resume although their traces are gone (`missing_trace` is not checked).
TRACES_LEFT_OUT = "traces-left-out.txt"
RUN_MARKERS = (".lock", "config.json", "episodes.jsonl", "lock.json", "summary.json", "traces", "playbooks",
               QUARANTINE, UNFINISHED)


def _check_new_empty_or_run(path: Path) -> None:
    """RunDirError unless `path` is missing, an empty folder or a run directory: a run never writes its files
    into a folder of other files (a source tree, a home folder) by a mistyped --out."""
    try:
        entries = {entry.name for entry in path.iterdir()} if path.is_dir() else set()
    except OSError as exc:
        raise RunDirError(f"cannot read run directory {str(path)!r}: {exc.strerror or exc}") from None
    # a run is known by its records or config (`is_run_dir`), never by a folder name alone: a source tree holding a
    # `playbooks/` is no run; a folder of nothing but a run's markers (its playbooks put in first) is one being set up
    if entries and not is_run_dir(path) and not entries <= set(RUN_MARKERS):
        shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise RunDirError(f"{str(path)!r} is a folder of other files ({shown}) and holds no run (no config.json or "
                          "episodes.jsonl); name a new or empty folder for --out, or a run directory to resume")


def read_config(path: Path) -> dict[str, Any]:
    """Return a run directory's config.json, or raise RunDirError saying what is wrong and how to recover."""
    recover = ("restore it, or move it away to resume with this command's settings (the check that the "
               "recorded episodes match them is then skipped), or use another --out")
    try:
        old = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read the run config ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON
        raise RunDirError(f"{path}: not a run config: not valid JSON ({exc}); {recover}") from None
    if not isinstance(old, dict):
        raise RunDirError(f"{path}: not a run config: expected a JSON object, got {type(old).__name__}; {recover}")
    harnesses = old.get("harnesses")
    if not isinstance(harnesses, list) or not all(isinstance(h, str) for h in harnesses):
        raise RunDirError(f"{path}: not a run config: no 'harnesses' list of names; {recover}")
    return old


def run_id_in_files(run_path: Path) -> str | None:
    """The run id a run directory's records or trace headers carry (None when it has neither)."""
    episodes = run_path / "episodes.jsonl"
    if episodes.is_file():
        records, _ = read_episodes(episodes)
        for record in records:
            if record.episode_id and ":" in record.episode_id:
                return record.episode_id.split(":", 1)[0]
    for trace in sorted((run_path / "traces").glob("*/*.jsonl")):
        try:
            header = read_header(trace)
        except TraceError:
            continue
        if header is not None and header.run_id:
            return header.run_id
    return None


def read_episodes(path: Path) -> tuple[list[EpisodeRecord], list[tuple[int, str, bytes]]]:
    """Return the records of an episodes.jsonl file and its bad lines as (line number, problem, raw bytes).

    Blank lines are skipped; a torn (unterminated) last line, from a killed process, is ignored.
    """
    numbered, problems = read_numbered_episodes(path)
    return [record for _, _, record in numbered], problems


def read_numbered_episodes(path: Path) -> tuple[list[tuple[int, bytes, EpisodeRecord]], list[tuple[int, str, bytes]]]:
    """`read_episodes`, each record with its line number and raw bytes: (line number, raw bytes, record)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn last line
    records: list[tuple[int, bytes, EpisodeRecord]] = []
    problems: list[tuple[int, str, bytes]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.append((number, f"not UTF-8 text (byte {exc.start})", raw))
            continue
        except (ValueError, RecursionError) as exc:
            problems.append((number, f"not valid JSON ({getattr(exc, 'msg', exc)})", raw))
            continue
        try:
            records.append((number, raw, read_record(record)))
        except RecordError as problem:
            problems.append((number, f"not an episode record: {problem}", raw))
    return records, problems


def missing_trace(run_path: Path, record: EpisodeRecord) -> str | None:
    """What is wrong with the trace files a record names (its `trace`, each attempt's) when one is gone or lies
    outside the run directory; None when they are all there (or the record names none)."""
    names = [record.trace] + [a.trace for a in record.attempts or ()]
    for name in names:
        if not isinstance(name, str) or not name:
            continue
        try:
            gone = not confined(run_path, name, what="trace").is_file()
        except PathEscapeError:
            return f"its trace {name!r} is outside the run directory"
        if gone:
            return f"its trace {name!r} is missing"
    return None


def describe_missing_traces(path: Path, gone: list[tuple[str, str]]) -> str:
    """One message naming the first few episodes of `path` whose traces are gone (their keys and what `missing_trace`
    said), how many there are, and how to recover."""
    named = listed([f"{key!r} ({problem})" for key, problem in gone])
    return (f"{path}: {len(gone):,} recorded episode(s) lost their trace: {named}; rerun the same command with "
            f"--repair to move their records to {QUARANTINE} and play them again, or restore the traces")


def describe_problems(path: Path, problems: list[tuple[int, str, bytes]], repairable: bool) -> str:
    """One message naming the first bad line of `path`, how many there are, and how to recover."""
    number, problem, _ = problems[0]
    more = ""
    if len(problems) > 1:
        more = f" ({len(problems)} bad lines: {listed([str(n) for n, _, _ in problems])})"
    how = ("rerun the same command with --repair to move bad lines to "
           f"{QUARANTINE} and play their episodes again, or fix or delete the line") if repairable else (
           f"rerun the run's own command with --repair (moves bad lines to {QUARANTINE}), or fix or delete the line")
    return f"{path}:{number}: {problem}{more}; {how}"


def quarantine(path: Path, problems: list[tuple[int, str, bytes]]) -> int:
    """Move the bad lines of episodes.jsonl to episodes.quarantine.jsonl; return how many were moved.

    The quarantine file is appended to and synced before episodes.jsonl is replaced, so a
    crash in between leaves every line in at least one of them.
    """
    bad = {number for number, _, _ in problems}
    with open(path.with_name(QUARANTINE), "a", encoding="utf-8") as handle:
        for number, problem, raw in problems:
            handle.write(json.dumps({"line": number, "problem": problem,
                                     "raw": raw.decode("utf-8", "surrogateescape")}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()
    kept = b"".join(raw + b"\n" for number, raw in enumerate(lines, start=1) if number not in bad) + tail
    from playground.run.files import atomic_write

    atomic_write(path, lambda handle: handle.write(kept), binary=True)
    return len(bad)


def records_so_far(run_path: str | Path) -> list[EpisodeRecord]:
    """The episode records of a run directory, [] where no episode has finished yet (no episodes.jsonl): a study's
    grid before its first run."""
    return load_records(run_path) if (Path(run_path) / "episodes.jsonl").is_file() else []


def load_records(run_path: str | Path) -> list[EpisodeRecord]:
    """The episode records of a run directory, checked (RunDirError names a bad line and how to recover)."""
    path = Path(run_path) / "episodes.jsonl"
    try:
        if not path.is_file():
            raise RunDirError(f"no episodes.jsonl in {str(run_path)!r}: not a run directory")
        records, problems = read_episodes(path)
    except OSError as exc:  # a name too long for the file system, a folder that cannot be read
        raise RunDirError(f"cannot read {str(run_path)!r}: {exc.strerror or exc}") from None
    if problems:
        raise RunDirError(describe_problems(path, problems, repairable=False))
    return records


def record_trace(run_path: str | Path, record: EpisodeRecord, trace: str | None = None) -> Path:
    """The trace file a record names (or `trace`, one of its attempts'), which must lie inside its run directory
    (PathEscapeError otherwise)."""
    name = trace if trace is not None else record.trace
    if not isinstance(name, str):
        raise RunDirError(f"{run_path}: episode {record.key!r} names no trace file")
    return confined(run_path, name, what=f"trace of episode {record.key!r}")
