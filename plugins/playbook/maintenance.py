"""Playbook upkeep: merging near-duplicate lessons, pruning, importing lesson files, and writing exports and
whole copies. The functions that touch the database work inside the caller's transaction (SQLite's or
PostgreSQL's: the SQL here is what both understand)."""

from __future__ import annotations

import bisect
import glob
import hashlib
import json
import os
import re
import sqlite3
import tempfile
import time
from collections import Counter, defaultdict
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from playground.plugins.playbook.ace_format import write_ace
from playground.plugins.playbook.io import PlaybookError, label_key, write_jsonl
from playground.plugins.playbook.provenance import insert, log
from playground.plugins.playbook.schema import COLUMNS, ID, lesson_from_row

T = TypeVar("T")
MERGE_ROWS = ("SELECT id, failure_type, label_key, created_at, trigger_pattern, principle FROM lessons "
              "WHERE id > ? ORDER BY id LIMIT ?")  # keyset-paged: what `merge_plan` compares
ACE_HEADERS_KEY = "ace_headers"  # playbook_meta: the header lines of imported ACE files (`ace_headers`)
MAX_ACE_HEADERS = 10_000  # header lines recorded in all; more are not kept for export (the import report says so)
MOVE_USES = """INSERT INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, retrieved, verified, helped)
    SELECT run, episode, attempt, step, ?, kind, retrieved, verified, helped FROM lesson_uses WHERE lesson_id = ?
    ON CONFLICT (run, episode, attempt, step, lesson_id, kind) DO UPDATE SET
        retrieved = lesson_uses.retrieved + excluded.retrieved, verified = lesson_uses.verified + excluded.verified,
        helped = lesson_uses.helped + excluded.helped"""


# ---- merging ------------------------------------------------------------------------------

def merge_plan(rows: Iterable[tuple], similarity: float) -> list[tuple[int, int, float]]:
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


def apply_merge(db: Any, plan: list[tuple[int, int, float]]) -> int:
    """Merge each planned duplicate into the lesson kept (counters, origins and uses move there); return how many
    were removed. Pairs of which either lesson is gone meanwhile are passed over."""
    removed = 0
    for duplicate, keep, ratio in plan:
        row = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (duplicate,)).fetchone()
        if row is None or db.execute("SELECT 1 FROM lessons WHERE id = ?", (keep,)).fetchone() is None:
            continue  # removed meanwhile by another process
        lesson = lesson_from_row(row)
        db.execute("UPDATE lessons SET retrieved = retrieved + ?, verified = verified + ?, "
                   "helped = helped + ? WHERE id = ?", (lesson.retrieved, lesson.verified, lesson.helped, keep))
        db.execute("UPDATE lesson_origins SET lesson_id = ? WHERE lesson_id = ?", (keep, duplicate))
        db.execute(MOVE_USES, (keep, duplicate))  # the kept lesson now holds what they counted
        db.execute("DELETE FROM lessons WHERE id = ?", (duplicate,))
        log(db, "merge", duplicate, {"into": keep, "similarity": round(ratio, 4), "lesson": lesson.to_dict()})
        removed += 1
    return removed


# ---- pruning ------------------------------------------------------------------------------

def prune_planner(max_age_days: float | None, min_helped: int | None,
                  max_count: int | None) -> Callable[[Any], list[tuple[tuple, dict]]]:
    """Check `Playbook.prune`'s limits (ValueError for a negative one) and return the read that lists, changing
    nothing, the (row of COLUMNS, reason) of each lesson they remove, in the order they remove them (the age limit
    is measured from now)."""
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

    def plan(db: Any) -> list[tuple[tuple, dict]]:
        chosen: list[tuple[tuple, dict]] = []
        if conditions:
            rows = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE {' AND '.join(conditions)}", params).fetchall()
            chosen += [(row, {"max_age_days": max_age_days, "min_helped": min_helped}) for row in rows]
        if max_count is not None:
            gone = {row[ID] for row, _ in chosen}
            excess = db.execute("SELECT COUNT(*) FROM lessons").fetchone()[0] - len(gone) - max_count
            for row in db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY helped, created_at, id"):
                if excess <= 0:
                    break
                if row[ID] not in gone:  # the least helpful of the lessons left, oldest first among equals
                    chosen.append((row, {"max_count": max_count}))
                    excess -= 1
        return chosen
    return plan


