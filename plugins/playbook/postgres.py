"""The PostgreSQL backend: a playbook in one schema of a PostgreSQL database, through psycopg 3 and a connection pool.

`--playbook postgresql://USER@HOST:PORT/DB?schema=NAME` (also `postgres://`, any libpq URL: `?host=/run/postgresql`
for a Unix socket, `?service=NAME` for a libpq service file, `sslmode=...`). `schema` (default `playbook`) is the
playbook's own parameter, taken out before the URL goes to libpq: one database holds many playbooks, one per schema.
A missing schema becomes a new playbook when the playbook is opened for writing; the database itself must exist.

Credentials come from libpq: PGPASSWORD, a password file (~/.pgpass, PGPASSFILE), a service file (PGSERVICEFILE), or
the URL itself; nothing here writes the URL anywhere, and every message shows it with its credentials masked.

Transactions: a write is one SERIALIZABLE transaction, run again from the start on a serialization failure or a
deadlock (so concurrent writers from many processes keep the playbook's exactly-once rules, as SQLite's one writer
at a time does); a read is one REPEATABLE READ READ ONLY transaction (a consistent snapshot). Each process keeps one
pool per server (`POOL_MAX` connections at most), shared by the playbooks it opens there.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import random
import re
import threading
import time
import urllib.parse
import weakref
from functools import lru_cache
from typing import Any, Callable

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from playground.host_api import redact_url
from playground.plugins.playbook.io import PlaybookError
from playground.plugins.playbook.postgres_schema import (
    DDL,
    DEFAULT_SCHEMA,
    TABLES,
    TABLES_IN_SCHEMA,
    checked_schema,
    quoted,
)
from playground.plugins.playbook.schema import FORMAT, SCHEMA_VERSION, newer_schema

POOL_MAX = 4  # connections per server and process
CONNECT_TIMEOUT_S = 10
RETRIED = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_POOLS: dict[tuple[int, str, bool], ConnectionPool] = {}  # (process, conninfo, serializable_alone) -> its pool
_POOLS_LOCK = threading.Lock()
_SEARCH_PATH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> the schema it is set to
# (conninfo, schema) of the playbooks this process has opened for writing (checked, made where missing): opened again
# (each episode opens its run's playbook), it is not checked again; `drop` forgets it
_READY: set[tuple[str, str]] = set()
KEY_COLUMNS = {"playbook_meta": "1", "lessons": "1", "label_keys": "1, 2", "changes": "1",  # each table's key, by
               "lesson_origins": "1, 2, 3, 4", "lesson_uses": "1, 2, 3, 4, 5, 6"}  # position: the digest's row order
_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\?|(?<![:\w]):([A-Za-z_]\w*)|%")


class Location:
    """A PostgreSQL playbook's URL taken apart: what goes to libpq (`conninfo`), the schema, and the URL shown."""

    def __init__(self, url: str):
        self.url = url.strip()
        self.shown = redact_url(self.url)  # (as `backend.shown`; the backend imports this module, not back)
        try:
            parts = urllib.parse.urlsplit(self.url)
            pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        except ValueError as error:
            raise PlaybookError(f"{self.shown}: not a PostgreSQL URL ({error})") from None
        schemas = [value for name, value in pairs if name == "schema"]
        if len(schemas) > 1:
            raise PlaybookError(f"{self.shown}: `schema` given {len(schemas)} times; give it once")
        self.schema = checked_schema(schemas[0] if schemas else DEFAULT_SCHEMA, self.shown)
        rest = urllib.parse.urlencode([(name, value) for name, value in pairs if name != "schema"])
        self.conninfo = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment))

    def with_schema(self, schema: str) -> str:
        """The same URL naming another schema of the database."""
        parts = urllib.parse.urlsplit(self.url)
        pairs = [(n, v) for n, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if n != "schema"]
        query = urllib.parse.urlencode([*pairs, ("schema", schema)])
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """`sql` as the playbook's parts write it (`?` and `:name` placeholders) in psycopg's form (`%s`,
    `%(name)s`, a literal `%` doubled); quoted literals are left alone."""
    def replace(found: re.Match) -> str:
        token = found.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return f"%({found.group(1)})s" if found.group(1) else token
    return _PLACEHOLDER.sub(replace, sql)


