"""The playbook: recovery lessons kept in SQLite and retrieved by Sentry's rules.

A lesson says, for one failure type and its labels, when it applies (`trigger`) and what
to do (`principle`), where it came from (`provenance`) and how it has fared (counters
`retrieved`, `verified`, `helped`). Several processes may add lessons to one playbook at
once: the file is in WAL mode and every write is one short transaction, retried when the
database is busy. Every add, import, outcome, merge, prune and discard appends a row to the
change log, so a playbook's growth can be audited (`Playbook.changes`).

Exactly once across kills and resumes: what an episode writes is keyed by its provenance
(run, episode, attempt, step). A lesson stored again under the same provenance returns the
stored one (`lesson_origins`); a counter update under a provenance counts once per lesson
(`lesson_uses`: one row per (provenance, lesson, kind), counters raised only when the row is
new). Before an unfinished episode is played again, `discard_episodes` removes the lessons it
stored and takes back the counter updates it made, so the replay starts from the playbook an
uninterrupted run would have had and may take another path.

Retrieval (`Playbook.retrieve`) follows Sentry: candidates are the lessons of the same
failure type that share at least one label with the failure; they are ranked by the number
of shared labels, then by recency (newer `created_at`, then higher id); a diversity cap
takes at most one lesson per (subtype, trigger) until no other candidate is left (then
such repeats fill up, in rank order); at most k are returned; when no lesson of the type
shares a label, the most recent lessons of the type are returned instead (ranked and capped
the same way). Other retrieval modes exist for
ablations (`RETRIEVAL_MODES`): by type only, over any type, or at random.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import random
import re
import sqlite3
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from playground.api import default_labels
from playground.core.labels import LabelRegistry
from playground.plugins.playbook.io import (
    ImportReport,
    PlaybookError,
    PlaybookImportError,
    label_key,
    lesson_problems,
    normalized,
    read_ace,
    read_jsonl,
    write_ace,
    write_jsonl,
)

__all__ = ["Change", "ImportReport", "Lesson", "Playbook", "PlaybookError", "PlaybookImportError", "Retrieved",
           "discard_episodes", "playbook_problem"]

FORMAT = "playground-playbook"
SCHEMA_VERSION = 1
PAGE = 1_000  # rows per read when iterating over a whole playbook
REPEATS_CHECK = 128  # rows retrieval reads at one overlap level before it looks up the unseen triggers
GROUPS_CHECK_LIMIT = 1_000  # ... provided the level has at most this many distinct (subtype, trigger)
RETRIEVAL_MODES = ("labels", "type", "any", "random")  # `Playbook.retrieve(mode=...)`; all but "labels" are ablations

SCHEMA = [
    "CREATE TABLE playbook_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # AUTOINCREMENT: ids are never reused, so the change log and the id tiebreak stay meaningful.
    """CREATE TABLE lessons (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        failure_type TEXT NOT NULL,
        label_key TEXT NOT NULL,          -- labels, sorted and comma-joined
        subtype TEXT NOT NULL,
        trigger_pattern TEXT NOT NULL,
        principle TEXT NOT NULL,
        provenance TEXT NOT NULL,         -- JSON object
        created_at REAL NOT NULL,
        retrieved INTEGER NOT NULL DEFAULT 0,
        verified INTEGER NOT NULL DEFAULT 0,
        helped INTEGER NOT NULL DEFAULT 0,
        trigger_group INTEGER NOT NULL)  -- 64-bit hash of (subtype, trigger): the diversity cap's unit""",
    "CREATE INDEX lessons_by_labels ON lessons (failure_type, label_key, created_at DESC, id DESC)",
    "CREATE INDEX lessons_by_group ON lessons (failure_type, label_key, trigger_group, created_at DESC, id DESC)",
    # The distinct label sets of each type (few), kept up to date by the triggers below.
    """CREATE TABLE label_keys (
        failure_type TEXT NOT NULL, label_key TEXT NOT NULL, lessons INTEGER NOT NULL,
        PRIMARY KEY (failure_type, label_key)) WITHOUT ROWID""",
    """CREATE TRIGGER lessons_added AFTER INSERT ON lessons BEGIN
        INSERT INTO label_keys (failure_type, label_key, lessons) VALUES (new.failure_type, new.label_key, 1)
            ON CONFLICT (failure_type, label_key) DO UPDATE SET lessons = lessons + 1;
    END""",
    """CREATE TRIGGER lessons_removed AFTER DELETE ON lessons BEGIN
        UPDATE label_keys SET lessons = lessons - 1
            WHERE failure_type = old.failure_type AND label_key = old.label_key;
        DELETE FROM label_keys
            WHERE failure_type = old.failure_type AND label_key = old.label_key AND lessons <= 0;
    END""",
    """CREATE TABLE changes (
        id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, op TEXT NOT NULL,
        lesson_id INTEGER, details TEXT NOT NULL)""",
]

# Exactly-once lessons: the lesson each provenance (run, episode, attempt, step) stored. A
# replayed episode (its process killed after storing a lesson but before the episode was
# recorded) adds the same lesson again; `add` then returns the stored id instead.
# Added to older playbooks when they are opened for writing (no schema version change).
ORIGINS_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS lesson_origins (
        run TEXT NOT NULL, episode TEXT NOT NULL, attempt TEXT NOT NULL, step TEXT NOT NULL,
        lesson_id INTEGER NOT NULL,
        PRIMARY KEY (run, episode, attempt, step)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS lesson_origins_by_lesson ON lesson_origins (lesson_id)",
    """CREATE TRIGGER IF NOT EXISTS lessons_forget_origin AFTER DELETE ON lessons BEGIN
        DELETE FROM lesson_origins WHERE lesson_id = old.id;
    END""",
]
ORIGIN_KEYS = ("run", "episode", "attempt", "step")
# Exactly-once counters: each counter update an episode made, keyed by its provenance, the lesson and the kind
# of update ("retrieved" or "outcome"), with what it added; counters are raised only when the row is new, and
# `discard_episodes` takes back what the rows of an unfinished episode added.
USES_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS lesson_uses (
        run TEXT NOT NULL, episode TEXT NOT NULL, attempt TEXT NOT NULL, step TEXT NOT NULL,
        lesson_id INTEGER NOT NULL, kind TEXT NOT NULL,
        retrieved INTEGER NOT NULL DEFAULT 0, verified INTEGER NOT NULL DEFAULT 0, helped INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run, episode, attempt, step, lesson_id, kind)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS lesson_uses_by_lesson ON lesson_uses (lesson_id)",
    """CREATE TRIGGER IF NOT EXISTS lessons_forget_uses AFTER DELETE ON lessons BEGIN
        DELETE FROM lesson_uses WHERE lesson_id = old.id;
    END""",
]
KEYED_TABLES = ("lesson_origins", "lesson_uses")  # added to older playbooks when opened for writing

