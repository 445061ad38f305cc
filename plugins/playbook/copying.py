"""Copying a whole playbook from one backend to another (`playground playbook copy SRC DST`): an SQLite file to a
PostgreSQL schema, back, or between schemas. Every row is copied as it is (lessons with their ids and counters,
their origins and uses, the change log, the header: so an export of the copy is byte for byte the export of the
source), and the id counters too, so the copy never hands out an id the source has used.

The source is read in one snapshot. A file copy is built under a temporary name and linked into place whole; a
schema's copy is one transaction, into a schema that holds no playbook yet (made for it, and removed again when
the copy fails)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from playground.plugins.playbook.backend import dialect, is_database_url, location_problem, playbook_exists, shown
from playground.plugins.playbook.io import PlaybookError
from playground.plugins.playbook.maintenance import build_new
from playground.plugins.playbook.schema import COLUMNS

Read = Callable[[Callable[[Any], Any]], Any]  # a playbook's read transaction: `Playbook._read`
Opener = Callable[[Any], Any]  # opens a playbook for writing at a location: `Playbook`

PAGE = 5_000  # rows per read of the tables keyed by id
TABLES = {  # table -> (its columns, its integer key or None: read whole)
    "lessons": (COLUMNS, "id"),
    "changes": ("id, at, op, lesson_id, details", "id"),
    "lesson_origins": ("run, episode, attempt, step, lesson_id", None),
    "lesson_uses": ("run, episode, attempt, step, lesson_id, kind, retrieved, verified, helped", None),
}
COUNTED = ("lessons", "changes")  # tables whose ids come from a counter that never goes back


def copy_playbook(read: Read, target: str | os.PathLike, open_playbook: Opener) -> Path | str:
    """Copy the playbook whose read transaction is `read` whole to `target` (a new file path, or a PostgreSQL URL
    whose schema holds no playbook; opened with `open_playbook`) and return `target`; PlaybookError, with nothing
    made at `target`, when it is taken or the copy fails."""
    def fill(location: Path | str) -> None:
        with open_playbook(location) as copy:
            read(lambda src: copy._write(lambda dst: transfer(src, dst, shown(target))))

    if not is_database_url(target):
        path = Path(target)
        if path.exists():
            raise PlaybookError(f"{path}: already exists; a playbook copy is only made to a new file")
        path.parent.mkdir(parents=True, exist_ok=True)
        build_new(path, fill)
        return path
    url = os.fspath(target)
    problem = location_problem(url)
    if problem:
        raise PlaybookError(problem if problem.startswith(shown(url)) else f"{shown(url)}: {problem}")
    if playbook_exists(url):
        raise PlaybookError(f"{shown(url)}: holds a playbook already; a playbook copy is only made to a new one "
                            "(name another schema: ?schema=NAME)")
    try:
        fill(url)
    except BaseException:
        from playground.plugins.playbook.postgres import drop

        drop(url)  # the schema was made for the copy
        raise
    return url


def backup_schema(read: Read, url: str, open_playbook: Opener) -> str:
    """Copy a PostgreSQL playbook whole to a new schema of its database, `<schema>_bak_<YYYYmmdd_HHMMSS>` (a `_N`
    suffix when that is taken); return the copy's URL."""
    from playground.plugins.playbook.postgres import Location

    where, stamp = Location(url), time.strftime("%Y%m%d_%H%M%S")
    for number in range(1, 100):
        target = where.with_schema(f"{where.schema}_bak_{stamp}" + (f"_{number}" if number > 1 else ""))
        if not playbook_exists(target):
            return str(copy_playbook(read, target, open_playbook))
    raise PlaybookError(f"{where.shown}: no free backup schema for {stamp}")


def transfer(src: Any, dst: Any, where: str) -> None:
    """Copy every row of the playbook open in `src` into the empty playbook open in `dst` (inside their
    transactions), then their id counters and header."""
    held = dst.execute("SELECT (SELECT COUNT(*) FROM lessons) + (SELECT COUNT(*) FROM changes)").fetchone()[0]
    if held:
        raise PlaybookError(f"{where}: holds lessons or changes already; a playbook copy is only made to a new one")
    for table, (columns, key) in TABLES.items():
        insert = f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(columns.split(',')))})"
        if key is None:
            dst.executemany(insert, src.execute(f"SELECT {columns} FROM {table}").fetchall())
            continue
        last = 0
        while True:
            rows = src.execute(f"SELECT {columns} FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT ?",
                               (last, PAGE)).fetchall()
            if rows:
                dst.executemany(insert, rows)
                last = rows[-1][0]
            if len(rows) < PAGE:
                break
    for table in COUNTED:
        set_last_id(dst, table, last_id(src, table))
    meta = src.execute("SELECT key, value FROM playbook_meta").fetchall()
    dst.execute("DELETE FROM playbook_meta")
    dst.executemany("INSERT INTO playbook_meta (key, value) VALUES (?, ?)", meta)


def last_id(db: Any, table: str) -> int:
    """The highest id the table's counter has handed out (0: none), whether or not that row is still there."""
    if dialect(db) == "postgresql":
        row = db.execute("SELECT pg_sequence_last_value(pg_get_serial_sequence(?, 'id')::regclass)", (table,))
        value = row.fetchone()[0]
    else:
        found = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        value = found[0] if found else None
    highest = db.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0]
    return max(int(value or 0), int(highest or 0))


def set_last_id(db: Any, table: str, value: int) -> None:
    """Make the table's counter hand out ids above `value` (and above the ids it holds) from now on."""
    value = max(value, last_id(db, table))
    if value <= 0:
        return
    if dialect(db) == "postgresql":
        db.execute("SELECT setval(pg_get_serial_sequence(?, 'id')::regclass, ?, true)", (table, value))
    elif db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (value, table)).rowcount == 0:
        db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, value))