class Session:
    """A connection inside one transaction, as the playbook's parts use one: `execute(sql, params)` returns a
    cursor (`fetchone`, `fetchall`, `rowcount`, iteration)."""

    dialect = "postgresql"

    def __init__(self, connection: psycopg.Connection, at_most: int | None = None):
        self.connection = connection
        self.left = at_most  # statements this session may still run (None: any number)

    def execute(self, sql: str, params: Any = ()) -> psycopg.Cursor:
        """Run one statement with its parameters (a sequence for `?`, a mapping for `:name`)."""
        if self.left is not None:
            if self.left == 0:  # a write declared to make one statement made another: a bug, not a user's error
                raise RuntimeError(f"a one-statement write ran a second statement: {' '.join(sql.split())[:80]}")
            self.left -= 1
        if not params:
            return self.connection.execute(sql)
        return self.connection.execute(pg_sql(sql), params)

    def executemany(self, sql: str, rows: Any) -> None:
        """Run one statement once per row of parameters."""
        with self.connection.cursor() as cursor:
            cursor.executemany(pg_sql(sql), list(rows))


# Every statement of the playbook's hot path (retrieval, counting, adding) has an index to follow. psycopg prepares a
# statement run often and the server keeps one plan for it: a plan made while the table was tiny scans the table, and
# the table grows under it (at 2,000 lessons, 10,000 rows read per episode instead of 1,200, and 1.6 times the
# server's CPU: `scripts/count_playbook_statements.py`). Off, a scan is the planner's last resort (a statement with no
# index to use still scans).
INDEXES_ONLY = "-c enable_seqscan=off"
# A statement sent outside BEGIN (a one-statement write, `PostgresBackend.write(one_statement=True)`) is its own
# transaction, at this isolation level: the level of every write.
SERIALIZABLE_ALONE = "-c default_transaction_isolation=serializable"


def pool(location: Location, *, serializable_alone: bool = True) -> ConnectionPool:
    """This process's pool for the server `location` names; the first call connects once, so that a server that
    cannot be reached, or refuses the credentials, is a PlaybookError saying libpq's reason. With
    `serializable_alone` (the playbook's), a statement sent outside BEGIN runs SERIALIZABLE (SERIALIZABLE_ALONE);
    without (the baselines' memories, which count on the server's default), a pool of its own keeps the default."""
    key = (os.getpid(), location.conninfo, serializable_alone)
    with _POOLS_LOCK:
        found = _POOLS.get(key)
        if found is None:
            try:
                psycopg.connect(location.conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
            except psycopg.Error as error:
                raise PlaybookError(f"{location.shown}: cannot connect: {_said(error)}") from None
            found = ConnectionPool(location.conninfo, min_size=1, max_size=POOL_MAX, open=True,
                                   kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                                           "options": f"{INDEXES_ONLY} {SERIALIZABLE_ALONE}"
                                           if serializable_alone else INDEXES_ONLY},
                                   name=f"playbook-{len(_POOLS)}", timeout=60.0)
            _POOLS[key] = found
    return found


def close_pools() -> None:
    """Close this process's pools (at exit; a pool made by a parent process is left to it)."""
    with _POOLS_LOCK:
        for (pid, _, _), each in list(_POOLS.items()):
            if pid == os.getpid():
                each.close()
        _POOLS.clear()


atexit.register(close_pools)


def _said(error: BaseException) -> str:
    """An error's message on one line, any URL in it masked."""
    words = [redact_url(word) if "://" in word else word for word in str(error).split()]
    return " ".join(words) or type(error).__name__


