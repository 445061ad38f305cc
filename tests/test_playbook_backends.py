"""Issue 55: the playbook on PostgreSQL beside SQLite, with the same semantics, checked by one suite run on both
backends against a real PostgreSQL server (tests/postgres_server.py): lessons and their provenance, retrieval's
ranking, exactly-once writes from several processes, taking back an episode's writes, import/export, merge, show and
search; `playground playbook copy` between them with byte-identical exports; and a URL's password kept out of every
file a run writes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from playground.plugins.playbook import retrieval
from playground.plugins.playbook.backend import is_database_url, playbook_exists
from playground.plugins.playbook.io import PlaybookError
from playground.plugins.playbook.provenance import ORIGIN_KEYS, origin_key
from playground.plugins.playbook.store import Playbook, discard_episodes, open_playbook
from tests.conftest import cli
from tests.postgres_server import PASSWORD

LOOP, STALL, EXPLORE, STOP = "repetition_or_looping", "planning_stall", "over_exploration", "termination_miscalibration"
LABELS = [LOOP, STALL, EXPLORE, STOP]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    """Where a new playbook is made: a file, or a new schema on the test server."""
    if request.param == "sqlite":
        return str(tmp_path / "book.sqlite")
    return request.getfixturevalue("postgres_url")


def origin(episode: str, step: int = 1, run: str = "run-1") -> dict:
    return {"run": run, "episode": episode, "attempt": 1, "step": step, "env": "tiny"}


def fill(book: Playbook, count: int, seed: int = 7) -> list[int]:
    """Add `count` lessons drawn from a fixed random stream (labels, repeats of a trigger, times)."""
    rng = random.Random(seed)
    ids = []
    for number in range(count):
        labels = rng.sample(LABELS, rng.randint(1, 3))
        trigger = f"trigger {rng.randint(0, count // 4)}"  # repeats: the diversity cap has work
        ids.append(book.add("progress", labels, trigger, f"principle {number}", subtype=rng.choice(["", "a", "b"]),
                            created_at=float(rng.randint(1, 50)), provenance={"n": number}))
    return ids


def picked(book: Playbook, labels, k: int = 5, mode: str = "labels", seed: int = 1) -> list[tuple]:
    return [(item.lesson.id, item.reason, item.shared_labels)
            for item in book.retrieve("progress", labels, k, count=False, mode=mode, rng=random.Random(seed))]


# ---- the same semantics on both ------------------------------------------------------------------------------------

def test_lessons_and_their_provenance(location):
    with open_playbook(location) as book:
        first = book.add("progress", [LOOP], "looping", "stop looping", provenance=origin("e1"))
        again = book.add("progress", [LOOP], "looping", "stop looping", provenance=origin("e1"))  # a replay
        other = book.add("progress", [STALL, LOOP], "stuck", "plan", subtype="s", provenance=origin("e2"))
        assert first == again and other == first + 1 and len(book) == 2
        lesson = book.get(other)
        assert lesson.labels == (STALL, LOOP) and lesson.provenance == origin("e2") and lesson.subtype == "s"
        book.record_retrieved([first, other], origin=origin("e3", 4))
        book.record_retrieved([first, other], origin=origin("e3", 4))  # counted once per origin
        book.record_outcome(first, verified=True, helped=True, origin=origin("e3", 4))
        book.record_outcome(first, verified=True, helped=True, origin=origin("e3", 4))
        with pytest.raises(KeyError):
            book.record_outcome(999, verified=True, helped=False)
        with pytest.raises(KeyError):  # with an origin too (PostgreSQL counts it in one statement)
            book.record_outcome(999, verified=True, helped=False, origin=origin("e3", 5))
        with pytest.raises(KeyError):  # one repair's lessons together: all counted, or none
            book.record_outcomes([other, 999], verified=True, helped=True, origin=origin("e3", 6))
        stats = book.stats()
        assert stats["count"] == 2 and stats["counters"] == {"retrieved": 2, "verified": 1, "helped": 1}
        assert stats["by_env"] == {"tiny": 2} and stats["by_label"]["progress"] == {LOOP: 2, STALL: 1}
        assert [change.op for change in book.changes()] == ["add", "add", "outcome"]
        outcome = list(book.changes())[-1]
        assert outcome.lesson_id == first and outcome.details == {
            "verified": True, "helped": True, "origin": dict(zip(ORIGIN_KEYS, origin_key(origin("e3", 4))))}
        assert book.has_episode_writes("run-1", ["e3"]) and not book.has_episode_writes("run-1", ["e9"])
    assert playbook_exists(location)
    with Playbook(location, read_only=True) as book:
        assert len(book) == 2
        with pytest.raises(PlaybookError, match="read-only"):
            book.add("progress", [LOOP], "t", "p")


@pytest.mark.parametrize("repeats_check, groups_limit", [(128, 1_000), (4, 1_000), (4, 2)])
def test_retrieval_ranks_the_same_on_both(tmp_path, postgres_url, monkeypatch, repeats_check, groups_limit):
    # Small thresholds make retrieval take its shortcut past runs of repeats (or refuse it) on both backends.
    monkeypatch.setattr(retrieval, "REPEATS_CHECK", repeats_check)
    monkeypatch.setattr(retrieval, "GROUPS_CHECK_LIMIT", groups_limit)
    with Playbook(tmp_path / "book.sqlite") as lite, Playbook(postgres_url) as pg:
        assert fill(lite, 400) == fill(pg, 400)
        for _ in range(20):  # many repeats of one label set: past the repeats check, through the trigger groups
            for book in (lite, pg):
                book.add("progress", [STOP], "same trigger", "again", created_at=60.0)
        for when in (55.0, 59.0, 57.0):  # one trigger's lessons of one label set: its newest stands for it
            for book in (lite, pg):
                book.add("progress", [STOP], "twin trigger", "twin", created_at=when)
        rng = random.Random(3)
        for number in range(60):
            labels, k = rng.sample(LABELS, rng.randint(1, 4)), rng.choice([1, 3, 5, 40, 200])
            for mode in ("labels", "type", "any", "random"):
                assert picked(lite, labels, k, mode, number) == picked(pg, labels, k, mode, number), (labels, k, mode)
        assert lite.stats() | {"path": ""} == pg.stats() | {"path": ""}


def test_retrieval_rules(location):
    with open_playbook(location) as book:
        old_two = book.add("progress", [LOOP, STALL], "t1", "p", created_at=1.0)
        new_one = book.add("progress", [LOOP], "t2", "p", created_at=5.0)
        new_two = book.add("progress", [STALL, EXPLORE], "t3", "p", created_at=6.0)
        repeat = book.add("progress", [STALL, EXPLORE], "t3", "p", created_at=7.0)  # same trigger as new_two
        book.add("progress", [STOP], "t5", "p", created_at=9.0)
        got = book.retrieve("progress", [LOOP, STALL, EXPLORE], origin=origin("e1"))
        assert [item.lesson.id for item in got] == [repeat, old_two, new_one, new_two]
        assert got[0].reason == f"shares 2 labels: {EXPLORE}, {STALL}"
        assert book.get(repeat).retrieved == 1


def test_discard_episodes_takes_back_exactly_once(location):
    with open_playbook(location) as book:
        kept = book.add("progress", [LOOP], "kept", "p", provenance=origin("done"))
        gone = book.add("progress", [LOOP], "gone", "p", provenance=origin("cut"))
        used = book.add("progress", [STALL], "used", "p", provenance=origin("cut", 2))
        book.record_retrieved([kept], origin=origin("cut", 3))
        book.record_outcome(kept, verified=True, helped=False, origin=origin("cut", 3))
        book.record_retrieved([used], origin=origin("done", 5))  # another episode used it: replay_kept
    assert discard_episodes(location, "run-1", ["cut"]) == (1, 2)
    assert discard_episodes(location, "run-1", ["cut"]) == (0, 0)  # idempotent
    with open_playbook(location) as book:
        assert book.get(gone) is None and book.get(used) is not None
        assert (book.get(kept).retrieved, book.get(kept).verified) == (0, 0)
        ops = [change.op for change in book.changes()]
        assert ops.count("discard") == 2 and ops.count("replay_kept") == 2  # one per discard, used stays each time
        assert book.add("progress", [STALL], "used", "p", provenance=origin("cut", 2)) == used  # the replay finds it


def test_discarding_where_nothing_is_makes_nothing(tmp_path, postgres_url):
    assert discard_episodes(tmp_path / "none.sqlite", "run-1", ["e"]) == (0, 0)
    assert discard_episodes(postgres_url, "run-1", ["e"]) == (0, 0)
    assert not (tmp_path / "none.sqlite").exists() and not playbook_exists(postgres_url)


def test_a_failed_import_into_a_new_playbook_leaves_none_on_either_backend(location, tmp_path):
    """All or nothing: a JSONL file whose last line is bad imports nothing, and a playbook (a file, or a PostgreSQL
    schema) made for the import is gone again."""
    from playground.plugins.playbook.store import import_file

    good = {"failure_type": "progress", "labels": [STALL], "trigger": "t", "principle": "p"}
    source = tmp_path / "lessons.jsonl"
    source.write_text(json.dumps(good) + "\n" + json.dumps({**good, "labels": ["no_such_label"]}) + "\n")
    with pytest.raises((PlaybookError, ValueError)):
        import_file(location, source)
    assert not playbook_exists(location)


def test_import_export_merge_prune(location, tmp_path):
    source = tmp_path / "lessons.jsonl"
    rows = [{"failure_type": "progress", "labels": [LOOP], "trigger": f"loop {n}", "principle": "step back",
             "created_at": float(n + 1)} for n in range(5)]
    rows.append({**rows[0], "trigger": "loop 0 ", "created_at": 9.0})  # a near-duplicate of the first
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with open_playbook(location) as book:
        report = book.import_jsonl(source)
        assert report.imported == 6 and book.import_jsonl(source).already_held == 6
        plan = book.merge_plan(0.95)
        assert [(gone, keep) for gone, keep, _ in plan] == [(6, 1)]
        assert book.merge(0.95, plan) == 1 and len(book) == 5
        assert book.prune(max_count=3) == 2
        book.export_jsonl(tmp_path / "out.jsonl")
        book.export_ace(tmp_path / "out.txt")
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["trigger"] for line in lines] == ["loop 2", "loop 3", "loop 4"]
    assert (tmp_path / "out.txt").read_text().count("loop") == 3


def test_the_commands_show_search_and_merge(location, tmp_path, capsys):
    with open_playbook(location) as book:
        book.add("progress", [LOOP], "looping around", "stop", created_at=1.0)
        book.add("progress", [LOOP], "looping around ", "stop", created_at=2.0)
        book.add("progress", [STALL], "stalled", "plan", created_at=3.0)
    code, out, err = cli(capsys, "playbook", "show", location, "--json")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1, 2, 3]
    code, out, err = cli(capsys, "playbook", "retrieve", location, "--type", "progress", "--labels", LOOP, "--json")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [2, 1]
    code, out, err = cli(capsys, "playbook", "stats", location)
    assert code == 0 and "3 lessons" in out and PASSWORD not in out
    code, out, err = cli(capsys, "playbook", "merge", location, "--similarity", "0.95", "--apply")
    assert code == 0, err
    assert "merged away 1" in out and "backup:" in out
    backup = out.split("backup: ")[1].split(" (")[0]
    assert "***" not in backup or is_database_url(location)
    with open_playbook(location) as book:
        assert len(book) == 2


# ---- concurrent writers --------------------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    from playground.plugins.playbook.store import Playbook
    location, worker, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with Playbook(location) as book:
        time.sleep(max(0.0, start - time.time()))  # all at once: the writers' transactions overlap and conflict
        ids = []
        for n in range(12):  # every worker stores the same 12 lessons (the same origins): each stored once
            origin = {"run": "r", "episode": f"e{n}", "attempt": 1, "step": 1}
            ids.append(book.add("progress", ["repetition_or_looping"], f"t{n}", "p", provenance=origin))
        for user in range(4):  # and counts the same 4 uses of each: each counted once
            origin = {"run": "r", "episode": f"user{user}", "attempt": 1, "step": 2}
            book.record_retrieved(ids, origin=origin)
            for lesson_id in ids:
                book.record_outcome(lesson_id, verified=True, helped=user % 2 == 0, origin=origin)
        book.add("progress", ["planning_stall"], f"own {worker}", "p")  # and one lesson of its own
    print(" ".join(map(str, ids)))
""")


