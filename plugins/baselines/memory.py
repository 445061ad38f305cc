"""Where a baseline keeps what it carries between episodes: a file beside a file playbook, or PostgreSQL beside a
PostgreSQL playbook (`memory_for`).

A `Memory` holds JSONL-like records (Reflexion's reflections, AWM's workflows, ReasoningBank's items, ACE's delta
log) or one whole text (ACE's playbook), and a lock that every process of a run (every Ray worker on any machine,
for PostgreSQL) honours while it reads, decides and writes (`locked`). Exactly once, as for files (`store.py`): what
an episode writes carries its key, and `append_once` writes nothing when a record of that key is there already.

- `FileMemory`: the file `store.py` reads and writes, under its `fcntl` lock.
- `PostgresMemory`: the playbook's server and database, in a schema of its own beside the playbook's
  (`<schema>_memory`: a playbook's schema holds the playbook's tables only), table `baseline_records` (one row per
  record, in order, by memory name) and `baseline_texts` (one text per name); the lock is a session advisory lock on
  the memory's name, held on one pooled connection while the block runs. Credentials come from the URL as the
  playbook's do (libpq: the environment, a service file), and nothing of the URL is written.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from playground import EpisodeStart
from playground.host_api import written_under
from playground.plugins.baselines.store import (
    MemoryFileError,
    append_record,
    locked,
    memory_path,
    read_records,
)


class Memory(Protocol):
    """A baseline's memory: records in order, one text, and a lock across processes (see the module docstring)."""

    location: str

    def records(self) -> list[dict]: ...
    def append(self, record: dict) -> None: ...
    def write_records(self, records: list[dict]) -> None: ...
    def locked(self) -> Any: ...
    def read_text(self) -> str: ...
    def write_text(self, text: str) -> None: ...
    def sibling(self, suffix: str) -> Memory: ...


def written_before(memory: Memory, key: Mapping[str, Any]) -> bool:
    """Whether the memory holds a record of `key` (a replayed episode wrote it already); call under its lock."""
    return written_under(memory.records(), key)


def append_once(memory: Memory, key: Mapping[str, Any], records: list[dict]) -> None:
    """Append `records`, each led by `key`'s fields, under the memory's lock, unless a record of `key` is there
    already (a replayed episode wrote them)."""
    with memory.locked():
        if written_before(memory, key):
            return
        for record in records:
            memory.append({**key, **record})


class FileMemory:
    """A memory in a file (`store.py`'s JSONL records, or a whole text), locked with `fcntl`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

    def records(self) -> list[dict]:
        """The file's JSON records ([] when there is no file)."""
        return read_records(self.path)

    def append(self, record: dict) -> None:
        """Append one record (call under `locked()`)."""
        append_record(self.path, record)

    def write_records(self, records: list[dict]) -> None:
        """Replace the file with `records`, whole (atomically)."""
        self.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))

    def locked(self) -> Any:
        """The file's exclusive lock, while the block runs."""
        return locked(self.path)

    def read_text(self) -> str:
        """The file's text ("" when there is none)."""
        return self.path.read_text(encoding="utf-8") if self.path.is_file() else ""

    def write_text(self, text: str) -> None:
        """Replace the file's text whole (atomically)."""
        from playground.host_api import atomic_write_text

        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, text)

    def sibling(self, suffix: str) -> FileMemory:
        """The memory beside this one: the file named with `suffix` added."""
        return FileMemory(self.path.with_name(self.path.name + suffix))


TABLES = ("CREATE TABLE IF NOT EXISTS {s}.baseline_records (seq BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, "
          "record JSONB NOT NULL)",
          "CREATE INDEX IF NOT EXISTS baseline_records_name ON {s}.baseline_records (name, seq)",
          "CREATE TABLE IF NOT EXISTS {s}.baseline_texts (name TEXT PRIMARY KEY, text TEXT NOT NULL)")
_MADE: set[tuple[str, str]] = set()  # (conninfo, schema) whose tables this process made or found: not asked again
_MADE_LOCK = threading.Lock()


class PostgresMemory:
    """A memory in PostgreSQL, beside a PostgreSQL playbook (see the module docstring)."""

    def __init__(self, url: str, name: str) -> None:
        from playground.plugins.playbook.backend import postgres

        pg = postgres()
        self.url, self.name = url, name
        where = pg.Location(url)
        self.pool = pg.pool(where, serializable_alone=False)
        self.schema = pg.quoted(f"{where.schema}_memory")
        self.location = f"{where.shown} ({where.schema}_memory: {name})"
        with _MADE_LOCK:
            if (where.conninfo, self.schema) not in _MADE:  # once per process, not for every episode's memory
                self._make_tables()
                _MADE.add((where.conninfo, self.schema))

    def _make_tables(self) -> None:
        """Make the memory's schema and tables unless they are there (under a lock: processes making them at once
        make them once)."""
        with self.pool.connection() as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"playground-memory:{self.schema}",))
            connection.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            for statement in TABLES:
                connection.execute(statement.format(s=self.schema))

    def records(self) -> list[dict]:
        """The memory's records, in the order they were written."""
        with self.pool.connection() as connection:
            rows = connection.execute(f"SELECT record FROM {self.schema}.baseline_records WHERE name = %s "
                                      "ORDER BY seq", (self.name,)).fetchall()
        return [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in rows]

    def append(self, record: dict) -> None:
        """Append one record (call under `locked()`)."""
        from psycopg.types.json import Jsonb

        with self.pool.connection() as connection:
            connection.execute(f"INSERT INTO {self.schema}.baseline_records (name, record) VALUES (%s, %s)",
                               (self.name, Jsonb(record)))

    def write_records(self, records: list[dict]) -> None:
        """Replace the memory's records with `records`, whole (one transaction)."""
        from psycopg.types.json import Jsonb

        with self.pool.connection() as connection, connection.transaction():
            connection.execute(f"DELETE FROM {self.schema}.baseline_records WHERE name = %s", (self.name,))
            for record in records:
                connection.execute(f"INSERT INTO {self.schema}.baseline_records (name, record) VALUES (%s, %s)",
                                   (self.name, Jsonb(record)))

    @contextmanager
    def locked(self) -> Iterator[None]:
        """A session advisory lock on the memory's name, held on one connection while the block runs."""
        key = f"playground-memory:{self.schema}:{self.name}"
        with self.pool.connection() as connection:
            connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
            try:
                yield
            finally:
                connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def read_text(self) -> str:
        """The memory's text ("" when none was written)."""
        with self.pool.connection() as connection:
            row = connection.execute(f"SELECT text FROM {self.schema}.baseline_texts WHERE name = %s",
                                     (self.name,)).fetchone()
        return row[0] if row else ""

    def write_text(self, text: str) -> None:
        """Replace the memory's text whole."""
        with self.pool.connection() as connection:
            connection.execute(f"INSERT INTO {self.schema}.baseline_texts (name, text) VALUES (%s, %s) "
                               "ON CONFLICT (name) DO UPDATE SET text = EXCLUDED.text", (self.name, text))

    def sibling(self, suffix: str) -> PostgresMemory:
        """The memory beside this one: its name with `suffix` added."""
        return PostgresMemory(self.url, self.name + suffix)