class PostgresBackend:
    """A playbook in a schema of a PostgreSQL database; made (schema, tables) when opened for writing, PlaybookError
    for a schema that holds something else or a playbook of a newer schema version."""

    kind = "postgresql"

    def __init__(self, url: str, *, read_only: bool = False, busy_timeout_s: float = 60.0):
        self.where = Location(url)
        self.location = self.where.shown
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s
        self.pool = pool(self.where)
        if read_only:
            problem = self.transaction(lambda db: _problem(db, self.where.schema) or (
                None if _tables(db, self.where.schema) else "no playbook to open read-only (the schema holds none)"),
                "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY")
            if problem:
                raise PlaybookError(f"{self.location}: {problem}")
        elif (self.where.conninfo, self.where.schema) not in _READY:
            # read committed: sees a playbook another process just made
            self.transaction(self._set_up, "BEGIN ISOLATION LEVEL READ COMMITTED")
            _READY.add((self.where.conninfo, self.where.schema))

    def close(self) -> None:
        """Nothing to let go: the pool stays for the process's other playbooks (closed at exit)."""

    def read(self, work: Callable[[Session], Any]) -> Any:
        """Run `work` in one REPEATABLE READ READ ONLY transaction (a consistent snapshot)."""
        return self.transaction(work, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", pipelined=True)

    def write(self, work: Callable[[Session], Any], *, one_statement: bool = False) -> Any:
        """Run `work` in one SERIALIZABLE transaction, from the start again after a serialization failure; with
        `one_statement` (`work` makes exactly one statement), that statement alone, as its own transaction: one
        round trip instead of three (BEGIN, it, COMMIT), at the same level (SERIALIZABLE_ALONE). Not pipelined: a
        write that fails in a pipeline can leave psycopg holding a prepared statement the server skipped, and every
        later use of it on that connection fails ("prepared statement _pg3_N does not exist"; measured under the
        cluster bench's concurrent writers)."""
        if self.read_only:
            raise PlaybookError(f"{self.location}: opened read-only; it cannot be changed")
        return self.transaction(work, None if one_statement else "BEGIN ISOLATION LEVEL SERIALIZABLE")

    def transaction(self, work: Callable[[Session], Any], begin: str | None, pipelined: bool = False) -> Any:
        """Run `work` between `begin` and COMMIT (`begin` None: `work`'s one statement alone) on a pooled connection
        set to the playbook's schema; retried with a growing pause on a serialization failure or deadlock until the
        busy timeout; PlaybookError for any other database error. `pipelined` (reads): statements go out as they are
        made and are waited for only when their rows are read, so BEGIN travels with the first query and queries made
        together share one round trip."""
        delay, deadline = 0.002, time.monotonic() + self.busy_timeout_s
        while True:
            try:
                with self.pool.connection() as connection:
                    return _in_transaction(connection, self.where.schema, begin, work, pipelined)
            except RETRIED as error:
                if time.monotonic() > deadline:
                    raise PlaybookError(f"{self.location}: still conflicting with other writers after "
                                        f"{self.busy_timeout_s:.0f} s: {_said(error)}") from None
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.25)
            except PoolTimeout as error:
                raise PlaybookError(f"{self.location}: no connection to the server: {_said(error)}") from None
            except psycopg.Error as error:
                raise PlaybookError(f"{self.location}: {_said(error)}") from None

    def _set_up(self, db: Session) -> None:
        """Make the schema a playbook unless it is one (under a lock, so processes opening it at once make it
        once); PlaybookError for a schema that holds other tables or a newer playbook."""
        schema = self.where.schema
        db.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"playground-playbook:{schema}",))
        problem = _problem(db, schema)
        if problem:
            raise PlaybookError(f"{self.location}: {problem}")
        if _tables(db, schema):
            return
        for statement in DDL:
            db.execute(statement.format(s=quoted(schema)))
        db.executemany(f"INSERT INTO {quoted(schema)}.playbook_meta (key, value) VALUES (?, ?)",
                       [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)), ("created_at", str(time.time()))])