def test_concurrent_writers_from_several_processes_keep_exactly_once(location, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    with open_playbook(location):
        pass  # made once, so the workers race on the lessons, not on making the playbook
    start = str(time.time() + 5)  # once every worker has loaded the playbook
    workers = [subprocess.Popen([sys.executable, str(script), location, str(n), start], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT) for n in range(4)]
    outputs = [worker.communicate(timeout=240) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err for _, err in outputs]
    assert not any(err for _, err in outputs), [err for _, err in outputs]  # conflicts retried without a word
    assert len({out for out, _ in outputs}) == 1  # every worker got the same ids
    with open_playbook(location) as book:
        lessons = list(book.all())
        assert len(lessons) == 16
        shared = [lesson for lesson in lessons if lesson.labels == (LOOP,)]
        assert [(lesson.retrieved, lesson.verified, lesson.helped) for lesson in shared] == [(4, 4, 2)] * 12
        assert sum(change.op == "outcome" for change in book.changes()) == 48


def test_a_write_that_fails_midway_is_rolled_back_and_a_failed_read_is_said_once(location, caplog):
    with open_playbook(location) as book:
        book.add("progress", [LOOP], "kept", "p")

        def write(db):
            db.execute("UPDATE lessons SET principle = 'changed'")
            db.execute("SELECT missing FROM lessons")  # fails: no such column

        def read(db):
            db.execute("SELECT missing FROM lessons")
            time.sleep(0.5)  # on PostgreSQL (pipelined) its failure comes back before COMMIT is sent, behind it

        for transaction, work in ((book._write, write), (book._read, read)):
            with pytest.raises(PlaybookError if "://" in location else Exception, match="missing"):
                transaction(work)
        assert [lesson.principle for lesson in book.all()] == ["p"]
        assert book.add("progress", [LOOP], "next", "p") == 2  # the connection is fit for the next write
    assert not [record.getMessage() for record in caplog.records if record.name.startswith("psycopg")]


def test_a_one_statement_write_is_held_to_one_statement_on_postgresql(postgres_url):
    # Sent alone, with no BEGIN: a second statement would be a transaction of its own, so it is refused as a bug.
    with open_playbook(postgres_url) as book:
        book.add("progress", [LOOP], "kept", "p", provenance=origin("e1"))  # one statement with an origin
        with pytest.raises(RuntimeError, match="second statement"):
            book._write(lambda db: [db.execute("SELECT 1"), db.execute("SELECT 2")], one_statement=True)
        assert book._write(lambda db: db.execute("SELECT COUNT(*) FROM lessons").fetchone()[0],
                           one_statement=True) == 1
    from playground.plugins.playbook.postgres import Location, pool

    def level(**options) -> str:
        with pool(Location(postgres_url), **options).connection() as connection:
            return connection.execute("SHOW default_transaction_isolation").fetchone()[0]

    # the playbook's statements alone are SERIALIZABLE; the baselines' memories keep the server's default
    assert (level(), level(serializable_alone=False)) == ("serializable", "read committed")


# ---- copy between backends -----------------------------------------------------------------------------------------

def _exports(location, folder: Path) -> tuple[bytes, bytes, list]:
    with open_playbook(location, read_only=True) as book:
        book.export_jsonl(folder / "x.jsonl")
        book.export_ace(folder / "x.txt")
        changes = [(c.id, c.op, c.lesson_id, c.details) for c in book.changes()]
    return (folder / "x.jsonl").read_bytes(), (folder / "x.txt").read_bytes(), changes


@pytest.mark.parametrize("direction", ["sqlite-to-postgresql", "postgresql-to-sqlite"])
def test_copy_between_backends_exports_byte_identical(direction, tmp_path, postgres_url, capsys):
    lite = str(tmp_path / "book.sqlite")
    source, target = (lite, postgres_url) if direction.startswith("sqlite") else (postgres_url, lite)
    with open_playbook(source) as book:
        ids = fill(book, 60)
        book.add("procedure", ["others"], "ünïcode ✓", "tabs\tand \"quotes\"", provenance=origin("e1"))
        book.record_retrieved(ids[:10], origin=origin("e2"))
        book.record_outcome(ids[0], verified=True, helped=True, origin=origin("e2"))
        book.prune(max_count=55)  # the last ids are gone: the copy must not hand them out again
    code, out, err = cli(capsys, "playbook", "copy", source, target)
    assert code == 0, err
    assert "copied 55 lessons" in out and PASSWORD not in out
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    assert _exports(source, tmp_path / "a") == _exports(target, tmp_path / "b")
    with open_playbook(target) as copy:
        assert copy.add("progress", [LOOP], "new", "p") == len(ids) + 2  # after every id the source handed out
        assert copy.discard_episodes("run-1", ["e1"]) == (1, 0)  # the origins came along
    code, _, err = cli(capsys, "playbook", "copy", source, target)
    assert code == 2 and "already" in err  # only to a new playbook


# ---- locations, errors and credentials -----------------------------------------------------------------------------

def test_a_schema_that_holds_something_else_is_refused(postgres_server, postgres_url):
    import psycopg

    schema = postgres_url.split("schema=")[1]
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"CREATE TABLE {schema}.accounts (id int)")
    with pytest.raises(PlaybookError, match="holds tables but not a playbook"):
        Playbook(postgres_url)
    with pytest.raises(PlaybookError, match="schema 'Bad-Name' cannot hold a playbook"):
        Playbook(postgres_server.url("Bad-Name"))
    with pytest.raises(PlaybookError, match="no playbook to open read-only"):
        Playbook(postgres_server.url("nothing_here"), read_only=True)


