"""Issue 53, item 4: the stores that keep what episodes write share one exactly-once key, the host's
(`playground.run.exactly_once`, exported by `playground.host_api`).

The playbook (SQLite: lessons and counter updates keyed by their episode's provenance, in the write's own
transaction, taken back by `discard_episodes`) and the baselines' memory files (JSONL records that carry their
episode's key, written under a file lock, a replay's writes dropped) keep their keys, serialise their writers and
treat a replay each in their own way. What they share is the key of an episode's writes and the rule that a write
found under its key is not applied again: that is the host's, and neither plugin spells it out again.
"""

from __future__ import annotations

import ast
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from playground import EpisodeIds
from playground.host_api import EPISODE_FIELDS, episode_key, key_values, written_under
from playground.plugins.baselines.memory import FileMemory, append_once, written_before
from playground.plugins.baselines.store import read_records
from playground.plugins.playbook.store import Playbook, discard_episodes

ROOT = Path(__file__).resolve().parents[1]
IDS = EpisodeIds(run_id="r1", episode_id="r1:h:t", env="tiny", task_id="t", harness="h")
SHARED = ("EPISODE_FIELDS", "episode_key", "key_values", "written_under")


# ---- the key on its own -------------------------------------------------------------------

def test_the_key_is_the_episodes_run_episode_and_attempt_then_finer_fields():
    assert EPISODE_FIELDS == ("run", "episode", "attempt")
    assert episode_key(IDS) == {"run": "r1", "episode": "r1:h:t", "attempt": 1}
    key = episode_key(EpisodeIds("r1", "r1:h:t", "tiny", "t", "h", attempt=2), step=7)
    assert list(key.items()) == [("run", "r1"), ("episode", "r1:h:t"), ("attempt", 2), ("step", 7)]  # in order
    assert key_values({"episode": "e", "run": "r", "other": 1}) == ("r", "e", None)
    assert key_values({"run": "r"}, ("run", "step"), missing="") == ("r", "")


def _write(store: list[dict], key: dict, records: list[dict]) -> bool:
    """A store in a list: the records of `key` are added unless a record of `key` is there."""
    if written_under(store, key):
        return False
    store.extend({**key, **record} for record in records)
    return True


def test_a_repeated_write_of_one_episode_is_applied_once():
    store: list[dict] = []
    assert _write(store, episode_key(IDS), [{"x": 1}, {"x": 2}])
    assert not _write(store, episode_key(IDS), [{"x": 3}])  # the replayed episode: nothing again
    assert _write(store, episode_key(EpisodeIds("r1", "r1:h:t", "tiny", "t", "h", attempt=2)), [{"x": 4}])
    assert _write(store, episode_key(EpisodeIds("r2", "r1:h:t", "tiny", "t", "h")), [{"x": 5}])  # another run
    assert [r["x"] for r in store] == [1, 2, 4, 5]
    assert not written_under([{"run": "r1", "episode": "r1:h:t"}], episode_key(IDS))  # a record without attempt
    assert written_under([{**episode_key(IDS), "step": 3}], episode_key(IDS))  # finer fields of the record


def test_discarding_an_unfinished_episode_frees_its_key_for_the_replay():
    """`discard_episodes(run_id, episode_ids)` names episodes by the key's first two fields."""
    store: list[dict] = []
    _write(store, episode_key(IDS), [{"x": 1}])
    _write(store, episode_key(EpisodeIds("r1", "r1:h:u", "tiny", "u", "h")), [{"x": 2}])
    unfinished = {("r1", "r1:h:t")}
    store[:] = [r for r in store if key_values(r, EPISODE_FIELDS[:2]) not in unfinished]
    assert _write(store, episode_key(IDS), [{"x": 3}])  # the replay writes anew
    assert [r["x"] for r in store] == [2, 3]


# ---- both stores, one key -----------------------------------------------------------------

def test_the_playbook_keys_a_lesson_by_the_host_key_and_discards_an_unfinished_episode(tmp_path):
    path = tmp_path / "pb.sqlite"
    provenance = episode_key(IDS, step=3)
    with Playbook(path) as book:
        first = book.add("progress", ["planning_stall"], "idles", "act", provenance=provenance)
        assert book.add("progress", ["planning_stall"], "idles again", "act", provenance=dict(provenance)) == first
        assert len(book) == 1
    db = sqlite3.connect(path)  # the file format: each part of the origin as JSON text
    assert db.execute("SELECT run, episode, attempt, step, lesson_id FROM lesson_origins").fetchall() == \
        [('"r1"', '"r1:h:t"', "1", "3", first)]
    db.close()
    assert discard_episodes(path, IDS.run_id, [IDS.episode_id]) == (1, 0)
    with Playbook(path) as book:
        assert len(book) == 0
        assert book.add("progress", ["planning_stall"], "idles", "act", provenance=provenance) != first  # replayed


