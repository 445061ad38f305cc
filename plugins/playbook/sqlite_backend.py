"""The SQLite backend: a playbook in one file, in WAL mode, every write one short transaction retried while the file
is busy (several processes may write to one playbook at once)."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from playground.plugins.playbook.io import PlaybookError
from playground.plugins.playbook.schema import check_is_playbook_or_new, migrate, open_for_writing, open_read_only


class SQLiteBackend:
    """A playbook file: created (with its folders) when missing unless `read_only`; PlaybookError, leaving the
    file as it was, for a corrupt file, an SQLite database that is not a playbook or one of a newer schema."""

    kind = "sqlite"

    def __init__(self, path: Path, *, read_only: bool = False, busy_timeout_s: float = 60.0):
        self.path = path
        self.location = str(path)
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s
        check_is_playbook_or_new(path)
        if read_only:
            self.db = open_read_only(path, busy_timeout_s)
            return
        self.db = open_for_writing(path, busy_timeout_s)
        try:
            self.retrying(self._set_up)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        """Close the file; further calls fail."""
        self.db.close()

    def _set_up(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.write(lambda db: migrate(db, self.path))

    def write(self, work: Callable[[sqlite3.Connection], Any], *, one_statement: bool = False) -> Any:
        """Run `work` in one write transaction, retried from the start while the file is busy (`one_statement`
        changes nothing here: SQLite's transactions cost no round trips)."""
        if self.read_only:
            raise PlaybookError(f"{self.path}: opened read-only; it cannot be changed")

        def attempt() -> Any:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                result = work(self.db)
                self.db.execute("COMMIT")
                return result
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        return self.retrying(attempt)

    def read(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `work` in one read transaction (a consistent snapshot), retried while the file is busy."""
        def attempt() -> Any:
            self.db.execute("BEGIN")
            try:
                return work(self.db)
            finally:
                if self.db.in_transaction:
                    self.db.execute("COMMIT")
        return self.retrying(attempt)

    def retrying(self, attempt: Callable[[], Any]) -> Any:
        """Run `attempt`, again with a growing pause while the file is busy, up to the busy timeout; PlaybookError
        naming the file for any other database error."""
        delay, deadline = 0.002, time.monotonic() + self.busy_timeout_s
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise PlaybookError(f"{self.path}: {error}") from error
                if time.monotonic() > deadline:
                    raise PlaybookError(f"{self.path}: still busy after {self.busy_timeout_s:.0f} s: {error}") \
                        from error
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.25)
            except sqlite3.DatabaseError as error:
                raise PlaybookError(f"{self.path}: {error}") from error

    def backup_into(self, copy: sqlite3.Connection) -> None:
        """Copy the whole file, pages and all, into the open connection `copy` (SQLite's online backup)."""
        self.retrying(lambda: self.db.backup(copy))


def _is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(error) or "busy" in str(error)