def _in_transaction(connection: psycopg.Connection, schema: str, begin: str | None, work: Callable[[Session], Any],
                    pipelined: bool = False) -> Any:
    if _SEARCH_PATH.get(connection) != schema:  # a session setting, made outside any transaction
        connection.execute("SELECT pg_catalog.set_config('search_path', %s, false)", (quoted(schema),))
        _SEARCH_PATH[connection] = schema
    if begin is None:  # one statement, its own transaction (autocommit)
        return work(Session(connection, at_most=1))
    try:
        with connection.pipeline() if pipelined else contextlib.nullcontext() as pipeline:
            try:
                connection.execute(begin)
                result = work(Session(connection))
                connection.execute("COMMIT")
            except BaseException:
                if pipeline is not None:
                    _settle(pipeline)
                raise
        return result
    except BaseException as error:
        try:
            if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                connection.execute("ROLLBACK")
            if pipelined and isinstance(error, psycopg.Error):
                # a statement the server skipped after the failure may be one psycopg counts as prepared, and would
                # fail on it later ("prepared statement _pg3_N does not exist"): both sides forget them (psycopg
                # clears its own list when it sees this command)
                connection.execute("DEALLOCATE ALL")
        except psycopg.Error:
            pass  # a broken connection: the pool drops it
        raise


def _settle(pipeline: psycopg.Pipeline) -> None:
    """Take what a pipeline that failed still holds (the statements the server skipped after the first error, which
    is already being raised), so that leaving it does not log the same failure again as an error ignored."""
    try:
        pipeline.sync()
    except psycopg.Error:
        pass


def _tables(db: Session, schema: str) -> list[str]:
    return sorted(row[0] for row in db.execute(TABLES_IN_SCHEMA, (schema,)))


def _problem(db: Session, schema: str) -> str | None:
    """Why the schema cannot hold the playbook (None: it holds one, or nothing yet)."""
    tables = _tables(db, schema)
    if not tables:
        return None
    if "playbook_meta" not in tables:
        return f"schema {schema!r} holds tables but not a playbook (has {', '.join(tables[:5])})"
    meta: dict[str, str] = dict(db.execute(f"SELECT key, value FROM {quoted(schema)}.playbook_meta").fetchall())
    if meta.get("format") != FORMAT:
        return f"schema {schema!r} holds a playbook_meta table but not a playbook"
    newer = newer_schema(meta)
    if newer:
        return newer
    missing = sorted(set(TABLES) - set(tables))
    return f"schema {schema!r}: the playbook lacks its tables {', '.join(missing)}" if missing else None


def _readable(url: str, work: Callable[[Session, str], Any]) -> Any:
    where = Location(url)
    connection_pool = pool(where)
    try:
        with connection_pool.connection() as connection:
            return _in_transaction(connection, where.schema, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                                   lambda db: work(db, where.schema))
    except psycopg.Error as error:
        raise PlaybookError(f"{where.shown}: {_said(error)}") from None


def exists(url: str) -> bool:
    """Whether the schema `url` names holds a playbook (reads only)."""
    return _readable(url, lambda db, schema: "playbook_meta" in _tables(db, schema))


def problem(url: str) -> str | None:
    """Why `url` cannot be used as a playbook (a server that cannot be reached, a schema holding something else),
    None when it can. Reads only."""
    return _readable(url, _problem)


def digest(url: str) -> str | None:
    """A hash of the playbook's content (every table's rows in key order), None when the schema holds none."""
    def read(db: Session, schema: str) -> str | None:
        if "playbook_meta" not in _tables(db, schema):
            return None
        hashed = hashlib.sha256()
        for table in TABLES:
            hashed.update(f"table {table}\n".encode())
            with db.connection.cursor(name="playbook_digest") as cursor:
                cursor.execute(f"SELECT * FROM {quoted(schema)}.{table} ORDER BY {KEY_COLUMNS[table]}")
                for row in cursor:
                    hashed.update(repr(row).encode("utf-8", "surrogatepass") + b"\n")
        return "postgresql:" + hashed.hexdigest()
    return _readable(url, read)


def drop(url: str) -> None:
    """Remove the playbook's schema and everything in it (for tests and a benchmark's throw-away playbooks)."""
    where = Location(url)
    _READY.discard((where.conninfo, where.schema))
    with pool(where).connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {quoted(where.schema)} CASCADE")