def test_a_wrong_password_says_so_without_showing_it(postgres_server, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "not-it")
    url = postgres_server.url("x").replace("postgres@", "postgres:also-not-it@")
    with pytest.raises(PlaybookError, match="cannot connect") as caught:
        Playbook(url)
    assert "also-not-it" not in str(caught.value) and "***@127.0.0.1" in str(caught.value)


def test_a_password_in_the_url_reaches_no_file_of_the_run(postgres_server, tmp_path, monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = postgres_server.url("run_book", password=True)
    out = tmp_path / "run"
    args = ["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "repeat=0.6", "--harness", "sentry",
            "--episodes", "3", "--quiet", "--out", str(out), "--playbook", url]
    for _ in range(2):  # a fresh run, then a resume of it
        done = subprocess.run([sys.executable, "-m", "playground.cli.main", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        assert PASSWORD not in done.stdout + done.stderr
    with Playbook(url, read_only=True) as book:
        assert len(book) > 0  # lessons went to the database
    files = [path for path in out.rglob("*") if path.is_file()]
    assert {"config.json", "lock.json"} <= {path.name for path in files}
    leaks = [str(path) for path in files if PASSWORD.encode() in path.read_bytes()]
    assert not leaks
    lock = json.loads((out / "lock.json").read_text())
    assert lock["playbooks"]["sentry"]["after"].startswith("postgresql:")


def test_postgresql_refuses_a_nul_character_saying_so(postgres_url):
    with Playbook(postgres_url) as book:
        with pytest.raises(PlaybookError, match="NUL"):
            book.add("progress", [LOOP], "a \x00 b", "p")
        assert len(book) == 0