def pruner(max_age_days: float | None, min_helped: int | None,
           max_count: int | None) -> Callable[[Any], int]:
    """Check `Playbook.prune`'s limits (ValueError for a negative one) and return the work that removes, in a
    transaction, the lessons `prune_planner` lists, logging each with its full record; it returns how many."""
    plan = prune_planner(max_age_days, min_helped, max_count)

    def apply(db: Any) -> int:
        chosen = plan(db)
        for row, reason in chosen:
            db.execute("DELETE FROM lessons WHERE id = ?", (row[ID],))
            log(db, "prune", row[ID], {**reason, "lesson": lesson_from_row(row).to_dict()})
        return len(chosen)
    return apply


# ---- importing and exporting --------------------------------------------------------------

def import_new(db: Any, path: str | Path, records: list[dict], kind: str,
               held: dict[int, int] | None = None,
               progress: Callable[[int], None] | None = None) -> tuple[list[int], list[int]]:
    """Insert the checked records read from file `path` (format `kind`) that the playbook does not hold yet (the
    same text and provenance); return (the new ids, the line numbers of records already there). `held`, when
    given, receives the line number -> id of the lesson held for each record already there. `progress`, when
    given, is called with the number of records done after each one (an exception it raises stops the import,
    and the caller's transaction then takes back everything).

    The lessons already held are found through one pass over those of the records' failure types and label
    sets (a hash of each one's text and provenance), not one search per record: an import of N records into a
    playbook of M lessons takes time in N + M, not N * M."""
    index = _identity_index(db, {(r["failure_type"], label_key(r["labels"])) for r in records})
    already: list[int] = []
    ids = []
    for done, record in enumerate(records, 1):  # a lesson already there (same text and provenance) is not added again
        provenance = json.dumps(record["provenance"], ensure_ascii=False, default=str)
        identity = _identity(record["failure_type"], label_key(record["labels"]), record["subtype"],
                             record["trigger"], record["principle"], provenance)
        same = next((lesson_id for lesson_id in index.get(identity, ()) if db.execute(
            "SELECT 1 FROM lessons WHERE id = ? AND failure_type = ? AND label_key = ? AND subtype = ? AND "
            "trigger_pattern = ? AND principle = ? AND provenance = ?",
            (lesson_id, record["failure_type"], label_key(record["labels"]), record["subtype"], record["trigger"],
             record["principle"], provenance)).fetchone()), None)
        if same is not None:
            already.append(record["line"])
            if held is not None:
                held[record["line"]] = same
        else:
            ids.append(insert(db, record, "import", {"source": str(path), "format": kind, "line": record["line"],
                                                     "source_id": record.get("source_id")}))
            index.setdefault(identity, []).append(ids[-1])
        if progress is not None:
            progress(done)
    return ids, already


def _identity(*fields: str) -> bytes:
    """A 128-bit hash of a lesson's type, label key, subtype, trigger, principle and provenance (as stored)."""
    text = "\0".join(fields).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


def _identity_index(db: Any, keys: set[tuple[str, str]]) -> dict[bytes, list[int]]:
    """The ids of the lessons of these (failure type, label key) pairs, by `_identity` (one indexed scan each)."""
    index: dict[bytes, list[int]] = defaultdict(list)
    for failure_type, key in keys:
        for row in db.execute("SELECT id, subtype, trigger_pattern, principle, provenance FROM lessons "
                              "WHERE failure_type = ? AND label_key = ?", (failure_type, key)):
            index[_identity(failure_type, key, *row[1:])].append(row[0])
    return index


def export_jsonl(db: Any, path: str | Path) -> int:
    """Write every lesson to a JSONL file (`io.write_jsonl`) and return the count."""
    rows = db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY id")
    return write_jsonl(path, (lesson_from_row(row).to_dict() for row in rows))


def import_ace(db: Any, path: str | Path, records: list[dict], headers: list[tuple[int, str]],
               progress: Callable[[int], None] | None = None) -> tuple[list[int], list[int], int]:
    """Insert the new records of ACE file `path` (`import_new`) and record its header lines (line, name) for
    `export_ace`, each anchored to the lesson of the first bullet after it; return (new ids, line numbers of
    records already there, header lines not recorded because the playbook holds MAX_ACE_HEADERS already). `progress`
    as in `import_new`."""
    held: dict[int, int] = {}
    ids, already = import_new(db, path, records, "ace", held, progress)
    line_ids = {**dict(zip([r["line"] for r in records if r["line"] not in held], ids)), **held}
    lines = sorted(line_ids)
    anchored = []
    for line, name in headers:
        after = bisect.bisect_right(lines, line)
        anchored.append((name, line_ids[lines[after]] if after < len(lines) else None))
    return ids, already, add_ace_headers(db, anchored)


