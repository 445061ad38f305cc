"""The playbook file format: its SQLite tables and lesson rows, creating, migrating and opening a file, and the
read-only checks on one (can it be a playbook, a hash of its content)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.plugins.playbook.io import PlaybookError

FORMAT = "playground-playbook"
SCHEMA_VERSION = 1

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
INSERT = ("INSERT INTO lessons (failure_type, label_key, subtype, trigger_pattern, principle, provenance, "
          "created_at, retrieved, verified, helped, trigger_group) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")

DAMAGE_REMEDY = ("restore it from a copy, or export what still reads (`playground playbook export`) and import "
                 "that into a new playbook")


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


def lesson_from_row(row: tuple) -> Lesson:
    """The Lesson a row of COLUMNS holds."""
    (lesson_id, failure_type, key, subtype, trigger, principle, provenance, created_at, retrieved, verified,
     helped) = row[:11]
    return Lesson(lesson_id, failure_type, tuple(key.split(",")), subtype, trigger, principle,
                  json.loads(provenance), created_at, retrieved, verified, helped)


def trigger_group(subtype: str, trigger: str) -> int:
    """Return the 64-bit id of a (subtype, trigger) pair: lessons with the same one are repeats
    for the diversity cap."""
    digest = hashlib.blake2b(f"{subtype}\0{trigger}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# ---- opening ------------------------------------------------------------------------------

def open_for_writing(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """Connect to the playbook at `path` for writing, creating it (and its folders) when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        create_complete(path)
    try:
        return sqlite3.connect(path, timeout=min(busy_timeout_s, 5.0), isolation_level=None)
    except sqlite3.Error as error:
        raise PlaybookError(f"{path}: cannot open: {error}") from error


def open_read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """Open an existing playbook without writing anything, even in a read-only folder."""
    if not path.is_file():
        raise PlaybookError(f"{path}: no playbook to open read-only")
    uri = path.resolve().as_uri()
    db = None
    # mode=ro reads a live playbook; immutable=1 also opens one in a folder we cannot write
    # (SQLite's WAL mode wants to create its -shm file next to it).
    for options in ("mode=ro", "mode=ro&immutable=1"):
        try:
            db = sqlite3.connect(f"{uri}?{options}", uri=True, timeout=min(busy_timeout_s, 5.0),
                                 isolation_level=None)
            names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            break
        except sqlite3.Error as error:
            if db is not None:
                db.close()
            db, last = None, error
    if db is None:
        raise PlaybookError(f"{path}: cannot open read-only: {last}")
    if "playbook_meta" not in names:
        db.close()
        raise PlaybookError(f"{path}: not a playbook")
    return db


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the file open in `db` up to date (inside the caller's write transaction): add the keyed tables an
    older playbook lacks, or make an empty file a playbook; PlaybookError for another program's database."""
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
    if "playbook_meta" in names:
        if not set(KEYED_TABLES) <= names:
            for statement in ORIGINS_SCHEMA + USES_SCHEMA:
                db.execute(statement)
        return
    if names:
        raise PlaybookError(f"{path}: an SQLite database but not a playbook "
                            f"(has {', '.join(sorted(names))})")
    create_schema(db)  # an empty file (left by an older version, or made by hand) becomes a playbook


def create_schema(db: sqlite3.Connection) -> None:
    """Create a playbook's tables and header in `db` (inside the caller's transaction)."""
    for statement in SCHEMA + ORIGINS_SCHEMA + USES_SCHEMA:
        db.execute(statement)
    db.executemany("INSERT INTO playbook_meta (key, value) VALUES (?, ?)",
                   [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)), ("created_at", str(time.time()))])


def create_complete(path: Path) -> None:
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
            create_schema(db)
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


# ---- checking a file ----------------------------------------------------------------------

def check_is_playbook_or_new(path: Path) -> None:
    """Raise PlaybookError, without writing anything, unless `path` is missing, empty or a playbook."""
    problem = playbook_problem(path)
    if problem is not None:
        raise PlaybookError(f"{path}: {problem}")


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
    return newer_schema(meta)


def newer_schema(meta: dict[str, str]) -> str | None:
    """Why a playbook whose meta table says `meta` is of a schema this playground cannot read (a newer one), or None;
    the same for every backend."""
    version = meta.get("schema_version", "0")
    if not version.isdigit() or int(version) > SCHEMA_VERSION:
        return (f"playbook schema version {version} is newer than this playground understands ({SCHEMA_VERSION}); "
                "upgrade playground")
    return None


def has_no_tables(path: Path) -> bool:
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
