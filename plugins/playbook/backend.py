"""Where a playbook lives, behind one protocol: an SQLite file (a plain path, the default) or a schema of a PostgreSQL
database (`postgresql://USER@HOST:PORT/DB?schema=NAME`).

A `Backend` runs the playbook's transactions: `read(work)` gives `work` a connection inside one consistent
snapshot, `write(work)` inside one write transaction that commits when `work` returns (retried from the start while
the store is busy: SQLite's lock, PostgreSQL's serialization failures). The SQL the playbook's parts send is the same
on both, written in the subset both understand (`?` placeholders, `ON CONFLICT`, row values); the few statements
that differ ask `dialect(db)`. `open_backend` picks the backend from the location; `store.open_playbook` is the
one factory for a `Playbook` on either. A URL's password never leaves the process: messages and stats show `shown`
(the URL with its credentials masked); credentials belong in PGPASSWORD, a password file or a libpq service file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from playground.host_api import redact_url, register_url_scheme
from playground.plugins.playbook.io import PlaybookError

T = TypeVar("T")
POSTGRES_SCHEMES = ("postgresql", "postgres")  # the URL schemes libpq reads
PLAYBOOK_OPTION = "--playbook"
POSTGRES_EXTRA = "PostgreSQL playbooks need psycopg and psycopg-pool: pip install 'playground[postgres]'"


class Backend(Protocol):
    """The storage under a `Playbook`: its transactions, and where it is."""

    kind: str  # "sqlite" or "postgresql"
    location: str  # what messages and stats show: the path, or the URL with its credentials masked
    read_only: bool

    def read(self, work: Callable[[Any], T]) -> T:
        """Run `work(connection)` in one read transaction (a consistent snapshot) and return what it returns."""
        ...

    def write(self, work: Callable[[Any], T], *, one_statement: bool = False) -> T:
        """Run `work(connection)` in one write transaction, committed when it returns (retried while busy);
        PlaybookError when the playbook was opened read-only. With `one_statement` (`work` makes exactly one
        statement in PostgreSQL's dialect), a backend may send that statement alone as its own transaction."""
        ...

    def close(self) -> None:
        """Let go of the store (a file's connection; a database's pool stays for the process)."""
        ...


def register_schemes() -> None:
    """Let `--playbook` and the playbook commands' PATH take PostgreSQL URLs (`playground.run.paths`)."""
    for scheme in POSTGRES_SCHEMES:
        register_url_scheme(PLAYBOOK_OPTION, scheme)


def is_database_url(location: Any) -> bool:
    """Whether `location` names a PostgreSQL playbook (`postgresql://...` or `postgres://...`), not a file."""
    if not isinstance(location, (str, os.PathLike)) or isinstance(location, Path):
        return False
    text = os.fspath(location).strip().lower()
    return any(text.startswith(f"{scheme}://") for scheme in POSTGRES_SCHEMES)


def shown(location: str | os.PathLike) -> str:
    """`location` as messages show it: a path as it is, a URL with its user, password and secret parameters
    masked."""
    text = os.fspath(location)
    return redact_url(text.strip()) if is_database_url(text) else text


def dialect(db: Any) -> str:
    """The SQL dialect of a connection `work` was given: "postgresql" or "sqlite"."""
    return getattr(db, "dialect", "sqlite")


def postgres():
    """The PostgreSQL backend module (PlaybookError naming the extra when psycopg is not installed)."""
    try:
        import playground.plugins.playbook.postgres as module
    except ImportError as error:
        raise PlaybookError(f"{POSTGRES_EXTRA} ({error})") from None
    return module


def open_backend(location: str | os.PathLike, *, read_only: bool = False, busy_timeout_s: float = 60.0) -> Backend:
    """Open the store at `location`: a PostgreSQL URL, else an SQLite file path (created when missing unless
    `read_only`). PlaybookError, leaving the store as it was, for one that is not a playbook or cannot be opened."""
    if is_database_url(location):
        return postgres().PostgresBackend(os.fspath(location), read_only=read_only, busy_timeout_s=busy_timeout_s)
    from playground.plugins.playbook.sqlite_backend import SQLiteBackend

    return SQLiteBackend(Path(location), read_only=read_only, busy_timeout_s=busy_timeout_s)


def playbook_exists(location: str | os.PathLike) -> bool:
    """Whether a playbook is there to read: a non-empty file, or a PostgreSQL schema holding one (False when the
    server cannot be reached)."""
    if is_database_url(location):
        try:
            return postgres().exists(os.fspath(location))
        except PlaybookError:
            return False
    path = Path(location)
    return path.is_file() and path.stat().st_size > 0


def location_problem(location: str | os.PathLike, *, read_pages: bool = False) -> str | None:
    """Why `location` cannot be used as a playbook, or None when it can (a playbook, or nothing yet: it becomes a
    new one). Reads only. A database that cannot be reached, or whose schema holds something else, is a problem."""
    if is_database_url(location):
        try:
            return postgres().problem(os.fspath(location))
        except PlaybookError as error:
            return str(error)
    from playground.plugins.playbook.schema import playbook_problem

    return playbook_problem(os.fspath(location), read_pages=read_pages)


def location_digest(location: str | os.PathLike) -> str | None:
    """A hash of the playbook's content (the same content, the same hash), None when there is none to hash."""
    if is_database_url(location):
        try:
            return postgres().digest(os.fspath(location))
        except PlaybookError:
            return None
    from playground.plugins.playbook.schema import content_digest

    return content_digest(os.fspath(location))
