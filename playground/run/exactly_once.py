"""Exactly-once writes across kills and resumes: the key under which a store files what an episode wrote.

A plugin store that keeps what episodes write beyond the run directory (a lesson file, a memory
file) applies each episode's write once, even when the episode is played again: a run killed
before an episode's record was written replays that episode on resume, with the same ids (the
run id survives resumes), so its writes arrive a second time. Each write therefore carries the
key of the episode that made it, `episode_key(ids)`: the fields `EPISODE_FIELDS` (run id,
episode id, and the attempt of a cascade harness), plus finer fields where an attempt writes
several times (a step). A store that finds a write's key among what it holds (`written_under`,
or a lookup in its own index over `key_values`) knows the write was applied and does not apply
it again. The runner's `discard_episodes(run_id, episode_ids, ...)` hook names unfinished
episodes by the key's first two fields.

What is the store's own, and not here: how it keeps the keys (fields in each JSONL record, an
indexed table in the same transaction as the write), how it serialises concurrent writers (a
file lock, the database's locking), and what a replay does (keep the first play's writes, or
take them back through `discard_episodes` and write anew). The host knows no store's format.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from playground.core.payloads import EpisodeIds

# The fields that key an episode's writes, in the order they are written: run id, episode id, attempt.
EPISODE_FIELDS: tuple[str, ...] = ("run", "episode", "attempt")


def episode_key(ids: EpisodeIds, **finer: Any) -> dict[str, Any]:
    """The key of what the episode `ids` writes: `{"run", "episode", "attempt"}` from its ids, then the `finer`
    fields (e.g. `step=3`) of a store that keeps several writes per attempt."""
    return {"run": ids.run_id, "episode": ids.episode_id, "attempt": ids.attempt, **finer}


def key_values(record: Mapping[str, Any], fields: Iterable[str] = EPISODE_FIELDS, missing: Any = None) -> tuple:
    """The values of the key `fields` that `record` (a stored record, a provenance) carries, in order; `missing`
    stands for a field it lacks."""
    return tuple(record.get(field, missing) for field in fields)


def written_under(records: Iterable[Mapping[str, Any]], key: Mapping[str, Any]) -> bool:
    """Whether one of `records` carries `key` (each of the key's fields, with the same value): the write of that
    key was applied already, and a replay's is not to be applied again."""
    fields, values = tuple(key), tuple(key.values())
    return any(key_values(record, fields) == values for record in records)