def ace_headers(db: Any) -> list[tuple[str, int | None]]:
    """The header lines of the ACE files imported so far, as (name, id of the lesson after it or None), in order
    (playbook_meta's ACE_HEADERS_KEY; empty when there is none, or when it is not a list of such pairs)."""
    row = db.execute("SELECT value FROM playbook_meta WHERE key = ?", (ACE_HEADERS_KEY,)).fetchone()
    try:
        entries = json.loads(row[0]) if row else []
    except ValueError:
        return []
    valid = isinstance(entries, list) and all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
        and (e[1] is None or isinstance(e[1], int) and not isinstance(e[1], bool)) for e in entries)
    return [(name, anchor) for name, anchor in entries] if valid else []


def add_ace_headers(db: Any, entries: list[tuple[str, int | None]]) -> int:
    """Add header entries to those recorded, except the ones recorded already (a file imported again adds none);
    return how many were not recorded because MAX_ACE_HEADERS are."""
    recorded = ace_headers(db)
    unmatched = Counter(recorded)
    new = []
    for entry in entries:
        if unmatched[entry]:
            unmatched[entry] -= 1
        else:
            new.append(entry)
    room = max(MAX_ACE_HEADERS - len(recorded), 0)
    if new[:room]:
        db.execute("INSERT INTO playbook_meta (key, value) VALUES (?, ?) "
                   "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                   (ACE_HEADERS_KEY, json.dumps([list(entry) for entry in recorded + new[:room]], ensure_ascii=False)))
    return len(new) - len(new[:room])


def export_ace(db: Any, path: str | Path) -> int:
    """Write every lesson, in id order, to an ACE playbook text file (`ace_format.write_ace`, with the header lines
    of the imported ACE files, so empty sections and repeated headers come back) and return the count."""
    rows = db.execute(f"SELECT {COLUMNS} FROM lessons ORDER BY id").fetchall()
    return write_ace(path, (lesson_from_row(row).to_dict() for row in rows), ace_headers(db))


def copy_whole(source: Path, path: str | Path, backup: Callable[[Any], None]) -> Path:
    """Write a copy of the playbook file `source` to the new file `path` through `backup` (which fills the
    connection to the copy it is given), made beside `path` and renamed into place once complete, with the
    source's file mode. PlaybookError if `path` (or a side file of it) already exists."""
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
            backup(copy)
        finally:
            copy.close()
        os.chmod(temporary, source.stat().st_mode & 0o777)  # mkstemp makes it private; keep the source's mode
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def build_new(target: Path, fill: Callable[[Path], T]) -> T:
    """Make a new playbook at `target` complete or not at all: `fill(file)` builds it in a temporary file beside
    `target` (a Playbook it opens there, closed before it returns), which is then linked into place; on any
    failure, or when a file appeared at `target` meanwhile (PlaybookError), nothing is left at `target`. Returns
    what `fill` returns."""
    _remove_stale_builds(target)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.importing")
    sides = [temporary.with_name(temporary.name + side) for side in ("-wal", "-shm", "-journal")]
    try:
        result = fill(temporary)
        if any(side.exists() and side.stat().st_size for side in sides[::2]):
            raise PlaybookError(f"{temporary}: its changes were not all written into the file; nothing was made "
                                f"at {target}")
        try:
            os.link(temporary, target)  # never replaces a playbook made meanwhile
        except FileExistsError:
            raise PlaybookError(f"{target}: a playbook appeared there meanwhile; nothing was imported into it "
                                "(import again)") from None
        except OSError:  # a file system without hard links
            if target.exists():
                raise PlaybookError(f"{target}: a playbook appeared there meanwhile; nothing was imported into it "
                                    "(import again)") from None
            os.replace(temporary, target)
        return result
    finally:
        for leftover in (temporary, *sides):
            leftover.unlink(missing_ok=True)


def _remove_stale_builds(target: Path) -> None:
    """Remove the temporary files that `build_new` runs for `target` left when they were killed: those of a process
    that is no longer running (a file of a running one, or of a reused process id, is left alone)."""
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*.importing*"):
        pid = leftover.name[len(target.name) + 2:].split(".", 1)[0]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            leftover.unlink(missing_ok=True)
        except (ValueError, OSError):
            continue  # not one of ours, or a process we may not signal: running