def memory_for(start: EpisodeStart, suffix: str, override: str = "", param: str = "") -> Memory | None:
    """A baseline's memory: the file `override` names if given; else, beside the run's playbook, the file with
    `suffix` (a file playbook) or the records named `suffix` in PostgreSQL (a `postgresql://` playbook); else None
    (no playbook: nothing is carried over). MemoryFileError for a playbook URL of another scheme."""
    if not override and start.playbook and start.playbook.startswith(("postgresql://", "postgres://")):
        return PostgresMemory(start.playbook, suffix)
    path = memory_path(start, suffix, override, param)
    return FileMemory(path) if path is not None else None


# What the baselines keep beside a playbook, by name (the file suffix beside a file playbook, the memory's name in
# PostgreSQL): ACE's curated playbook (one text) and its delta log beside it (`Memory.sibling`), Reflexion's
# reflections, AWM's workflows and ReasoningBank's items (records). A copy of the playbook carries them all.
ACE_PLAYBOOK, ACE_DELTAS = "ace.txt", ".deltas.jsonl"
REFLECTIONS, WORKFLOWS, RB_ITEMS = "reflections.jsonl", "workflows.jsonl", "memory.jsonl"
BESIDE_PLAYBOOK = {ACE_PLAYBOOK: "text", ACE_PLAYBOOK + ACE_DELTAS: "records", REFLECTIONS: "records",
                   WORKFLOWS: "records", RB_ITEMS: "records"}


def _beside(playbook: str, name: str, make: bool = False) -> Memory | None:
    """The memory `name` beside the playbook at `playbook` (a file, or a `postgresql://` URL). For PostgreSQL
    without the memory's tables: None, or with `make` the memory with its tables made (reading makes nothing)."""
    if not playbook.startswith(("postgresql://", "postgres://")):
        path = Path(playbook)
        return FileMemory(path.with_name(f"{path.stem}.{name}"))
    if not make:
        from playground.plugins.playbook.backend import postgres

        pg = postgres()
        where = pg.Location(playbook)
        with pg.pool(where, serializable_alone=False).connection() as connection:
            made = connection.execute("SELECT to_regclass(%s)", (f"{where.schema}_memory.baseline_texts",)).fetchone()
        if not (made and made[0]):
            return None
    return PostgresMemory(playbook, name)


def _content(memory: Memory | None, kind: str) -> Any:
    """A memory's text or records (None for no memory)."""
    if memory is None:
        return None
    return memory.read_text() if kind == "text" else memory.records()


def memories_to_copy(source: str, target: str) -> list[tuple[str, Any]]:
    """The memories kept beside the playbook at `source` (BESIDE_PLAYBOOK) that a copy of it to `target` carries,
    as (name, content); writes nothing. A memory already beside `target` must equal the source's (what a copy cut
    short left); one that differs is a MemoryFileError naming it."""
    plan = []
    for name, kind in BESIDE_PLAYBOOK.items():
        here = _beside(source, name)
        held = _content(here, kind)
        if here is None or not held:
            continue
        there = _beside(target, name)
        if there is not None and _content(there, kind) not in (held, "", []):
            raise MemoryFileError(f"{there.location} holds another memory than {here.location}; a copy of the "
                                  f"playbook would mix the two: give a new target")
        plan.append((name, held))
    return plan


def write_memories(target: str, plan: list[tuple[str, Any]]) -> None:
    """Write each memory of `plan` (`memories_to_copy`) beside the playbook at `target`, each whole."""
    for name, held in plan:
        there = _beside(target, name, make=True)
        assert there is not None  # (made)
        if BESIDE_PLAYBOOK[name] == "text":
            there.write_text(held)
        else:
            there.write_records(held)


__all__ = ["ACE_DELTAS", "ACE_PLAYBOOK", "BESIDE_PLAYBOOK", "FileMemory", "Memory", "MemoryFileError", "PostgresMemory",
           "RB_ITEMS", "REFLECTIONS", "WORKFLOWS", "append_once", "memories_to_copy", "memory_for", "write_memories",
           "written_before"]