COLUMNS = ("id, failure_type, label_key, subtype, trigger_pattern, principle, provenance, "
           "created_at, retrieved, verified, helped, trigger_group")
ID, PROVENANCE, CREATED_AT, GROUP = 0, 6, 7, 11  # positions in a row of COLUMNS
NEWEST = (f"SELECT {COLUMNS} FROM lessons WHERE failure_type = ? AND label_key = ? "
          "ORDER BY created_at DESC, id DESC LIMIT ?")
NEWEST_BEFORE = (f"SELECT {COLUMNS} FROM lessons WHERE failure_type = ? AND label_key = ? "
                 "AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?")
NEWEST_OF_GROUP = (f"SELECT {COLUMNS} FROM lessons WHERE failure_type = ? AND label_key = ? AND trigger_group = ? "
                   "ORDER BY created_at DESC, id DESC LIMIT 1")
GROUPS_OF_KEY = """WITH RECURSIVE groups (trigger_group) AS (
        SELECT MIN(trigger_group) FROM lessons WHERE failure_type = :type AND label_key = :key
        UNION ALL
        SELECT (SELECT MIN(trigger_group) FROM lessons WHERE failure_type = :type AND label_key = :key
                AND trigger_group > groups.trigger_group)
        FROM groups WHERE groups.trigger_group IS NOT NULL LIMIT :limit)
    SELECT trigger_group FROM groups WHERE trigger_group IS NOT NULL"""
MOVE_USES = """INSERT INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, retrieved, verified, helped)
    SELECT run, episode, attempt, step, ?, kind, retrieved, verified, helped FROM lesson_uses WHERE lesson_id = ?
    ON CONFLICT (run, episode, attempt, step, lesson_id, kind) DO UPDATE SET retrieved = retrieved + excluded.retrieved,
        verified = verified + excluded.verified, helped = helped + excluded.helped"""
