"""The Playbook object: one open playbook file, its transactions, and its operations composed from the parts.

The playbook: recovery lessons kept in SQLite (a file) or PostgreSQL (a schema of a database: `backend`) and
retrieved by Sentry's rules. A lesson says,
for one failure type and its labels, when it applies (`trigger`) and what to do
(`principle`), where it came from (`provenance`) and how it has fared (counters `retrieved`,
`verified`, `helped`). Several processes may add lessons to one playbook at once: every write is one short
transaction, retried while the store is busy (`sqlite_backend`, `postgres`).

The parts: `schema` (the tables, creating, migrating, opening and checking a file),
`retrieval` (Sentry's retrieval rules and the ablation modes), `provenance` (exactly-once
writes keyed by provenance, taking back an unfinished episode's writes, the change log) and
`maintenance` (merge, prune, import, export, copy).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import playground.plugins.playbook.maintenance as maintenance
from playground.core.labels import LabelRegistry
from playground.host_api import default_labels
from playground.plugins.playbook.backend import (
    Backend,
    is_database_url,
    location_problem,
    open_backend,
    playbook_exists,
    shown,
)
from playground.plugins.playbook.io import (
    ImportReport,
    PlaybookError,
    lesson_problems,
    normalized,
    read_ace,
    read_jsonl,
)
from playground.plugins.playbook.provenance import (
    CHANGES,
    Change,
    change_from_row,
    count_outcomes,
    count_retrieved,
    discard,
    env_counts,
    has_writes,
    in_one_statement,
    insert_once,
    origin_key,
    origin_part,
    other_env_warning,
)
from playground.plugins.playbook.retrieval import RETRIEVAL_MODES, Retrieved, pick
from playground.plugins.playbook.schema import COLUMNS, Lesson, check_is_playbook_or_new, has_no_tables, lesson_from_row

__all__ = ["Playbook", "discard_episodes", "import_file", "open_playbook"]

PAGE = 1_000  # rows per read when iterating over a whole playbook
Progress = Callable[[str, int, "int | None"], None]  # (stage "read" or "write", done, in all or None), for imports


class Playbook:
    """A playbook of lessons: add, retrieve, count outcomes, merge, prune, import and export.

    `Playbook(path)` opens the file, creating it (and its folders) when missing; it raises
    PlaybookError, leaving the file as it was, for a corrupt file, an SQLite database that is
    not a playbook, or a playbook of a newer schema. `Playbook("postgresql://...")` opens the
    playbook in a schema of a PostgreSQL database the same way (`backend`, `postgres`), with the
    same semantics. `read_only=True` opens an existing
    playbook (e.g. a shipped one, in a folder that cannot be written) for retrieval and
    inspection: every change raises PlaybookError and retrieval counters are not kept.
    Use one Playbook per process (or thread); processes share lessons only through the
    store. Also a context manager that closes it. Failure types and labels are checked
    against `labels`, by default the process-wide host's registry.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0, read_only: bool = False,
                 labels: LabelRegistry | None = None):
        self.path: Path | str = os.fspath(path) if is_database_url(path) else Path(path)  # a URL stays one
        self.read_only = read_only
        self._env_checked = False  # whether a retrieval has compared the episode's env with the lessons' envs
        self._labels = labels
        self._backend: Backend = open_backend(path, read_only=read_only, busy_timeout_s=busy_timeout_s)
        self.location = self._backend.location  # for messages: the path, or the URL with credentials masked

    def __repr__(self) -> str:
        return f"Playbook({self.location!r})"

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
        """Close the playbook; further calls fail."""
        self._backend.close()

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
        key = origin_key(record["provenance"])
        return self._write(lambda db: insert_once(db, record), one_statement=in_one_statement(None, key))

    def add_many(self, records: Iterable[dict]) -> list[int]:
        """Store many lesson records (dicts with `add`'s arguments as keys) in one transaction and
        return their ids; nothing is stored when any record is invalid (ValueError naming it)."""
        checked = []
        for number, record in enumerate(records):
            try:
                checked.append(_checked({**record, "labels": _as_list(record.get("labels", []))}, self.labels))
            except ValueError as error:
                raise type(error)(f"record {number}: {error}") from error
        return self._write(lambda db: [insert_once(db, record) for record in checked])

    def import_jsonl(self, path: str | Path, *, progress: Progress | None = None) -> ImportReport:
        """Add every lesson of a JSONL file (as written by `export_jsonl`), all or nothing.

        Every line is checked first; any bad line raises PlaybookImportError naming the file and
        the line numbers, and the playbook is left untouched. The lessons are then added in one
        transaction: an import cut off (an error, Ctrl-C, a kill) adds none. `progress`, when given,
        is called as `progress("read", lines read, lines in all)` while the file is read and
        `progress("write", records done, records in all)` while they are added; an exception it
        raises stops the import.
        """
        records = read_jsonl(path, self.labels, progress=_stage(progress, "read"))
        return self._import(path, records, "jsonl", progress)

    def import_ace(self, path: str | Path, *, strict: bool = False, progress: Progress | None = None) -> ImportReport:
        """Add every bullet of an ACE playbook text file as a "procedure" lesson.

        See `playground.plugins.playbook.io.read_ace` for how bullets map to lessons. Lines that do not
        parse are skipped, as ACE skips them, and listed in the report's `skipped`; with `strict` they
        raise PlaybookImportError naming the file and the line numbers, and nothing is imported. The
        report's `notes` name bullets kept twice and a file with no bullet. The file's header lines are
        recorded (playbook_meta) so that `export_ace` writes its empty sections and repeated headers back.
        One transaction, and `progress`, as in `import_jsonl` (lines in all are not counted: None).
        """
        skipped: list[str] = []
        notes: list[str] = []
        headers: list[tuple[int, str]] = []
        records = read_ace(path, self.labels, strict=strict, skipped=skipped, notes=notes, headers=headers,
                           progress=_stage(progress, "read"))
        written = _stage(progress, "write", len(records))
        ids, already, unrecorded = self._write(lambda db: maintenance.import_ace(db, path, records, headers, written))
        if unrecorded:
            notes.append(f"{unrecorded} section header line(s) not kept for export: a playbook keeps at most "
                         f"{maintenance.MAX_ACE_HEADERS:,}")
        return ImportReport(str(path), len(ids), ids[0] if ids else None, ids[-1] if ids else None, tuple(skipped),
                            len(already), tuple(notes))

    def _import(self, path: str | Path, records: list[dict], kind: str, progress: Progress | None) -> ImportReport:
        written = _stage(progress, "write", len(records))
        ids, already = self._write(lambda db: maintenance.import_new(db, path, records, kind, None, written))
        return ImportReport(str(path), len(ids), ids[0] if ids else None, ids[-1] if ids else None, (), len(already))

    # ---- retrieving ---------------------------------------------------------------------

    def retrieve(self, failure_type: str, labels: Iterable[str], k: int = 5, count: bool = True, *,
                 mode: str = "labels", rng: random.Random | None = None,
                 origin: dict[str, Any] | None = None) -> list[Retrieved]:
        """Return at most k lessons for a detected failure, by Sentry's rules (see `retrieval`).

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
        if origin and origin.get("env") and not self._env_checked:
            self._warn_if_other_env(origin)
        picked = self._read(lambda db: pick(db, mode, failure_type, set(labels), k, rng))
        if count and picked:
            self.record_retrieved([item.lesson.id for item in picked], origin=origin)
        return picked

    def _warn_if_other_env(self, origin: dict[str, Any]) -> None:
        """Log `other_env_warning` (once per process for this file, run and env), if there is one for `origin`."""
        self._env_checked = True
        try:
            warning = other_env_warning(self.location, origin, lambda: self._read(env_counts))
        except PlaybookError:
            return  # a check for a warning never stops a run
        if warning:
            logging.getLogger("playground.plugins.playbook").warning(warning)

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
        self._write(lambda db: count_retrieved(db, ids, key), one_statement=in_one_statement(ids, key))

    def record_outcome(self, lesson_id: int, verified: bool, helped: bool,
                       origin: dict[str, Any] | None = None) -> None:
        """Count how a retrieved lesson fared: its recovery was verified, and/or it helped.

        With an `origin` (the provenance of the repair that used the lesson), the outcome counts
        once per lesson and origin, as in `record_retrieved`. Raises KeyError when there is no
        lesson with that id.
        """
        self.record_outcomes([lesson_id], verified, helped, origin)

    def record_outcomes(self, lesson_ids: Iterable[int], verified: bool, helped: bool,
                        origin: dict[str, Any] | None = None) -> None:
        """`record_outcome` for each of `lesson_ids` (the lessons one repair showed), in one transaction: all are
        counted, or none (KeyError names the first that is not there)."""
        ids, key = list(lesson_ids), origin_key(origin or {})
        self._write(lambda db: count_outcomes(db, self.location, ids, key, verified, helped),
                    one_statement=in_one_statement(ids, key))

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
        return self._write(lambda db: discard(db, run_id, episodes))

    def has_episode_writes(self, run_id: str, episode_ids: Iterable[str]) -> bool:
        """True when one of these episodes of run `run_id` stored a lesson or a counter update here
        (what `discard_episodes` would take back); reads only."""
        keys = [(origin_part(run_id), origin_part(episode)) for episode in episode_ids]
        return self._read(lambda db: has_writes(db, keys))

    # ---- reading ------------------------------------------------------------------------

    def get(self, lesson_id: int) -> Lesson | None:
        """Return the lesson with this id, or None."""
        row = self._read(lambda db: db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone())
        return lesson_from_row(row) if row else None

    def all(self) -> Iterator[Lesson]:
        """Yield every lesson, oldest id first."""
        for row in self._pages(f"SELECT {COLUMNS} FROM lessons WHERE id > ? ORDER BY id LIMIT ?"):
            yield lesson_from_row(row)

    def changes(self, lesson_id: int | None = None) -> Iterator[Change]:
        """Yield the change log in order (only the rows about one lesson when `lesson_id` is given)."""
        for row in self._pages(CHANGES):
            if lesson_id is None or row[3] == lesson_id:
                yield change_from_row(row)

    def stats(self) -> dict[str, Any]:
        """Return counts: lessons in all, per failure type, per label of each type, per env their provenance
        records (`by_env`; lessons recording none are not counted), counter totals, log rows."""
        def read(db: Any) -> dict[str, Any]:
            by_type: dict[str, int] = defaultdict(int)
            by_label: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            for failure_type, key, lessons in db.execute("SELECT failure_type, label_key, lessons FROM label_keys"):
                by_type[failure_type] += lessons
                for label in key.split(","):
                    by_label[failure_type][label] += lessons
            count, retrieved, verified, helped = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(retrieved), 0), COALESCE(SUM(verified), 0), COALESCE(SUM(helped), 0) "
                "FROM lessons").fetchone()
            return {"path": self.location, "count": count, "by_type": dict(sorted(by_type.items())),
                    "by_env": env_counts(db),
                    "by_label": {t: dict(sorted(by_label[t].items())) for t in sorted(by_label)},
                    "counters": {"retrieved": int(retrieved), "verified": int(verified), "helped": int(helped)},
                    "changes": db.execute("SELECT COUNT(*) FROM changes").fetchone()[0]}
        return self._read(read)

    def export_jsonl(self, path: str | Path) -> int:
        """Write every lesson to a JSONL file (one consistent snapshot, replaced whole) and return the count."""
        return self._read(lambda db: maintenance.export_jsonl(db, path))

    def export_ace(self, path: str | Path) -> int:
        """Write every lesson to an ACE playbook text file (`io.write_ace`; replaced whole) and return the count."""
        return self._read(lambda db: maintenance.export_ace(db, path))

    def copy_to(self, path: str | Path) -> Path | str:
        """Write a consistent copy of the whole playbook (lessons with their ids, counters, origins, change log) to
        a new playbook `path`: a file, or a PostgreSQL schema (`copying.copy_playbook`), in either direction.

        A file copy is made beside `path` and renamed into place once complete, so `path` is either
        absent or a whole playbook; a schema's copy is one transaction. PlaybookError if `path` (or a
        side file of it) already exists, or the schema holds a playbook already.
        """
        from playground.plugins.playbook.copying import copy_playbook

        if self._backend.kind == "sqlite" and not is_database_url(path):
            return maintenance.copy_whole(Path(self.path), path, self._backend.backup_into)  # type: ignore[attr-defined]
        return copy_playbook(self._read, path, Playbook)

    # ---- maintenance --------------------------------------------------------------------

    def backup(self) -> Path | str:
        """Write a consistent copy of the whole playbook beside it, named `<name>.bak-<YYYYmmdd-HHMMSS>` (a `-N`
        suffix when that is taken), and return its path (see `copy_to`); a PostgreSQL playbook's goes to the schema
        `<schema>_bak_<YYYYmmdd_HHMMSS>` of the same database, and its URL is returned."""
        if isinstance(self.path, str):
            from playground.plugins.playbook.copying import backup_schema

            return backup_schema(self._read, self.path, Playbook)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for number in range(1, 1000):
            name = f"{self.path.name}.bak-{stamp}" + (f"-{number}" if number > 1 else "")
            if not any(self.path.with_name(name + side).exists() for side in ("", "-wal", "-shm", "-journal")):
                return self.copy_to(self.path.with_name(name))
        raise PlaybookError(f"{self.path}: no free backup name beside it for {stamp}")

    def prune_plan(self, max_age_days: float | None = None, min_helped: int | None = None,
                   max_count: int | None = None) -> list[tuple[Lesson, dict[str, Any]]]:
        """What `prune` would remove, changing nothing: (lesson, the limits that remove it), in order."""
        plan = maintenance.prune_planner(max_age_days, min_helped, max_count)
        return [(lesson_from_row(row), reason) for row, reason in self._read(plan)]

    def merge_plan(self, similarity: float = 0.9) -> list[tuple[int, int, float]]:
        """What `merge` would do, changing nothing: (lesson id merged away, lesson id kept, text similarity)."""
        if not 0.0 < similarity <= 1.0:
            raise ValueError(f"similarity must be in (0, 1], not {similarity}")
        return maintenance.merge_plan(self._pages(maintenance.MERGE_ROWS), similarity)

    def merge(self, similarity: float = 0.9, plan: list[tuple[int, int, float]] | None = None) -> int:
        """Merge near-duplicate lessons and return how many were removed.

        Two lessons are near-duplicates when they have the same failure type and labels and their
        texts (trigger and principle, lower-cased, whitespace collapsed) have a
        `difflib.SequenceMatcher` ratio >= `similarity`. Going from the oldest lesson of each
        label set, a lesson is merged into the first older kept lesson it is similar to: the kept
        one gains its counters and it is deleted (the change log keeps its full record). `plan`: a
        `merge_plan` made before, to apply instead (pairs with a lesson gone meanwhile are passed over).
        """
        plan = self.merge_plan(similarity) if plan is None else plan
        return self._write(lambda db: maintenance.apply_merge(db, plan))

    def prune(self, max_age_days: float | None = None, min_helped: int | None = None,
              max_count: int | None = None) -> int:
        """Remove lessons and return how many were removed.

        With `max_age_days` and/or `min_helped`, removes each lesson that is older than
        `max_age_days` AND has helped fewer than `min_helped` times (a filter not given does
        not restrict; with neither given, this step removes nothing). Then, with `max_count`,
        removes the least helpful lessons (oldest first among equals) until at most
        `max_count` remain. The change log keeps each removed lesson's full record.
        """
        return self._write(maintenance.pruner(max_age_days, min_helped, max_count))

    # ---- transactions -------------------------------------------------------------------

    def _write(self, work: Callable[[Any], Any], one_statement: bool = False) -> Any:
        """Run `work` in one write transaction, retried from the start while the store is busy (`one_statement`:
        `work` makes one statement on PostgreSQL, `Backend.write`)."""
        return self._backend.write(work, one_statement=one_statement)

    def _read(self, work: Callable[[Any], Any]) -> Any:
        """Run `work` in one read transaction (a consistent snapshot), retried while the store is busy."""
        return self._backend.read(work)

    def _pages(self, query: str) -> Iterator[tuple]:
        """Yield the rows of a keyset-paged query (`... WHERE id > ? ... LIMIT ?`), one short read per page."""
        last = 0
        while True:
            rows = self._read(lambda db: db.execute(query, (last, PAGE)).fetchall())  # noqa: B023 (called at once)
            yield from rows
            if len(rows) < PAGE:
                return
            last = rows[-1][0]


def open_playbook(location: str | Path, *, read_only: bool = False, **options: Any) -> Playbook:
    """The one factory: a `Playbook` on the SQLite file or the PostgreSQL schema `location` names (`backend`;
    `options` as `Playbook` takes them: `busy_timeout_s`, `labels`)."""
    return Playbook(location, read_only=read_only, **options)


def discard_episodes(path: str | Path, run_id: str, episode_ids: Iterable[str]) -> tuple[int, int]:
    """In the playbook at `path` (a file or a PostgreSQL URL), take back what unfinished plays of these episodes
    of run `run_id` wrote (`Playbook.discard_episodes`); return (lessons removed, counter updates taken back).

    Opens the playbook for writing only when it holds such writes: a missing file (or schema) is not created,
    and a playbook the episodes never wrote to (a shipped one, read-only) is only read.
    """
    episodes = list(episode_ids)
    if not episodes or not playbook_exists(path) or not is_database_url(path) and has_no_tables(Path(path)):
        return 0, 0  # no playbook yet, or one whose creation was cut off (a kill, a full disk): nothing to take back
    with Playbook(path, read_only=True) as playbook:
        if not playbook.has_episode_writes(run_id, episodes):
            return 0, 0
    with Playbook(path) as playbook:
        return playbook.discard_episodes(run_id, episodes)


def import_file(path: str | Path, source: str | Path, *, fmt: str = "jsonl", strict: bool = False,
                progress: Progress | None = None) -> ImportReport:
    """Import a JSONL (`fmt="jsonl"`) or ACE (`"ace"`) file into the playbook at `path`, complete or not at all.

    An existing playbook gets the lessons in one transaction (`import_jsonl`, `import_ace`), so an import cut off
    by an error, Ctrl-C or a kill leaves it as it was (a new PostgreSQL schema made for the import is dropped again,
    but after a kill). A new file is built under a temporary name beside `path` and
    linked into place once the import is complete, so a cut-off import leaves no playbook there (a kill may leave
    the hidden temporary file, `.<name>.*.importing`, which can be deleted). PlaybookError when a playbook
    appeared at `path` meanwhile (nothing is imported into it).
    """
    def fill(file: Path | str) -> ImportReport:
        with Playbook(file) as playbook:
            if fmt == "jsonl":
                return playbook.import_jsonl(source, progress=progress)
            return playbook.import_ace(source, strict=strict, progress=progress)
    if is_database_url(path):  # the lessons go in one transaction; a missing schema is made first
        problem = location_problem(path)
        if problem:
            raise PlaybookError(problem if problem.startswith(shown(path)) else f"{shown(path)}: {problem}")
        if playbook_exists(str(path)):
            return fill(str(path))
        try:
            return fill(str(path))
        except BaseException:  # (Ctrl-C too) the schema was made for this import: take it back
            from playground.plugins.playbook.postgres import drop

            drop(str(path))
            raise
    target = Path(path)
    check_is_playbook_or_new(target)
    return fill(target) if target.exists() else maintenance.build_new(target, fill)


def _stage(progress: Progress | None, stage: str, total: int | None = None) -> Callable | None:
    """`progress` for one stage of an import: called with (done, in all) for "read", with (done) and `total` for
    "write"; None without a `progress`."""
    if progress is None:
        return None
    if stage == "read":
        return lambda done, in_all: progress(stage, done, in_all)
    return lambda done: progress(stage, done, total)


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

