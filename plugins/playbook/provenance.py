"""Provenance: where a playbook's lessons and counter updates came from, and the audit trail of every write.

Every add, import, outcome, merge, prune and discard appends a row to the change log (`log`,
read back as `Change` rows), so a playbook's growth can be audited.

Exactly once across kills and resumes: what an episode writes is keyed by its provenance
(run, episode, attempt, step: the host's episode key, `playground.host_api.EPISODE_FIELDS`, and the
step of the repair). A lesson stored again under the same provenance returns the
stored one (`lesson_origins`); a counter update under a provenance counts once per lesson
(`lesson_uses`: one row per (provenance, lesson, kind), counters raised only when the row is
new). Before an unfinished episode is played again, `discard_episodes` removes the lessons it
stored and takes back the counter updates it made, so the replay starts from the playbook an
uninterrupted run would have had and may take another path.

The functions here work inside the caller's transaction on an open connection: SQLite's, or the PostgreSQL
backend's session (`backend.dialect` tells them apart where their SQL differs).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground.host_api import EPISODE_FIELDS, key_values
from playground.plugins.playbook.backend import dialect
from playground.plugins.playbook.io import label_key
from playground.plugins.playbook.schema import COLUMNS, INSERT, KEYED_TABLES, PROVENANCE, lesson_from_row, trigger_group

ORIGIN_KEYS = (*EPISODE_FIELDS, "step")  # the episode key and the step of the write
_ENV_CHECKED: set[tuple[str, str, str]] = set()  # (playbook file, run, env) checked by `other_env_warning`
CHANGES = "SELECT id, at, op, lesson_id, details FROM changes WHERE id > ? ORDER BY id LIMIT ?"  # keyset-paged


@dataclass(frozen=True)
class Change:
    """One row of a playbook's append-only change log."""

    id: int
    at: float
    op: str  # "add", "import", "outcome", "merge", "prune" or "discard"
    lesson_id: int | None
    details: dict[str, Any]


def change_from_row(row: tuple) -> Change:
    """The Change a row of the CHANGES query holds."""
    return Change(row[0], row[1], row[2], row[3], json.loads(row[4]))


def log(db: Any, op: str, lesson_id: int | None, details: dict) -> None:
    """Append a row to the change log."""
    db.execute("INSERT INTO changes (at, op, lesson_id, details) VALUES (?, ?, ?, ?)",
               (time.time(), op, lesson_id, json.dumps(details, ensure_ascii=False, default=str)))