def test_a_baseline_memory_file_keeps_an_episodes_records_once_under_the_host_key(tmp_path):
    path = tmp_path / "pb.memory.jsonl"
    append_once(FileMemory(path), episode_key(IDS), [{"item": "a"}, {"item": "b"}])
    append_once(FileMemory(path), episode_key(IDS), [{"item": "c"}])  # the replayed episode
    assert path.read_text() == ('{"run": "r1", "episode": "r1:h:t", "attempt": 1, "item": "a"}\n'
                                '{"run": "r1", "episode": "r1:h:t", "attempt": 1, "item": "b"}\n')  # the file format
    assert written_before(FileMemory(path), episode_key(IDS))
    assert not written_before(FileMemory(path), episode_key(EpisodeIds("r1", "r1:h:t", "tiny", "t", "h", attempt=2)))
    assert [r["item"] for r in read_records(path)] == ["a", "b"]


ITEMS = [{"item": i} for i in range(30)]  # a batch long enough for unserialised writers to overlap


def _write_once_each(folder: str, together, errors) -> None:
    """One writer: the same episode's write to a playbook, then to a memory file, each at once with the others."""
    try:
        with Playbook(Path(folder) / "pb.sqlite") as book:
            together.wait(60)
            book.add("progress", ["planning_stall"], "idles", "act", provenance=episode_key(IDS, step=3))
        together.wait(60)
        append_once(FileMemory(Path(folder) / "pb.memory.jsonl"), episode_key(IDS), ITEMS)
    except Exception as error:  # reported to the parent, which fails the test
        errors.put(repr(error))


@pytest.mark.slow
def test_concurrent_writers_of_one_episode_write_it_once(tmp_path):
    Playbook(tmp_path / "pb.sqlite").close()
    context = multiprocessing.get_context("spawn")
    together, errors = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_write_once_each, args=(str(tmp_path), together, errors)) for _ in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    assert errors.empty(), errors.get()
    with Playbook(tmp_path / "pb.sqlite", read_only=True) as book:
        assert len(book) == 1 and [c.op for c in book.changes()] == ["add"]
    assert [r["item"] for r in read_records(tmp_path / "pb.memory.jsonl")] == list(range(len(ITEMS)))


# ---- neither plugin spells the key out again ----------------------------------------------

def _host_imports(tree: ast.AST) -> set[str]:
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module == "playground.host_api" for alias in node.names}


def _respelled_keys(tree: ast.AST) -> list[str]:
    """What in a module re-implements the key: a definition of one of the host's names, or a literal holding
    all the key's field names (a tuple, list or set of them, or a dict with them as keys)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in SHARED:
            found.append(f"line {node.lineno}: def {node.name}")
        if isinstance(node, ast.Dict):
            items = list(node.keys)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = list(node.elts)
        else:
            continue
        strings = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
        if set(EPISODE_FIELDS) <= strings:
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


PLUGIN_MODULES = sorted([*(ROOT / "plugins" / "playbook").glob("*.py"), *(ROOT / "plugins" / "baselines").glob("*.py")])


def test_both_plugins_take_the_key_from_the_host():
    def uses(module: str) -> set[str]:
        return _host_imports(ast.parse((ROOT / "plugins" / module).read_text())) & set(SHARED)

    assert uses("playbook/provenance.py") == {"EPISODE_FIELDS", "key_values"}
    assert uses("baselines/memory.py") == {"written_under"}  # store.py reads and writes the files only
    for baseline in ("ace", "awm", "reasoningbank", "reflexion"):
        assert uses(f"baselines/{baseline}.py") == {"episode_key"}, baseline


@pytest.mark.parametrize("path", PLUGIN_MODULES, ids=[f"{p.parent.name}/{p.name}" for p in PLUGIN_MODULES])
def test_no_playbook_or_baselines_module_respells_the_key(path):
    assert not _respelled_keys(ast.parse(path.read_text())), path


@pytest.mark.parametrize("planted", [
    'ORIGIN_KEYS = ("run", "episode", "attempt", "step")',
    'def key(ids):\n    return {"run": ids.run_id, "episode": ids.episode_id, "attempt": ids.attempt}',
    'def written_under(records, key):\n    return False',
])
def test_a_respelled_key_is_caught(planted):
    assert _respelled_keys(ast.parse(planted))

