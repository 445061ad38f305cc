"""Retrieval: which lessons of a playbook answer a detected failure, and in what order.

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

import heapq
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator

from playground.plugins.playbook.backend import dialect
from playground.plugins.playbook.schema import COLUMNS, GROUP, Lesson, lesson_from_row

REPEATS_CHECK = 128  # rows retrieval reads at one overlap level before it looks up the unseen triggers
GROUPS_CHECK_LIMIT = 1_000  # ... provided the level has at most this many distinct (subtype, trigger)
# Ranking reads only what it ranks by past each label set's first page: a candidate there is (id, created_at,
# trigger_group) until it is picked, and the whole rows of the lessons picked so are read at the end, in one statement
# (most rows a long ranking reads are passed over). A first page (k rows, where most retrievals stop) carries the
# whole rows after those three columns, so a retrieval picked from first pages makes no extra statement.
RANKED = "id, created_at, trigger_group"
RANKED_ID, RANKED_CREATED_AT, RANKED_GROUP = 0, 1, 2  # positions in a row of RANKED
RANKED_COLUMNS = RANKED.split(", ")
LESSONS_RANKED = ", ".join(f"lessons.{name}" for name in RANKED_COLUMNS)  # RANKED, named by table
RETRIEVAL_MODES = ("labels", "type", "any", "random")  # `Playbook.retrieve(mode=...)`; all but "labels" are ablations

NEWEST = (f"SELECT {RANKED}, {COLUMNS} FROM lessons WHERE failure_type = ? AND label_key = ? "
          "ORDER BY created_at DESC, id DESC LIMIT ?")
NEWEST_BEFORE = (f"SELECT {RANKED} FROM lessons WHERE failure_type = ? AND label_key = ? "
                 "AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?")
# the newest lesson of each trigger group of a label set, smallest group first: the groups walked by a loose index
# scan (one index probe a group), each group's newest row found by its id (one more)
NEWEST_OF_GROUPS = """WITH RECURSIVE groups (trigger_group) AS (
        SELECT MIN(trigger_group) FROM lessons WHERE failure_type = :type AND label_key = :key
        UNION ALL
        SELECT (SELECT MIN(trigger_group) FROM lessons WHERE failure_type = :type AND label_key = :key
                AND trigger_group > groups.trigger_group)
        FROM groups WHERE groups.trigger_group IS NOT NULL LIMIT :limit)
    SELECT {columns} FROM groups JOIN lessons ON lessons.id = (
        SELECT id FROM lessons WHERE failure_type = :type AND label_key = :key AND trigger_group = groups.trigger_group
        ORDER BY created_at DESC, id DESC LIMIT 1)"""


@dataclass(frozen=True)
class Retrieved:
    """A lesson picked by `Playbook.retrieve`, the query labels it shares, and why it was picked."""

    lesson: Lesson
    shared_labels: tuple[str, ...]
    reason: str


def pick(db: Any, mode: str, failure_type: str, query: set[str], k: int,
         rng: random.Random | None) -> list[Retrieved]:
    """Return the at most k lessons retrieval `mode` (one of RETRIEVAL_MODES) picks for a failure."""
    if mode == "labels":
        return _pick(db, failure_type, query, k)
    if mode == "type":
        return _pick(db, failure_type, set(), k, reason="type only: most recent of type")
    if mode == "any":
        return _pick_any(db, query, k)
    return _pick_random(db, query, k, rng or random.Random())


def _pick(db: Any, failure_type: str, query: set[str], k: int,
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
        # every label set's first page asked for before any is read: one round trip to a server in a pipeline
        firsts = [db.execute(NEWEST, (failure_type, key, k)) for key in keys]
        streams = [_newest(db, failure_type, key, k, first) for key, first in zip(keys, firsts)]
        check_at = max(REPEATS_CHECK, 2 * k)
        level_picks = 0  # picked at this level
        for scanned, row in enumerate(heapq.merge(*streams, key=_rank), start=1):
            if row[RANKED_GROUP] in seen:
                repeats.append((overlap, row))
            else:
                seen.add(row[RANKED_GROUP])
                picked.append((overlap, row))
                level_picks += 1
            if len(picked) == k:
                break
            # Mostly repeats so far: rather than read on through them, take the newest lesson of each trigger group
            # of this level not seen yet. Checked at the end of the first page (k rows, when more than half were
            # repeats), then at check_at rows, doubled while the level has too many groups for the check.
            first_page_end = scanned == k and 2 * level_picks < k
            if first_page_end or scanned == check_at:
                unseen = _unseen_newest(db, failure_type, keys, seen)
                if unseen is not None:
                    picked += [(overlap, row) for row in unseen[:k - len(picked)]]
                    seen.update(row[RANKED_GROUP] for row in unseen)
                    break
                if not first_page_end:
                    check_at *= 2
        if len(picked) == k:
            break
    picked += repeats[:k - len(picked)]
    rows = _whole_rows(db, [row for _, row in picked])
    return [_retrieved(overlap, rows[row[RANKED_ID]], query, reason) for overlap, row in picked]


def _whole_rows(db: Any, ranked: list[tuple]) -> dict[int, tuple]:
    """The rows (COLUMNS) of the `ranked` lessons, by id: a first page's carry theirs, the others are read in one
    statement."""
    rows = {row[RANKED_ID]: row[len(RANKED_COLUMNS):] for row in ranked if len(row) > len(RANKED_COLUMNS)}
    missing = [row[RANKED_ID] for row in ranked if row[RANKED_ID] not in rows]
    if missing:
        marks = ", ".join("?" * len(missing))
        found = db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id IN ({marks})", missing)
        rows.update((row[0], row) for row in found)
    return rows


def _pick_any(db: Any, query: set[str], k: int) -> list[Retrieved]:
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


def _pick_random(db: Any, query: set[str], k: int, rng: random.Random) -> list[Retrieved]:
    """Retrieval mode "random": k lessons of any type drawn uniformly."""
    ids = [row[0] for row in db.execute("SELECT id FROM lessons ORDER BY id")]
    chosen = rng.sample(ids, min(k, len(ids)))
    rows = [db.execute(f"SELECT {COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone() for lesson_id in chosen]
    return [_retrieved(0, row, query, "random draw") for row in rows]


def _rank(row: tuple) -> tuple[float, int]:
    """The sort key of a RANKED row: newest first, then the higher id."""
    return -row[RANKED_CREATED_AT], -row[RANKED_ID]


def _unseen_newest(db: Any, failure_type: str, keys: list[str], seen: set[int]) -> list[tuple] | None:
    """Return the newest lesson (a RANKED row) of each trigger group not in `seen` among lessons with these label
    sets, in rank order; None when the label sets hold more than GROUPS_CHECK_LIMIT groups."""
    query = NEWEST_OF_GROUPS
    if dialect(db) == "postgresql":
        from playground.plugins.playbook.postgres_schema import NEWEST_OF_GROUPS as query
    query = query.format(columns=LESSONS_RANKED)
    groups: set[tuple[str, int]] = set()
    newest: dict[int, tuple] = {}
    # every label set's groups asked for before any is read: one round trip to a server in a pipeline
    asked = [(key, db.execute(query, {"type": failure_type, "key": key, "limit": GROUPS_CHECK_LIMIT + 1}))
             for key in keys]
    for key, found in asked:
        for row in found:
            group = row[RANKED_GROUP]
            groups.add((key, group))
            if len(groups) > GROUPS_CHECK_LIMIT:
                return None
            if group not in seen and (group not in newest or _rank(row) < _rank(newest[group])):
                newest[group] = row
    return sorted(newest.values(), key=_rank)


def _newest(db: Any, failure_type: str, key: str, page: int, first: Any) -> Iterator[tuple]:
    """Yield the lessons (RANKED rows; the first page's with their whole rows after) with exactly this label set,
    newest first (`first`: the executed query of the first page of `page` rows), reading larger pages as it goes (the
    second at least REPEATS_CHECK rows)."""
    rows = first.fetchall()
    while True:
        yield from rows
        if len(rows) < page:
            return
        page = max(4 * page, REPEATS_CHECK)  # past the first page, straight to where `_pick` checks for repeats
        last = rows[-1]
        rows = db.execute(NEWEST_BEFORE, (failure_type, key, last[RANKED_CREATED_AT], last[RANKED_ID], page)).fetchall()


def _retrieved(overlap: int, row: tuple, query: set[str], fallback: str = "fallback: most recent of type") -> Retrieved:
    lesson = lesson_from_row(row)
    shared = tuple(sorted(query.intersection(lesson.labels)))
    if overlap:
        reason = f"shares {overlap} label{'s' if overlap > 1 else ''}: {', '.join(shared)}"
    else:
        reason = fallback
    return Retrieved(lesson, shared, reason)