def origin_key(provenance: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """The identity of a lesson stored by an episode: (run, episode, attempt, step) from its provenance,
    as text; None unless run, episode and step are all there (`attempt` is optional: "" when missing)."""
    if not all(provenance.get(name) not in (None, "") for name in ("run", "episode", "step")):
        return None
    return tuple(origin_part(value) for value in key_values(provenance, ORIGIN_KEYS, ""))  # type: ignore[return-value]


def origin_part(value: Any) -> str:
    """One part of an origin key as stored: the value as JSON text."""
    return json.dumps(value, sort_keys=True, default=str)


# ---- writing lessons ----------------------------------------------------------------------

def insert(db: Any, record: dict, op: str, details: dict) -> int:
    """Insert a checked lesson record, log it as `op` with `details`, and return its id."""
    values = _values(record)
    if dialect(db) == "postgresql":
        lesson_id = db.execute(INSERT + " RETURNING id", values).fetchone()[0]
    else:
        lesson_id = db.execute(INSERT, values).lastrowid
    assert lesson_id is not None  # set by an INSERT
    log(db, op, lesson_id, _added(record, details))
    return lesson_id


# PostgreSQL: `insert_once` with an origin in one statement (one round trip instead of four): the lesson the origin
# stored, or a new one with its change logged and its origin kept
INSERT_ONCE = (
    "WITH found AS (SELECT lesson_id FROM lesson_origins WHERE run = ? AND episode = ? AND attempt = ? AND step = ?), "
    f"added AS ({INSERT.split(' VALUES ')[0]} SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
    "WHERE NOT EXISTS (SELECT 1 FROM found) RETURNING id), "
    "logged AS (INSERT INTO changes (at, op, lesson_id, details) SELECT ?, 'add', id, ? FROM added), "
    "kept AS (INSERT INTO lesson_origins (run, episode, attempt, step, lesson_id) SELECT ?, ?, ?, ?, id FROM added) "
    "SELECT lesson_id FROM found UNION ALL SELECT id FROM added")


def _values(record: dict) -> tuple:
    """The values of INSERT's columns for a checked lesson record."""
    return (record["failure_type"], label_key(record["labels"]), record["subtype"], record["trigger"],
            record["principle"], json.dumps(record["provenance"], ensure_ascii=False, default=str),
            record["created_at"], record["retrieved"], record["verified"], record["helped"],
            trigger_group(record["subtype"], record["trigger"]))


def _added(record: dict, details: dict) -> dict:
    """The change log's details of a lesson added (`insert`, `insert_once`): its failure type and labels, then
    `details`."""
    return {"failure_type": record["failure_type"], "labels": list(record["labels"]), **details}


def insert_once(db: Any, record: dict) -> int:
    """Insert a lesson unless its provenance (run, episode, attempt, step) already stored one; return the id. With an
    origin, one statement on PostgreSQL (`in_one_statement`)."""
    origin = origin_key(record["provenance"])
    if origin is not None and dialect(db) == "postgresql":
        details = json.dumps(_added(record, {}), ensure_ascii=False, default=str)  # as `log` writes them
        return db.execute(INSERT_ONCE, (*origin, *_values(record), time.time(), details, *origin)).fetchone()[0]
    if origin is not None:
        found = db.execute("SELECT lesson_id FROM lesson_origins WHERE run = ? AND episode = ? AND attempt = ? "
                           "AND step = ?", origin).fetchone()
        if found is not None:
            return found[0]
    lesson_id = insert(db, record, "add", {})
    if origin is not None:
        db.execute("INSERT INTO lesson_origins (run, episode, attempt, step, lesson_id) VALUES (?, ?, ?, ?, ?)",
                   (*origin, lesson_id))
    return lesson_id


def in_one_statement(lesson_ids: list[int] | None, key: tuple[str, str, str, str] | None) -> bool:
    """Whether, on PostgreSQL, a write under origin `key` is one statement (`Backend.write(one_statement=True)`):
    `insert_once` (lesson_ids None), or `count_retrieved` and `count_outcomes` of distinct lessons."""
    return key is not None and (lesson_ids is None or len(set(lesson_ids)) == len(lesson_ids))


# ---- counting uses ------------------------------------------------------------------------

def first_use(db: Any, key: tuple[str, str, str, str] | None, lesson_id: int, kind: str,
              added: tuple[int, int, int]) -> bool:
    """True when a counter update of `kind` for the lesson is to be counted: the lesson exists and, for an
    update with an origin `key`, that origin has not counted it before (the update is then recorded with what
    it adds to (retrieved, verified, helped))."""
    if db.execute("SELECT 1 FROM lessons WHERE id = ?", (lesson_id,)).fetchone() is None:
        return False
    if key is None:
        return True
    inserted = db.execute("INSERT INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, "
                          "retrieved, verified, helped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING "
                          "RETURNING lesson_id", (*key, lesson_id, kind, *added)).fetchone()
    return inserted is not None


# PostgreSQL: `count_retrieved` of distinct lessons in one statement (one round trip instead of three per lesson)
COUNT_RETRIEVED_ONCE = (
    "WITH present AS (SELECT id FROM lessons WHERE id = ANY(?)), "
    "used AS (INSERT INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, retrieved, verified, helped) "
    "SELECT ?, ?, ?, ?, id, 'retrieved', 1, 0, 0 FROM present ON CONFLICT DO NOTHING RETURNING lesson_id) "
    "UPDATE lessons SET retrieved = retrieved + 1 WHERE id IN (SELECT lesson_id FROM used)")


def count_retrieved(db: Any, lesson_ids: list[int], key: tuple[str, str, str, str] | None) -> None:
    """Raise the `retrieved` counter of each lesson whose retrieval under origin `key` is a first use."""
    if key is not None and dialect(db) == "postgresql" and in_one_statement(lesson_ids, key):
        db.execute(COUNT_RETRIEVED_ONCE, (list(lesson_ids), *key))
        return
    for lesson_id in lesson_ids:
        if first_use(db, key, lesson_id, "retrieved", (1, 0, 0)):
            db.execute("UPDATE lessons SET retrieved = retrieved + 1 WHERE id = ?", (lesson_id,))


# PostgreSQL: `count_outcomes` with an origin in one statement (one round trip instead of five a lesson): which of
# the lessons exist, each use recorded once per origin, the counters raised and the change logged for first uses only;
# nothing counted unless every lesson exists (the statement is its own transaction: none to roll back)
COUNT_OUTCOMES_ONCE = (
    "WITH present AS (SELECT id FROM lessons WHERE id = ANY(?)), "
    "used AS (INSERT INTO lesson_uses (run, episode, attempt, step, lesson_id, kind, retrieved, verified, helped) "
    "SELECT ?, ?, ?, ?, id, 'outcome', 0, ?, ? FROM present WHERE (SELECT COUNT(*) FROM present) = ? "
    "ON CONFLICT DO NOTHING RETURNING lesson_id), "
    "counted AS (UPDATE lessons SET verified = verified + ?, helped = helped + ? "
    "WHERE id IN (SELECT lesson_id FROM used) RETURNING id), "
    "logged AS (INSERT INTO changes (at, op, lesson_id, details) SELECT ?, 'outcome', id, ? FROM counted "
    "ORDER BY id) "
    "SELECT id FROM present")


def count_outcomes(db: Any, path: Path | str, lesson_ids: list[int], key: tuple[str, str, str, str] | None,
                   verified: bool, helped: bool) -> None:
    """Count each lesson's outcome unless origin `key` counted it before; KeyError names the first lesson that is
    not there (then nothing is counted: the caller's transaction is rolled back)."""
    added = (0, int(bool(verified)), int(bool(helped)))
    details = {"verified": bool(verified), "helped": bool(helped),
               **({"origin": dict(zip(ORIGIN_KEYS, key))} if key else {})}
    if key is not None and dialect(db) == "postgresql" and in_one_statement(lesson_ids, key):
        logged = json.dumps(details, ensure_ascii=False, default=str)
        present = {row[0] for row in db.execute(COUNT_OUTCOMES_ONCE, (list(lesson_ids), *key, *added[1:],
                                                                      len(lesson_ids), *added[1:], time.time(),
                                                                      logged))}
        missing = [lesson_id for lesson_id in lesson_ids if lesson_id not in present]
        if missing:
            raise KeyError(f"no lesson {missing[0]} in {path}")
        return
    for lesson_id in lesson_ids:
        if db.execute("SELECT 1 FROM lessons WHERE id = ?", (lesson_id,)).fetchone() is None:
            raise KeyError(f"no lesson {lesson_id} in {path}")
        if not first_use(db, key, lesson_id, "outcome", added):
            continue  # counted before, under the same origin
        db.execute("UPDATE lessons SET verified = verified + ?, helped = helped + ? WHERE id = ?",
                   (added[1], added[2], lesson_id))
        log(db, "outcome", lesson_id, details)


# ---- taking back an episode's writes ------------------------------------------------------

def discard(db: Any, run_id: str, episodes: list[str]) -> tuple[int, int]:
    """Take back what these episodes of run `run_id` wrote (see `Playbook.discard_episodes`); return (lessons
    removed, counter updates taken back)."""
    run = origin_part(run_id)
    larger = "GREATEST" if dialect(db) == "postgresql" else "MAX"  # the larger of two values
    removed = undone = 0
    for episode_id in episodes:  # first every discarded episode's counter updates: their uses do not count
        episode = origin_part(episode_id)
        uses = db.execute("SELECT lesson_id, retrieved, verified, helped FROM lesson_uses "
                          "WHERE run = ? AND episode = ?", (run, episode)).fetchall()
        for lesson_id, retrieved, verified, helped in uses:
            db.execute(f"UPDATE lessons SET retrieved = {larger}(retrieved - ?, 0), "
                       f"verified = {larger}(verified - ?, 0), helped = {larger}(helped - ?, 0) WHERE id = ?",
                       (retrieved, verified, helped, lesson_id))
        db.execute("DELETE FROM lesson_uses WHERE run = ? AND episode = ?", (run, episode))
        if uses:
            log(db, "discard", None, {"run": run_id, "episode": episode_id, "counter_updates": len(uses)})
        undone += len(uses)
    for episode_id in episodes:  # then the lessons they stored
        episode = origin_part(episode_id)
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
                log(db, "replay_kept", lesson_id, {"run": run_id, "episode": episode_id,
                                                   "used_by_episodes": users})
                continue
            db.execute("DELETE FROM lessons WHERE id = ?", (lesson_id,))  # its origin goes with it
            log(db, "discard", lesson_id, {"run": run_id, "episode": episode_id,
                                           "lesson": lesson_from_row(row).to_dict()})
            removed += 1
    return removed, undone


def has_writes(db: Any, keys: list[tuple[str, str]]) -> bool:
    """True when one of these (run, episode) origin keys stored a lesson or a counter update here."""
    if dialect(db) == "postgresql":
        tables = set(KEYED_TABLES)  # made with the playbook
    else:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return any(db.execute(f"SELECT 1 FROM {table} WHERE run = ? AND episode = ? LIMIT 1", key).fetchone()
               for table in KEYED_TABLES if table in tables for key in keys)


# ---- the envs lessons come from -----------------------------------------------------------

def env_counts(db: Any) -> dict[str, int]:
    """Lessons by the env their provenance records (`"env"`, as Sentry writes it), most first; lessons that record
    none (imported ACE bullets, hand-written lessons) are not counted."""
    if dialect(db) == "postgresql":
        from playground.plugins.playbook.postgres_schema import ENV_COUNTS

        rows = db.execute(ENV_COUNTS).fetchall()
    else:
        rows = db.execute("SELECT json_extract(provenance, '$.env') AS env, COUNT(*) FROM lessons "
                          "WHERE json_valid(provenance) AND env IS NOT NULL GROUP BY env").fetchall()
    return {str(env): count for env, count in sorted(rows, key=lambda row: (-row[1], str(row[0])))}


def other_env_warning(path: Path | str, origin: dict[str, Any],
                      read_counts: Callable[[], dict[str, int]]) -> str | None:
    """The warning for an episode retrieving from the playbook at `path` under `origin` (its provenance: run, env,
    ...): None unless most of the lessons that record an env (`read_counts()`, i.e. `env_counts`) come from envs
    other than `origin["env"]`, and None when this process has checked this file, run and env before."""
    env = str(origin.get("env"))
    seen = (str(Path(path).resolve()), str(origin.get("run")), env)
    if seen in _ENV_CHECKED:
        return None
    _ENV_CHECKED.add(seen)
    counts = read_counts()
    recorded, same = sum(counts.values()), counts.get(env, 0)
    if not recorded or 2 * same >= recorded:
        return None
    others = [f"{name} {count}" for name, count in counts.items() if name != env]
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    return (f"warning: playbook {path}: {recorded - same} of the {recorded} lessons that record an env come from "
            f"another env ({shown}), and this run plays {env}: they may not apply here "
            f"(`playground playbook stats {path}` lists the envs)")