INSERT = ("INSERT INTO lessons (failure_type, label_key, subtype, trigger_pattern, principle, provenance, "
          "created_at, retrieved, verified, helped, trigger_group) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


@dataclass(frozen=True)
class Lesson:
    """One recovery lesson as stored in a playbook."""

    id: int
    failure_type: str
    labels: tuple[str, ...]
    subtype: str
    trigger: str
    principle: str
    provenance: dict[str, Any] = field(default_factory=dict, hash=False)
    created_at: float = 0.0
    retrieved: int = 0
    verified: int = 0
    helped: int = 0

    def to_dict(self) -> dict:
        """Return the lesson as a JSON-ready record (the form of one exported JSONL line)."""
        return {"id": self.id, "failure_type": self.failure_type, "labels": list(self.labels),
                "subtype": self.subtype, "trigger": self.trigger, "principle": self.principle,
                "provenance": self.provenance, "created_at": self.created_at,
                "retrieved": self.retrieved, "verified": self.verified, "helped": self.helped}


@dataclass(frozen=True)
class Retrieved:
    """A lesson picked by `Playbook.retrieve`, the query labels it shares, and why it was picked."""

    lesson: Lesson
    shared_labels: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Change:
    """One row of a playbook's append-only change log."""

    id: int
    at: float
    op: str  # "add", "import", "outcome", "merge", "prune" or "discard"
    lesson_id: int | None
    details: dict[str, Any]


class Playbook:
    """A playbook file of lessons: add, retrieve, count outcomes, merge, prune, import and export.

    `Playbook(path)` opens the file, creating it (and its folders) when missing; it raises
    PlaybookError, leaving the file as it was, for a corrupt file, an SQLite database that is
    not a playbook, or a playbook of a newer schema. `read_only=True` opens an existing
    playbook (e.g. a shipped one, in a folder that cannot be written) for retrieval and
    inspection: every change raises PlaybookError and retrieval counters are not kept.
    Use one Playbook per process (or thread); processes share lessons only through the
    file. Also a context manager that closes it. Failure types and labels are checked
    against `labels`, by default the process-wide host's registry.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0, read_only: bool = False,
                 labels: LabelRegistry | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self._labels = labels
        self._busy_timeout_s = busy_timeout_s
        _check_is_playbook_or_new(self.path)
        if read_only:
            self._db = self._open_read_only()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            _create_complete(self.path)
        try:
            self._db = sqlite3.connect(self.path, timeout=min(busy_timeout_s, 5.0), isolation_level=None)
        except sqlite3.Error as error:
            raise PlaybookError(f"{self.path}: cannot open: {error}") from error
        try:
            self._retrying(self._set_up)
        except BaseException:
            self._db.close()
            raise

    def _open_read_only(self) -> sqlite3.Connection:
        """Open an existing playbook without writing anything, even in a read-only folder."""
        if not self.path.is_file():
            raise PlaybookError(f"{self.path}: no playbook to open read-only")
        uri = self.path.resolve().as_uri()
        db = None
        # mode=ro reads a live playbook; immutable=1 also opens one in a folder we cannot write
        # (SQLite's WAL mode wants to create its -shm file next to it).
        for options in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(f"{uri}?{options}", uri=True, timeout=min(self._busy_timeout_s, 5.0),
                                     isolation_level=None)
                names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
                break
            except sqlite3.Error as error:
                if db is not None:
                    db.close()
                db, last = None, error
        if db is None:
            raise PlaybookError(f"{self.path}: cannot open read-only: {last}")
        if "playbook_meta" not in names:
            db.close()
            raise PlaybookError(f"{self.path}: not a playbook")
        return db

    def __repr__(self) -> str:
        return f"Playbook({str(self.path)!r})"

    @property
    def labels(self) -> LabelRegistry:
        """The failure types and labels lessons are checked against."""
        return self._labels if self._labels is not None else default_labels()

    def __enter__(self) -> Playbook:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __len__(self) -> int:
        return self._read(lambda db: db.execute("SELECT COUNT(*) FROM lessons").fetchone()[0])

    def close(self) -> None:
        """Close the file; further calls fail."""
        self._db.close()

    # ---- adding -------------------------------------------------------------------------

    def add(self, failure_type: str, labels: Iterable[str], trigger: str, principle: str, subtype: str = "",
            provenance: dict[str, Any] | None = None, created_at: float | None = None) -> int:
        """Store one lesson and return its id.

        Raises UnknownFailure for a failure type or label outside the taxonomy, and ValueError
        for an empty trigger or principle, no labels, more than 16 labels or a text that is too long.
        """
        record = _checked({"failure_type": failure_type, "labels": _as_list(labels), "trigger": trigger,
                           "principle": principle, "subtype": subtype, "provenance": provenance or {},
                           "created_at": created_at}, self.labels)
        return self._write(lambda db: self._insert_once(db, record))

    def add_many(self, records: Iterable[dict]) -> list[int]:
        """Store many lesson records (dicts with `add`'s arguments as keys) in one transaction and
        return their ids; nothing is stored when any record is invalid (ValueError naming it)."""
        checked = []
        for number, record in enumerate(records):
            try:
                checked.append(_checked({**record, "labels": _as_list(record.get("labels", []))}, self.labels))
            except ValueError as error:
                raise type(error)(f"record {number}: {error}") from error
        return self._write(lambda db: [self._insert_once(db, record) for record in checked])

    def import_jsonl(self, path: str | Path) -> ImportReport:
        """Add every lesson of a JSONL file (as written by `export_jsonl`), all or nothing.

        Every line is checked first; any bad line raises PlaybookImportError naming the file and
        the line numbers, and the playbook is left untouched.
        """
        records = read_jsonl(path, self.labels)
        return self._import(path, records, "jsonl")

    def import_ace(self, path: str | Path, *, strict: bool = False) -> ImportReport:
        """Add every bullet of an ACE playbook text file as a "procedure" lesson.

        See `playground.plugins.playbook.io.read_ace` for how bullets map to lessons. Lines that do not
        parse are skipped, as ACE skips them, and listed in the report's `skipped`; with `strict` they
        raise PlaybookImportError naming the file and the line numbers, and nothing is imported.
        """
        skipped: list[str] = []
        records = read_ace(path, self.labels, strict=strict, skipped=skipped)
        return self._import(path, records, "ace", tuple(skipped))

    def _import(self, path: str | Path, records: list[dict], kind: str,
                skipped: tuple[str, ...] = ()) -> ImportReport:
        already: list[int] = []

        def insert_all(db: sqlite3.Connection) -> list[int]:
            already.clear()
            ids = []
            for record in records:  # a lesson the playbook already holds (same text and provenance) is not added again
                same = db.execute(
                    "SELECT id FROM lessons WHERE failure_type = ? AND label_key = ? AND subtype = ? AND "
                    "trigger_pattern = ? AND principle = ? AND provenance = ? LIMIT 1",
                    (record["failure_type"], label_key(record["labels"]), record["subtype"], record["trigger"],
                     record["principle"], json.dumps(record["provenance"], ensure_ascii=False, default=str))
                ).fetchone()
                if same is not None:
                    already.append(record["line"])
                    continue
                ids.append(self._insert(db, record, "import", {"source": str(path), "format": kind,
                                                                "line": record["line"],
                                                                "source_id": record.get("source_id")}))
            return ids
        ids = self._write(insert_all)
        return ImportReport(str(path), len(ids), ids[0] if ids else None, ids[-1] if ids else None, skipped,
                            len(already))

    def _insert_once(self, db: sqlite3.Connection, record: dict) -> int:
        """Insert a lesson unless its provenance (run, episode, attempt, step) already stored one; return the id."""
        origin = origin_key(record["provenance"])
        if origin is not None:
            found = db.execute("SELECT lesson_id FROM lesson_origins WHERE run = ? AND episode = ? AND attempt = ? "
                               "AND step = ?", origin).fetchone()
            if found is not None:
                return found[0]
        lesson_id = self._insert(db, record, "add", {})
        if origin is not None:
            db.execute("INSERT INTO lesson_origins (run, episode, attempt, step, lesson_id) VALUES (?, ?, ?, ?, ?)",
                       (*origin, lesson_id))
        return lesson_id

    def _insert(self, db: sqlite3.Connection, record: dict, op: str, details: dict) -> int:
        lesson_id = db.execute(INSERT, (
            record["failure_type"], label_key(record["labels"]), record["subtype"], record["trigger"],
            record["principle"], json.dumps(record["provenance"], ensure_ascii=False, default=str),
            record["created_at"], record["retrieved"], record["verified"], record["helped"],
            trigger_group(record["subtype"], record["trigger"]))).lastrowid
        assert lesson_id is not None  # set by an INSERT
        _log(db, op, lesson_id, {"failure_type": record["failure_type"], "labels": list(record["labels"]), **details})
        return lesson_id

    # ---- retrieving ---------------------------------------------------------------------

    def retrieve(self, failure_type: str, labels: Iterable[str], k: int = 5, count: bool = True, *,
                 mode: str = "labels", rng: random.Random | None = None,
                 origin: dict[str, Any] | None = None) -> list[Retrieved]:
        """Return at most k lessons for a detected failure, by Sentry's rules (see the module doc).

        Lessons come in rank order: first those picked under the diversity cap, then any
        (subtype, trigger) repeats used to fill up to k. With `count`, each returned lesson's
        `retrieved` counter goes up by one (the returned lessons show the counters from before).
        `mode` (`RETRIEVAL_MODES`, for ablations): "labels" is Sentry's rule; "type" ranks the
        lessons of the failure type by recency alone, ignoring labels; "any" does the same over
        every type; "random" draws k lessons of any type uniformly with `rng`. `origin` is the
        provenance of the retrieval (run, episode, attempt, step; see `record_retrieved`).
        """
        labels = _as_list(labels)
        self.labels.check(failure_type, labels)
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"retrieval mode must be one of {', '.join(RETRIEVAL_MODES)}, got {mode!r}")
        if k <= 0:
            return []
        if mode == "labels":
            picked = self._read(lambda db: _pick(db, failure_type, set(labels), k))
        elif mode == "type":
            picked = self._read(lambda db: _pick(db, failure_type, set(), k, reason="type only: most recent of type"))
        elif mode == "any":
            picked = self._read(lambda db: _pick_any(db, set(labels), k))
        else:
            picked = self._read(lambda db: _pick_random(db, set(labels), k, rng or random.Random()))
        if count and picked:
            self.record_retrieved([item.lesson.id for item in picked], origin=origin)
        return picked

    def record_retrieved(self, lesson_ids: Iterable[int], origin: dict[str, Any] | None = None) -> None:
        """Count one retrieval for each lesson id (ids no longer in the playbook are ignored).

        With an `origin` (a provenance with run, episode and step, and optionally attempt), a
        lesson's retrieval under that origin counts once however often it is recorded (a replayed
        episode), and `discard_episodes` can take it back. A read-only playbook counts nothing
        (retrieval counters are bookkeeping, not content).
        """
        if self.read_only:
            return
        ids, key = list(lesson_ids), origin_key(origin or {})

        def update(db: sqlite3.Connection) -> None:
            for lesson_id in ids:
                if _first_use(db, key, lesson_id, "retrieved", (1, 0, 0)):
                    db.execute("UPDATE lessons SET retrieved = retrieved + 1 WHERE id = ?", (lesson_id,))
        self._write(update)

    def record_outcome(self, lesson_id: int, verified: bool, helped: bool,
                       origin: dict[str, Any] | None = None) -> None:
        """Count how a retrieved lesson fared: its recovery was verified, and/or it helped.

        With an `origin` (the provenance of the repair that used the lesson), the outcome counts
        once per lesson and origin, as in `record_retrieved`. Raises KeyError when there is no
        lesson with that id.
        """
        key, added = origin_key(origin or {}), (0, int(bool(verified)), int(bool(helped)))

        def update(db: sqlite3.Connection) -> None:
            if db.execute("SELECT 1 FROM lessons WHERE id = ?", (lesson_id,)).fetchone() is None:
                raise KeyError(f"no lesson {lesson_id} in {self.path}")
            if not _first_use(db, key, lesson_id, "outcome", added):
                return  # counted before, under the same origin
            db.execute("UPDATE lessons SET verified = verified + ?, helped = helped + ? WHERE id = ?",
                       (added[1], added[2], lesson_id))
            _log(db, "outcome", lesson_id, {"verified": bool(verified), "helped": bool(helped),
                                            **({"origin": dict(zip(ORIGIN_KEYS, key))} if key else {})})
        self._write(update)

    def discard_episodes(self, run_id: str, episode_ids: Iterable[str]) -> tuple[int, int]:
        """Take back what unfinished plays of these episodes of run `run_id` wrote; return (lessons removed,
        counter updates taken back).

        Removes every lesson stored with the provenance of one of the episodes (any attempt and
        step) and subtracts every counter update recorded under such a provenance. Writes
        without a provenance, and those of other runs or episodes, are left alone. A lesson that
        another episode has used meanwhile (retrieved, verified, helped) is kept, with its origin,
        so a replay that stores it again finds it; the change log records that (a "replay_kept"
        row). The change log keeps a "discard" row for each removed lesson (with its full record)
        and for each episode whose counter updates were taken back. Idempotent.
        """
        episodes = [str(episode) for episode in episode_ids]
        run = _origin_part(run_id)

        def apply(db: sqlite3.Connection) -> tuple[int, int]:
            removed = undone = 0
            for episode_id in episodes:  # first every discarded episode's counter updates: their uses do not count
                episode = _origin_part(episode_id)
                uses = db.execute("SELECT lesson_id, retrieved, verified, helped FROM lesson_uses "
                                  "WHERE run = ? AND episode = ?", (run, episode)).fetchall()
                for lesson_id, retrieved, verified, helped in uses:
                    db.execute("UPDATE lessons SET retrieved = MAX(retrieved - ?, 0), verified = MAX(verified - ?, 0), "
                               "helped = MAX(helped - ?, 0) WHERE id = ?", (retrieved, verified, helped, lesson_id))
                db.execute("DELETE FROM lesson_uses WHERE run = ? AND episode = ?", (run, episode))
                if uses:
                    _log(db, "discard", None, {"run": run_id, "episode": episode_id, "counter_updates": len(uses)})
                undone += len(uses)
            for episode_id in episodes:  # then the lessons they stored
                episode = _origin_part(episode_id)
                for attempt, step, lesson_id in db.execute(
                        "SELECT attempt, step, lesson_id FROM lesson_origins WHERE run = ? AND episode = ?",
                        (run, episode)).fetchall():
                    row = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone()
                    # a lesson merged into another moved its origin there: the kept lesson is not this episode's
                    if row is None or origin_key(json.loads(row[PROVENANCE])) != (run, episode, attempt, step):
                        db.execute("DELETE FROM lesson_origins WHERE run = ? AND episode = ? AND attempt = ? "
                                   "AND step = ?", (run, episode, attempt, step))
                        continue
                    users = db.execute("SELECT COUNT(DISTINCT run || ' ' || episode) FROM lesson_uses "
                                       "WHERE lesson_id = ?", (lesson_id,)).fetchone()[0]
                    if users:
                        _log(db, "replay_kept", lesson_id, {"run": run_id, "episode": episode_id,
                                                            "used_by_episodes": users})
                        continue
                    db.execute("DELETE FROM lessons WHERE id = ?", (lesson_id,))  # its origin goes with it
                    _log(db, "discard", lesson_id, {"run": run_id, "episode": episode_id,
                                                    "lesson": _lesson(row).to_dict()})
                    removed += 1
            return removed, undone

        return self._write(apply)

    def has_episode_writes(self, run_id: str, episode_ids: Iterable[str]) -> bool:
        """True when one of these episodes of run `run_id` stored a lesson or a counter update here
        (what `discard_episodes` would take back); reads only."""
        keys = [(_origin_part(run_id), _origin_part(episode)) for episode in episode_ids]

        def read(db: sqlite3.Connection) -> bool:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return any(db.execute(f"SELECT 1 FROM {table} WHERE run = ? AND episode = ? LIMIT 1", key).fetchone()
                       for table in KEYED_TABLES if table in tables for key in keys)
        return self._read(read)

    # ---- reading ------------------------------------------------------------------------

    def get(self, lesson_id: int) -> Lesson | None:
        """Return the lesson with this id, or None."""
        row = self._read(lambda db: db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone())
        return _lesson(row) if row else None

    def all(self) -> Iterator[Lesson]:
        """Yield every lesson, oldest id first."""
        for row in self._pages(f"SELECT {COLUMNS} FROM lessons WHERE id > ? ORDER BY id LIMIT ?"):
            yield _lesson(row)

    def changes(self, lesson_id: int | None = None) -> Iterator[Change]:
        """Yield the change log in order (only the rows about one lesson when `lesson_id` is given)."""
        for row in self._pages("SELECT id, at, op, lesson_id, details FROM changes WHERE id > ? ORDER BY id LIMIT ?"):
            if lesson_id is None or row[3] == lesson_id:
                yield Change(row[0], row[1], row[2], row[3], json.loads(row[4]))

    def stats(self) -> dict[str, Any]:
        """Return counts: lessons in all, per failure type, per label of each type, counter totals, log rows."""
        def read(db: sqlite3.Connection) -> dict[str, Any]:
            by_type: dict[str, int] = defaultdict(int)
            by_label: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            for failure_type, key, lessons in db.execute("SELECT failure_type, label_key, lessons FROM label_keys"):
                by_type[failure_type] += lessons
                for label in key.split(","):
                    by_label[failure_type][label] += lessons
            count, retrieved, verified, helped = db.execute(
                "SELECT COUNT(*), TOTAL(retrieved), TOTAL(verified), TOTAL(helped) FROM lessons").fetchone()
            return {"path": str(self.path), "count": count, "by_type": dict(sorted(by_type.items())),
                    "by_label": {t: dict(sorted(by_label[t].items())) for t in sorted(by_label)},
                    "counters": {"retrieved": int(retrieved), "verified": int(verified), "helped": int(helped)},
                    "changes": db.execute("SELECT COUNT(*) FROM changes").fetchone()[0]}
        return self._read(read)

    def export_jsonl(self, path: str | Path) -> int:
        """Write every lesson to a JSONL file (one consistent snapshot, replaced whole) and return the count."""
        def export(db: sqlite3.Connection) -> int:
            rows = db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY id")
            return write_jsonl(path, (_lesson(row).to_dict() for row in rows))
        return self._read(export)

    def export_ace(self, path: str | Path) -> int:
        """Write every lesson to an ACE playbook text file (`io.write_ace`; replaced whole) and return the count."""
        def export(db: sqlite3.Connection) -> int:
            rows = db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY id").fetchall()
            return write_ace(path, (_lesson(row).to_dict() for row in rows))
        return self._read(export)

    def copy_to(self, path: str | Path) -> Path:
        """Write a consistent copy of the whole playbook (lessons, counters, change log) to a new file `path`.

        The copy is made beside `path` and renamed into place once complete, so `path` is either
        absent or a whole playbook. PlaybookError if `path` (or a side file of it) already exists.
        """
        target = Path(path)
        for existing in (target, *(target.with_name(target.name + s) for s in ("-wal", "-shm", "-journal"))):
            if existing.exists():
                raise PlaybookError(f"{existing}: already exists; a playbook copy is only made to a new file")
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(handle)
        try:
            copy = sqlite3.connect(temporary)
            try:
                self._retrying(lambda: self._db.backup(copy))
            finally:
                copy.close()
            os.chmod(temporary, self.path.stat().st_mode & 0o777)  # mkstemp makes it private; keep the source's mode
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return target

    # ---- maintenance --------------------------------------------------------------------

    def merge_plan(self, similarity: float = 0.9) -> list[tuple[int, int, float]]:
        """What `merge` would do, changing nothing: (lesson id merged away, lesson id kept, text similarity)."""
        if not 0.0 < similarity <= 1.0:
            raise ValueError(f"similarity must be in (0, 1], not {similarity}")
        return _merge_plan(self._pages(
            "SELECT id, failure_type, label_key, created_at, trigger_pattern, principle FROM lessons "
            "WHERE id > ? ORDER BY id LIMIT ?"), similarity)

    def merge(self, similarity: float = 0.9) -> int:
        """Merge near-duplicate lessons and return how many were removed.

        Two lessons are near-duplicates when they have the same failure type and labels and their
        texts (trigger and principle, lower-cased, whitespace collapsed) have a
        `difflib.SequenceMatcher` ratio >= `similarity`. Going from the oldest lesson of each
        label set, a lesson is merged into the first older kept lesson it is similar to: the kept
        one gains its counters and it is deleted (the change log keeps its full record).
        """
        plan = self.merge_plan(similarity)

        def apply(db: sqlite3.Connection) -> int:
            removed = 0
            for duplicate, keep, ratio in plan:
                row = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (duplicate,)).fetchone()
                if row is None or db.execute("SELECT 1 FROM lessons WHERE id = ?", (keep,)).fetchone() is None:
                    continue  # removed meanwhile by another process
                lesson = _lesson(row)
                db.execute("UPDATE lessons SET retrieved = retrieved + ?, verified = verified + ?, "
                           "helped = helped + ? WHERE id = ?", (lesson.retrieved, lesson.verified, lesson.helped, keep))
                db.execute("UPDATE lesson_origins SET lesson_id = ? WHERE lesson_id = ?", (keep, duplicate))
                db.execute(MOVE_USES, (keep, duplicate))  # the kept lesson now holds what they counted
                db.execute("DELETE FROM lessons WHERE id = ?", (duplicate,))
                _log(db, "merge", duplicate, {"into": keep, "similarity": round(ratio, 4), "lesson": lesson.to_dict()})
                removed += 1
            return removed
        return self._write(apply)

    def prune(self, max_age_days: float | None = None, min_helped: int | None = None,
              max_count: int | None = None) -> int:
        """Remove lessons and return how many were removed.

        With `max_age_days` and/or `min_helped`, removes each lesson that is older than
        `max_age_days` AND has helped fewer than `min_helped` times (a filter not given does
        not restrict; with neither given, this step removes nothing). Then, with `max_count`,
        removes the least helpful lessons (oldest first among equals) until at most
        `max_count` remain. The change log keeps each removed lesson's full record.
        """
        for name, value in (("max_age_days", max_age_days), ("min_helped", min_helped), ("max_count", max_count)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, not {value}")
        conditions, params = [], []
        if max_age_days is not None:
            conditions.append("created_at < ?")
            params.append(time.time() - max_age_days * 86_400)
        if min_helped is not None:
            conditions.append("helped < ?")
            params.append(min_helped)

        def delete(db: sqlite3.Connection, rows: list[tuple], reason: dict) -> int:
            for row in rows:
                db.execute("DELETE FROM lessons WHERE id = ?", (row[ID],))
                _log(db, "prune", row[ID], {**reason, "lesson": _lesson(row).to_dict()})
            return len(rows)

        def apply(db: sqlite3.Connection) -> int:
            removed = 0
            if conditions:
                rows = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE {' AND '.join(conditions)}", params).fetchall()
                removed += delete(db, rows, {"max_age_days": max_age_days, "min_helped": min_helped})
            if max_count is not None:
                excess = db.execute("SELECT COUNT(*) FROM lessons").fetchone()[0] - max_count
                if excess > 0:
                    rows = db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY helped, created_at, id LIMIT ?",
                                      (excess,)).fetchall()
                    removed += delete(db, rows, {"max_count": max_count})
            return removed
        return self._write(apply)

    # ---- transactions -------------------------------------------------------------------

    def _set_up(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")

        def create(db: sqlite3.Connection) -> None:
            names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
            if "playbook_meta" in names:
                if not set(KEYED_TABLES) <= names:
                    for statement in ORIGINS_SCHEMA + USES_SCHEMA:
                        db.execute(statement)
                return
            if names:
                raise PlaybookError(f"{self.path}: an SQLite database but not a playbook "
                                    f"(has {', '.join(sorted(names))})")
            _create_schema(db)  # an empty file (left by an older version, or made by hand) becomes a playbook
        self._write(create)

    def _write(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `work` in one write transaction, retried from the start while the file is busy."""
        if self.read_only:
            raise PlaybookError(f"{self.path}: opened read-only; it cannot be changed")
        def attempt() -> Any:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._db)
                self._db.execute("COMMIT")
                return result
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        return self._retrying(attempt)

    def _read(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `work` in one read transaction (a consistent snapshot), retried while the file is busy."""
        def attempt() -> Any:
            self._db.execute("BEGIN")
            try:
                return work(self._db)
            finally:
                if self._db.in_transaction:
                    self._db.execute("COMMIT")
        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[], Any]) -> Any:
        delay, deadline = 0.002, time.monotonic() + self._busy_timeout_s
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise PlaybookError(f"{self.path}: {error}") from error
                if time.monotonic() > deadline:
                    raise PlaybookError(f"{self.path}: still busy after {self._busy_timeout_s:.0f} s: {error}") \
                        from error
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.25)
            except sqlite3.DatabaseError as error:
                raise PlaybookError(f"{self.path}: {error}") from error

    def _pages(self, query: str) -> Iterator[tuple]:
        """Yield the rows of a keyset-paged query (`... WHERE id > ? ... LIMIT ?`), one short read per page."""
        last = 0
        while True:
            rows = self._read(lambda db: db.execute(query, (last, PAGE)).fetchall())  # noqa: B023 (called at once)
            yield from rows
            if len(rows) < PAGE:
                return
            last = rows[-1][0]


# ---- retrieval ----------------------------------------------------------------------------

def _pick(db: sqlite3.Connection, failure_type: str, query: set[str], k: int,
          reason: str = "fallback: most recent of type") -> list[Retrieved]:
    """Return the lessons Sentry's rules pick (see the module doc)."""
    by_overlap: dict[int, list[str]] = defaultdict(list)
    for (key,) in db.execute("SELECT label_key FROM label_keys WHERE failure_type = ?", (failure_type,)):
        by_overlap[len(query.intersection(key.split(",")))].append(key)
    levels = sorted((n for n in by_overlap if n > 0), reverse=True) or [0]  # [0]: the fallback
    picked: list[tuple[int, tuple]] = []
    repeats: list[tuple[int, tuple]] = []  # candidates passed over by the diversity cap, in rank order
    seen: set[int] = set()  # trigger groups picked
    for overlap in levels:
        keys = by_overlap[overlap]
        streams = [_newest(db, failure_type, key, k) for key in keys]
        check_at = max(REPEATS_CHECK, 2 * k)
        for scanned, row in enumerate(heapq.merge(*streams, key=_rank), start=1):
            if row[GROUP] in seen:
                repeats.append((overlap, row))
            else:
                seen.add(row[GROUP])
                picked.append((overlap, row))
            if len(picked) == k:
                break
            if scanned == check_at:
                # Mostly repeats so far (and >= k of them kept): rather than read on through them,
                # take the newest lesson of each trigger group of this level not seen yet.
                unseen = _unseen_newest(db, failure_type, keys, seen)
                if unseen is not None:
                    picked += [(overlap, row) for row in unseen[:k - len(picked)]]
                    seen.update(row[GROUP] for row in unseen)
                    break
                check_at *= 2
        if len(picked) == k:
            break
    picked += repeats[:k - len(picked)]
    return [_retrieved(overlap, row, query, reason) for overlap, row in picked]


def _pick_any(db: sqlite3.Connection, query: set[str], k: int) -> list[Retrieved]:
    """Retrieval mode "any": the most recent lessons of every type, under the same diversity cap."""
    picked: list[tuple] = []
    repeats: list[tuple] = []
    seen: set[int] = set()
    for row in db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY created_at DESC, id DESC"):
        (repeats if row[GROUP] in seen else picked).append(row)
        seen.add(row[GROUP])
        if len(picked) == k or len(repeats) >= k and len(picked) + len(repeats) >= max(REPEATS_CHECK, 2 * k):
            break
    picked += repeats[:k - len(picked)]
    return [_retrieved(0, row, query, "unfiltered: most recent of any type") for row in picked]


def _pick_random(db: sqlite3.Connection, query: set[str], k: int, rng: random.Random) -> list[Retrieved]:
    """Retrieval mode "random": k lessons of any type drawn uniformly."""
    ids = [row[0] for row in db.execute("SELECT id FROM lessons ORDER BY id")]
    chosen = rng.sample(ids, min(k, len(ids)))
    rows = [db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone() for lesson_id in chosen]
    return [_retrieved(0, row, query, "random draw") for row in rows]


def _rank(row: tuple) -> tuple[float, int]:
    return -row[CREATED_AT], -row[ID]


def _unseen_newest(db: sqlite3.Connection, failure_type: str, keys: list[str], seen: set[int]) -> list[tuple] | None:
    """Return the newest lesson of each trigger group not in `seen` among lessons with these label
    sets, in rank order; None when the label sets hold more than GROUPS_CHECK_LIMIT groups."""
    groups: set[tuple[str, int]] = set()
    for key in keys:
        found = db.execute(GROUPS_OF_KEY, {"type": failure_type, "key": key, "limit": GROUPS_CHECK_LIMIT + 1})
        groups.update((key, group) for (group,) in found)
        if len(groups) > GROUPS_CHECK_LIMIT:
            return None
    newest: dict[int, tuple] = {}
    for key, group in groups:
        if group not in seen:
            row = db.execute(NEWEST_OF_GROUP, (failure_type, key, group)).fetchone()
            if group not in newest or _rank(row) < _rank(newest[group]):
                newest[group] = row
    return sorted(newest.values(), key=_rank)


def _newest(db: sqlite3.Connection, failure_type: str, key: str, page: int) -> Iterator[tuple]:
    """Yield the lessons with exactly this label set, newest first, reading larger pages as it goes."""
    rows = db.execute(NEWEST, (failure_type, key, page)).fetchall()
    while True:
        yield from rows
        if len(rows) < page:
            return
        page *= 4
        rows = db.execute(NEWEST_BEFORE, (failure_type, key, rows[-1][CREATED_AT], rows[-1][ID], page)).fetchall()


def _retrieved(overlap: int, row: tuple, query: set[str], fallback: str = "fallback: most recent of type") -> Retrieved:
    lesson = _lesson(row)
    shared = tuple(sorted(query.intersection(lesson.labels)))
    if overlap:
        reason = f"shares {overlap} label{'s' if overlap > 1 else ''}: {', '.join(shared)}"
    else:
        reason = fallback
    return Retrieved(lesson, shared, reason)


# ---- merging ------------------------------------------------------------------------------

def _merge_plan(rows: Iterable[tuple], similarity: float) -> list[tuple[int, int, float]]:
    """Return (duplicate id, id to keep, ratio) for each near-duplicate among (id, type, key, created_at,
    trigger, principle) rows."""
    groups: dict[tuple[str, str], list[tuple[float, int, str]]] = defaultdict(list)
    for lesson_id, failure_type, key, created_at, trigger, principle in rows:
        groups[failure_type, key].append((created_at, lesson_id, _merge_text(trigger, principle)))
    plan = []
    for members in groups.values():
        kept: list[tuple[int, str]] = []
        exact: dict[str, int] = {}
        for _, lesson_id, text in sorted(members):
            if text in exact:
                plan.append((lesson_id, exact[text], 1.0))
                continue
            match = next(((keep, ratio) for keep, other in kept
                          if (ratio := _similarity(text, other, similarity)) >= similarity), None)
            if match:
                plan.append((lesson_id, *match))
            else:
                kept.append((lesson_id, text))
                exact[text] = lesson_id
    return plan


def _merge_text(trigger: str, principle: str) -> str:
    return re.sub(r"\s+", " ", f"{trigger}\n{principle}".lower()).strip()


def _similarity(a: str, b: str, threshold: float) -> float:
    """SequenceMatcher ratio of two texts, or 0.0 as soon as a cheap upper bound is below threshold."""
    if 2 * min(len(a), len(b)) / (len(a) + len(b)) < threshold:
        return 0.0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return 0.0
    return matcher.ratio()


# ---- helpers ------------------------------------------------------------------------------

def _as_list(labels: Iterable[str]) -> list[str] | str:
    """Labels as a list; a lone string stays a string so that the check rejects it."""
    return labels if isinstance(labels, str) else list(labels)


def _checked(record: dict, labels: LabelRegistry) -> dict:
    """Return the normalized record, or raise UnknownFailure / ValueError saying what is wrong."""
    record = {name: value for name, value in record.items() if value is not None}
    problems = lesson_problems(record, taxonomy=False)
    if problems:
        raise ValueError("invalid lesson: " + "; ".join(problems))
    labels.check(record["failure_type"], record["labels"])
    return normalized(record)


def origin_key(provenance: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """The identity of a lesson stored by an episode: (run, episode, attempt, step) from its provenance,
    as text; None unless run, episode and step are all there (`attempt` is optional: "" when missing)."""
    if not all(provenance.get(name) not in (None, "") for name in ("run", "episode", "step")):
        return None
    return tuple(_origin_part(provenance.get(name, "")) for name in ORIGIN_KEYS)  # type: ignore[return-value]


def _origin_part(value: Any) -> str:
    """One part of an origin key as stored: the value as JSON text."""
    return json.dumps(value, sort_keys=True, default=str)


def _first_use(db: sqlite3.Connection, key: tuple[str, str, str, str] | None, lesson_id: int, kind: str,
               added: tuple[int, int, int]) -> bool:
    """True when a counter update of `kind` for the lesson is to be counted: the lesson exists and, for an
    update with an origin `key`, that origin has not counted it before (the update is then recorded with what
    it adds to (retrieved, verified, helped))."""
    if db.execute("SELECT 1 FROM lessons WHERE id = ?", (lesson_id,)).fetchone() is None:
        return False
    if key is None:
        return True
    inserted = db.execute("INSERT OR IGNORE INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, "
                          "retrieved, verified, helped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          (*key, lesson_id, kind, *added)).rowcount
    return inserted == 1


def trigger_group(subtype: str, trigger: str) -> int:
    """Return the 64-bit id of a (subtype, trigger) pair: lessons with the same one are repeats
    for the diversity cap."""
    digest = hashlib.blake2b(f"{subtype}\0{trigger}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _lesson(row: tuple) -> Lesson:
    (lesson_id, failure_type, key, subtype, trigger, principle, provenance, created_at, retrieved, verified,
     helped) = row[:11]
    return Lesson(lesson_id, failure_type, tuple(key.split(",")), subtype, trigger, principle,
                  json.loads(provenance), created_at, retrieved, verified, helped)


def _log(db: sqlite3.Connection, op: str, lesson_id: int | None, details: dict) -> None:
    db.execute("INSERT INTO changes (at, op, lesson_id, details) VALUES (?, ?, ?, ?)",
               (time.time(), op, lesson_id, json.dumps(details, ensure_ascii=False, default=str)))


def _is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(error) or "busy" in str(error)


DAMAGE_REMEDY = ("restore it from a copy, or export what still reads (`playground playbook export`) and import "
                 "that into a new playbook")


def playbook_problem(path: str | Path, *, read_pages: bool = False) -> str | None:
    """Why the file at `path` cannot be used as a playbook, or None when it can (a playbook, or a missing or
    empty file, which becomes a new one). Reads only; never creates or changes the file. With `read_pages` (the
    check before a run, once) every page is read (`PRAGMA quick_check`), so damage past the header is found too;
    opening a playbook, which happens every episode, checks the header and the schema only."""
    path = Path(path)
    if not str(path).strip():
        return "the path is empty"
    if path.is_dir():
        return "is a folder, not a playbook file"
    try:
        if not path.exists() or path.stat().st_size == 0:
            return None
        with open(path, "rb") as handle:
            header = handle.read(16)
    except OSError as error:
        return f"cannot read it ({error.strerror or error})"
    if header != b"SQLite format 3\x00":
        return ("not a playbook: not an SQLite database (corrupt, or another kind of file; a JSONL export is "
                "imported with `playground playbook import NEW.sqlite FILE`)")
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
            meta = dict(db.execute("SELECT key, value FROM playbook_meta")) if "playbook_meta" in names else {}
            damage = [row[0] for row in db.execute("PRAGMA quick_check(3)")] if read_pages else ["ok"]
        finally:
            db.close()
    except sqlite3.Error as error:
        remedy = f"; {DAMAGE_REMEDY}" if isinstance(error, sqlite3.DatabaseError) and "malformed" in str(error) else ""
        return f"not a usable playbook: {error}{remedy}"
    if damage != ["ok"]:
        found = "; ".join(line.strip() for row in damage for line in str(row).splitlines() if line.strip())
        return f"not a usable playbook: its pages are damaged ({found}); {DAMAGE_REMEDY}"
    if not names:
        return None
    if meta.get("format") != FORMAT:
        return f"an SQLite database but not a playbook (has {', '.join(sorted(names)[:5])})"
    version = meta.get("schema_version", "0")
    if not version.isdigit() or int(version) > SCHEMA_VERSION:
        return (f"playbook schema version {version} is newer than this playground understands ({SCHEMA_VERSION}); "
                "upgrade playground")
    return None


def discard_episodes(path: str | Path, run_id: str, episode_ids: Iterable[str]) -> tuple[int, int]:
    """In the playbook file at `path`, take back what unfinished plays of these episodes of run `run_id`
    wrote (`Playbook.discard_episodes`); return (lessons removed, counter updates taken back).

    Opens the file for writing only when it holds such writes: a missing file is not created, and a
    playbook the episodes never wrote to (a shipped one, read-only) is only read.
    """
    path, episodes = Path(path), list(episode_ids)
    if not episodes or not path.is_file() or path.stat().st_size == 0 or _has_no_tables(path):
        return 0, 0  # no playbook yet, or one whose creation was cut off (a kill, a full disk): nothing to take back
    with Playbook(path, read_only=True) as playbook:
        if not playbook.has_episode_writes(run_id, episodes):
            return 0, 0
    with Playbook(path) as playbook:
        return playbook.discard_episodes(run_id, episodes)


def _has_no_tables(path: Path) -> bool:
    """Whether the SQLite file at `path` has no table at all (created, then cut off before its schema was written;
    opening it for writing creates the schema). False for anything that is not such a file."""
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)
        try:
            return db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        finally:
            db.close()
    except sqlite3.Error:
        return False


def _create_schema(db: sqlite3.Connection) -> None:
    """Create a playbook's tables and header in `db` (inside the caller's transaction)."""
    for statement in SCHEMA + ORIGINS_SCHEMA + USES_SCHEMA:
        db.execute(statement)
    db.executemany("INSERT INTO playbook_meta (key, value) VALUES (?, ?)",
                   [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)), ("created_at", str(time.time()))])


def _create_complete(path: Path) -> None:
    """Create a new playbook at `path` complete or not at all: built under a temporary name beside it, then linked
    into place (an atomic step that never replaces a playbook another process made meanwhile). A failure (a full
    disk, a read-only folder) leaves nothing at `path` and raises PlaybookError naming it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.creating")
    try:
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            # A rollback journal, not WAL: the commit writes the tables into the file itself and fails loudly on a
            # full disk. (In WAL mode they would sit in the -wal file until a checkpoint at close, which can fail
            # silently, and only the main file is linked into place.) Opening the playbook turns WAL on.
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute("BEGIN IMMEDIATE")
            _create_schema(db)
            db.execute("COMMIT")
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("the new file does not read back whole")
        finally:
            db.close()
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: theirs stands
        except OSError:  # a file system without hard links: move it, unless one appeared meanwhile
            if not path.exists():
                os.replace(temporary, path)
    except (sqlite3.Error, OSError) as error:
        raise PlaybookError(f"{path}: cannot create the playbook ({error}); nothing was written there") from error
    finally:
        for leftover in (temporary, temporary.with_name(temporary.name + "-wal"),
                         temporary.with_name(temporary.name + "-shm")):
            leftover.unlink(missing_ok=True)


def _check_is_playbook_or_new(path: Path) -> None:
    """Raise PlaybookError, without writing anything, unless `path` is missing, empty or a playbook."""
    problem = playbook_problem(path)
    if problem is not None:
        raise PlaybookError(f"{path}: {problem}")


def content_digest(path: str | Path) -> str | None:
    """A hash of an SQLite file's content through a read-only dump of its tables (the same content gives the same
    hash whatever the page layout or the state of its write-ahead log), or None when it is not a readable SQLite
    file. Creates no -wal/-shm files beside it when it has no pending write-ahead log."""
    file = Path(path)
    if not file.is_file():
        return None
    with open(file, "rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            return None
    wal = file.with_name(file.name + "-wal")
    mode = "mode=ro" if wal.is_file() and wal.stat().st_size else "immutable=1"
    try:
        db = sqlite3.connect(file.resolve().as_uri() + "?" + mode, uri=True)
        try:
            digest = hashlib.sha256()
            for statement in db.iterdump():
                digest.update(statement.encode("utf-8", "surrogatepass") + b"\n")
            return "sqlite:" + digest.hexdigest()
        finally:
            db.close()
    except sqlite3.Error:
        return None
