"""The playbook store: Sentry's retrieval rules, counters, merge, prune, change log, import/export,
bad files and several processes writing at once."""

from __future__ import annotations

import json
import multiprocessing
import random
import re
import sqlite3
from pathlib import Path

import pytest

from playground.plugins.playbook import io as playbook_io, retrieval, schema, store
from playground.core.labels import UnknownFailure
from playground.plugins.playbook.io import PlaybookError, PlaybookImportError
from playground.plugins.playbook.store import Playbook

ACE_SAMPLE = Path(__file__).resolve().parents[2] / "shared/data/playbooks/ace_appworld_online_trained_playbook.txt"

LOOP, STALL, EXPLORE, STOP = "repetition_or_looping", "planning_stall", "over_exploration", "termination_miscalibration"


@pytest.fixture
def book(tmp_path):
    with Playbook(tmp_path / "playbook.db") as playbook:
        yield playbook


def lesson(book: Playbook, labels, created_at: float, trigger: str = "", subtype: str = "",
           failure_type: str = "progress") -> int:
    """Add a progress lesson whose trigger defaults to something unique."""
    return book.add(failure_type, labels, trigger or f"trigger {created_at}", f"principle {created_at}",
                    subtype=subtype, created_at=created_at)


def ids(retrieved) -> list[int]:
    return [item.lesson.id for item in retrieved]


# ---- retrieval --------------------------------------------------------------------------

def test_more_shared_labels_rank_first_then_newer(book):
    old_two = lesson(book, [LOOP, STALL], 1.0)
    new_one = lesson(book, [LOOP], 5.0)
    new_two = lesson(book, [STALL, EXPLORE], 6.0)
    old_three = lesson(book, [LOOP, STALL, EXPLORE], 2.0)
    lesson(book, [STOP], 9.0)  # shares nothing: never a candidate while others share
    got = book.retrieve("progress", [LOOP, STALL, EXPLORE])
    assert ids(got) == [old_three, new_two, old_two, new_one]
    assert [len(item.shared_labels) for item in got] == [3, 2, 2, 1]
    assert got[0].reason == f"shares 3 labels: {EXPLORE}, {STALL}, {LOOP}"
    assert got[-1].reason == f"shares 1 label: {LOOP}" and got[-1].shared_labels == (LOOP,)


def test_equal_times_break_ties_by_higher_id(book):
    first, second, third = (lesson(book, [LOOP], 3.0, trigger=f"t{i}") for i in range(3))
    assert ids(book.retrieve("progress", [LOOP])) == [third, second, first]


def test_diversity_cap_passes_over_repeats_while_others_remain(book):
    a = lesson(book, [LOOP, STALL], 9.0, trigger="same", subtype="s")
    b = lesson(book, [LOOP, STALL], 8.0, trigger="same", subtype="s")  # repeats a
    c = lesson(book, [LOOP], 7.0, trigger="same", subtype="other subtype")  # differs in subtype
    d = lesson(book, [LOOP], 6.0, trigger="different", subtype="s")
    assert ids(book.retrieve("progress", [LOOP, STALL], k=3)) == [a, c, d]
    # Only when the distinct ones run out are repeats used to fill up to k, after them.
    assert ids(book.retrieve("progress", [LOOP, STALL], k=5)) == [a, c, d, b]


def test_falls_back_to_most_recent_of_type_when_no_label_is_shared(book):
    old = lesson(book, [LOOP], 1.0)
    new = lesson(book, [STALL], 2.0)
    lesson(book, ["hallucination"], 3.0, failure_type="grounding")
    got = book.retrieve("progress", [STOP])
    assert ids(got) == [new, old]
    assert all(item.reason == "fallback: most recent of type" and item.shared_labels == () for item in got)
    assert book.retrieve("action_validity", ["invalid_action"]) == []


def test_never_more_than_k(book):
    for i in range(12):
        lesson(book, [LOOP], float(i), trigger="same" if i % 2 else "")
    assert [len(book.retrieve("progress", [LOOP], k=k)) for k in (0, 1, 5, 11, 12, 50)] == [0, 1, 5, 11, 12, 12]
    # Ids 2, 4, ..., 12 share the trigger "same": only the newest of them is taken.
    assert ids(book.retrieve("progress", [LOOP])) == [12, 11, 9, 7, 5]
    assert len(book.retrieve("progress", [STOP], k=3)) == 3  # the fallback obeys k too


def reference_pick(lessons, failure_type: str, query: set[str], k: int) -> list[int]:
    """Sentry's rules written out plainly, over every lesson in memory."""
    candidates = [l for l in lessons if l.failure_type == failure_type and query & set(l.labels)]
    if not candidates:
        candidates = [l for l in lessons if l.failure_type == failure_type]
    candidates.sort(key=lambda l: (-len(query & set(l.labels)), -l.created_at, -l.id))
    distinct, repeats, seen = [], [], set()
    for candidate in candidates:
        (repeats if (candidate.subtype, candidate.trigger) in seen else distinct).append(candidate.id)
        seen.add((candidate.subtype, candidate.trigger))
    return (distinct + repeats)[:k]


@pytest.mark.parametrize("repeats_check, groups_limit", [(128, 1_000), (4, 1_000), (4, 2)])
def test_retrieve_matches_the_rules_written_plainly(book, monkeypatch, repeats_check, groups_limit):
    # Small thresholds make retrieval take its shortcut past runs of repeats (or refuse it).
    monkeypatch.setattr(retrieval, "REPEATS_CHECK", repeats_check)
    monkeypatch.setattr(retrieval, "GROUPS_CHECK_LIMIT", groups_limit)
    rng = random.Random(repeats_check + groups_limit)
    labels = [LOOP, STALL, EXPLORE, STOP]
    book.add_many({"failure_type": "progress" if i % 7 else "grounding",
                   "labels": rng.sample(labels, rng.randint(1, 3)) if i % 7 else ["hallucination"],
                   "subtype": rng.choice(["", "nav"]), "trigger": f"t{rng.randrange(3 if i < 250 else 40)}",
                   "principle": "p", "created_at": float(rng.randrange(60))} for i in range(300))
    lessons = list(book.all())
    for _ in range(150):
        query = set(rng.sample(labels, rng.randint(1, 3)))
        k = rng.choice([1, 3, 5, 12])
        assert ids(book.retrieve("progress", query, k=k, count=False)) == reference_pick(lessons, "progress", query, k)


def test_retrieve_checks_the_taxonomy(book):
    with pytest.raises(UnknownFailure, match="no_such_label"):
        book.retrieve("progress", ["no_such_label"])
    with pytest.raises(UnknownFailure, match="nonsense"):
        book.retrieve("nonsense", [LOOP])


# ---- counters and validation ------------------------------------------------------------

def test_counters(book):
    first = lesson(book, [LOOP], 1.0)
    second = lesson(book, [LOOP], 2.0)
    book.retrieve("progress", [LOOP])
    book.retrieve("progress", [LOOP], k=1)
    book.retrieve("progress", [LOOP], count=False)
    book.record_outcome(first, verified=True, helped=False)
    book.record_outcome(first, verified=True, helped=True)
    assert (book.get(first).retrieved, book.get(first).verified, book.get(first).helped) == (1, 2, 1)
    assert book.get(second).retrieved == 2
    assert book.stats()["counters"] == {"retrieved": 3, "verified": 2, "helped": 1}
    with pytest.raises(KeyError, match="no lesson 999"):
        book.record_outcome(999, True, True)
    assert book.get(999) is None


def test_counter_updates_count_once_per_origin(book):
    """Issue 16: a replayed episode's retrievals and outcomes are not counted twice."""
    used = lesson(book, [LOOP], 1.0)
    origin = {"run": "r", "episode": "r:sentry:t", "attempt": 1, "step": 4}
    for _ in range(3):  # the episode, then two replays of it
        book.retrieve("progress", [LOOP], origin=origin)
        book.record_outcome(used, verified=True, helped=True, origin=origin)
    assert (book.get(used).retrieved, book.get(used).verified, book.get(used).helped) == (1, 1, 1)
    book.retrieve("progress", [LOOP], origin={**origin, "step": 5})  # another step of it counts
    book.record_outcome(used, verified=True, helped=False, origin={**origin, "attempt": 2})
    assert (book.get(used).retrieved, book.get(used).verified, book.get(used).helped) == (2, 2, 1)
    assert [c.op for c in book.changes()].count("outcome") == 2


def test_discarding_an_episode_takes_back_its_lessons_and_counter_updates(book, tmp_path):
    """Issue 16: before an unfinished episode is played again, what it wrote is taken back; nothing else is."""
    old = lesson(book, [LOOP], 1.0)
    keep_provenance = {"run": "r", "episode": "r:sentry:a", "attempt": 1, "step": 2}
    kept = book.add("progress", [LOOP], "kept", "p", provenance=keep_provenance, created_at=2.0)
    cut = {"run": "r", "episode": "r:sentry:b", "attempt": 1, "step": 3}
    other_run = {**cut, "run": "s", "episode": "s:sentry:b"}
    book.retrieve("progress", [LOOP], origin=keep_provenance)  # a finished episode's retrieval: stays
    book.retrieve("progress", [LOOP], origin=other_run)  # another run's: stays
    before = [(x.id, x.retrieved, x.verified, x.helped) for x in book.all()]
    # the cut-off play of episode b: two retrievals, an outcome, two lessons (attempts 1 and 2)
    book.retrieve("progress", [LOOP], origin=cut)
    book.retrieve("progress", [LOOP], origin={**cut, "step": 4})
    book.record_outcome(old, verified=True, helped=True, origin=cut)
    gone = [book.add("progress", [STALL], "cut", "p", provenance=cut),
            book.add("progress", [STALL], "cut 2", "p", provenance={**cut, "attempt": 2, "step": 7})]
    book.record_outcome(gone[0], verified=True, helped=True, origin={**cut, "step": 7})

    assert book.has_episode_writes("r", ["r:sentry:b"]) and not book.has_episode_writes("r", ["r:sentry:c"])
    assert book.discard_episodes("r", ["r:sentry:b", "r:sentry:c"]) == (2, 6)  # 2 lessons; 4 retrievals, 2 outcomes
    assert [(x.id, x.retrieved, x.verified, x.helped) for x in book.all()] == before
    assert all(book.get(lesson_id) is None for lesson_id in gone)
    discarded = [c for c in book.changes() if c.op == "discard"]
    assert {c.lesson_id for c in discarded} == {*gone, None}
    assert all(c.details["lesson"]["trigger"].startswith("cut") for c in discarded if c.lesson_id)
    assert book.discard_episodes("r", ["r:sentry:b"]) == (0, 0)  # idempotent
    # the replay stores and counts again, once
    assert book.add("progress", [STALL], "cut", "p", provenance=cut) not in gone
    book.retrieve("progress", [LOOP], origin=cut)
    assert book.get(kept).retrieved == 3  # a finished episode, another run, the replay


def test_a_replay_keeps_a_lesson_another_episode_used(book):
    """Issue 38: discarding an unfinished episode used to remove a lesson a finished episode had already used."""
    cut = {"run": "r", "episode": "r:sentry:b", "attempt": 1, "step": 3}
    stored = book.add("progress", [STALL], "cut", "p", provenance=cut)
    finished = {"run": "r", "episode": "r:sentry:a", "attempt": 1, "step": 5}
    book.retrieve("progress", [STALL], origin=finished)  # a finished episode was shown it
    book.retrieve("progress", [STALL], origin={**cut, "step": 4})  # and the cut-off play itself
    assert book.discard_episodes("r", ["r:sentry:b"]) == (0, 1)  # its own retrieval taken back, the lesson kept
    assert book.get(stored).retrieved == 1
    kept = [c for c in book.changes() if c.op == "replay_kept"]
    assert [(c.lesson_id, c.details["used_by_episodes"]) for c in kept] == [(stored, 1)]
    assert book.add("progress", [STALL], "cut", "p", provenance=cut) == stored  # the replay finds it, once
    assert len(book) == 1
    # the same cut-off play, with no other episode using its lesson, loses it as before
    other = {**cut, "episode": "r:sentry:c"}
    alone = book.add("progress", [STALL], "alone", "p", provenance=other)
    assert book.discard_episodes("r", ["r:sentry:c"]) == (1, 0) and book.get(alone) is None


def test_discarding_touches_no_file_it_need_not(tmp_path):
    missing = tmp_path / "none.sqlite"
    assert store.discard_episodes(missing, "r", ["r:sentry:a"]) == (0, 0)
    assert not missing.exists()
    path = tmp_path / "pb.sqlite"
    with Playbook(path) as book:
        book.add("progress", [LOOP], "t", "p", provenance={"run": "other", "episode": "e", "step": 1})
    before = path.read_bytes()
    assert store.discard_episodes(path, "r", ["r:sentry:a"]) == (0, 0)
    assert path.read_bytes() == before


def test_merge_moves_counter_updates_to_the_kept_lesson(book):
    origin = {"run": "r", "episode": "r:sentry:b", "step": 3}
    keep = book.add("progress", [LOOP], "agent repeats the same action", "try another", created_at=1.0)
    near = book.add("progress", [LOOP], "Agent repeats the same action.", "Try another!", created_at=2.0)
    book.retrieve("progress", [LOOP], origin=origin)  # both retrieved by one step
    assert book.merge(0.8) == 1 and book.get(keep).retrieved == 2
    book.retrieve("progress", [LOOP], origin=origin)  # the replayed step: counted before
    assert book.get(keep).retrieved == 2
    assert book.discard_episodes("r", ["r:sentry:b"]) == (0, 1)
    assert book.get(keep).retrieved == 0 and book.get(near) is None


@pytest.mark.parametrize("change, error", [
    ({"failure_type": "nonsense"}, UnknownFailure),
    ({"labels": ["no_such_label"]}, UnknownFailure),
    ({"labels": []}, ValueError),
    ({"labels": LOOP}, ValueError),  # a string, not a list of labels
    ({"labels": [LOOP] * 17}, ValueError),
    ({"trigger": "  "}, ValueError),
    ({"principle": ""}, ValueError),
    ({"principle": "x" * 4_001}, ValueError),
    ({"provenance": {"note": "x" * 5_000}}, ValueError),
])
def test_add_rejects_bad_lessons(book, change, error):
    arguments = {"failure_type": "progress", "labels": [LOOP], "trigger": "t", "principle": "p", **change}
    with pytest.raises(error):
        book.add(**arguments)
    assert len(book) == 0


def test_lesson_fields_round_trip(book):
    provenance = {"run": "r1", "env": "tiny", "task": "tiny-3", "episode": "e7", "step": 12}
    lesson_id = book.add("grounding", ["objective_drift", "hallucination"], "drifts", "re-read the goal",
                         subtype="goal", provenance=provenance, created_at=123.5)
    got = book.get(lesson_id)
    assert got.labels == ("hallucination", "objective_drift")
    assert (got.subtype, got.trigger, got.principle, got.provenance, got.created_at) == (
        "goal", "drifts", "re-read the goal", provenance, 123.5)
    assert list(book.all()) == [got]
    assert book.stats()["by_label"] == {"grounding": {"hallucination": 1, "objective_drift": 1}}


# ---- merge, prune, change log -----------------------------------------------------------

def test_merge_keeps_the_oldest_and_adds_counters(book):
    keep = book.add("progress", [LOOP], "agent repeats the same action", "try a different action", created_at=1.0)
    near = book.add("progress", [LOOP], "Agent repeats  the same action.", "Try a different action!", created_at=2.0)
    other_labels = book.add("progress", [LOOP, STALL], "agent repeats the same action", "try a different action")
    unrelated = book.add("progress", [LOOP], "agent opens every drawer", "search by the goal's objects")
    book.record_outcome(near, verified=True, helped=True)
    book.retrieve("progress", [LOOP], k=5)
    assert book.merge(similarity=0.9) == 1
    assert book.get(near) is None and {l.id for l in book.all()} == {keep, other_labels, unrelated}
    assert (book.get(keep).retrieved, book.get(keep).verified, book.get(keep).helped) == (2, 1, 1)
    merged = [c for c in book.changes() if c.op == "merge"]
    assert len(merged) == 1 and merged[0].lesson_id == near and merged[0].details["into"] == keep
    assert merged[0].details["lesson"]["trigger"] == "Agent repeats  the same action."
    assert book.merge() == 0


def test_prune(book):
    now = __import__("time").time()
    old_useless = lesson(book, [LOOP], now - 40 * 86_400)
    old_useful = lesson(book, [LOOP], now - 40 * 86_400 + 1)
    new_useless = lesson(book, [LOOP], now - 1)
    book.record_outcome(old_useful, verified=True, helped=True)
    assert book.prune() == 0
    assert book.prune(max_age_days=30, min_helped=1) == 1
    assert book.get(old_useless) is None
    new_useful = lesson(book, [LOOP], now)
    book.record_outcome(new_useful, verified=True, helped=True)
    assert book.prune(max_count=2) == 1  # the least helpful goes first
    assert {l.id for l in book.all()} == {old_useful, new_useful} and new_useless not in {l.id for l in book.all()}
    assert book.prune(max_age_days=30) == 1 and [l.id for l in book.all()] == [new_useful]
    pruned = [c for c in book.changes() if c.op == "prune"]
    assert [c.lesson_id for c in pruned] == [old_useless, new_useless, old_useful]
    assert pruned[0].details["lesson"]["principle"].startswith("principle ")


def test_change_log_records_every_change(book, tmp_path):
    first = lesson(book, [LOOP], 1.0)
    book.record_outcome(first, verified=True, helped=False)
    book.retrieve("progress", [LOOP])  # retrievals are counted, not logged
    path = tmp_path / "out.jsonl"
    book.export_jsonl(path)
    exported = json.loads(path.read_text())
    path.write_text(json.dumps({**exported, "principle": exported["principle"] + "!"}) + "\n")  # a near-duplicate
    book.import_jsonl(path)
    book.merge()
    book.prune(max_count=0)
    assert [(c.op, c.lesson_id) for c in book.changes()] == [
        ("add", 1), ("outcome", 1), ("import", 2), ("merge", 2), ("prune", 1)]
    assert [c.id for c in book.changes()] == [1, 2, 3, 4, 5]
    assert list(book.changes(lesson_id=2))[0].details["source"] == str(path)
    assert book.stats()["changes"] == 5


# ---- import and export ------------------------------------------------------------------

def test_jsonl_round_trip(book, tmp_path):
    lesson(book, [LOOP, STALL], 1.0, subtype="nav")
    book.add("grounding", ["hallucination"], "names an object not in view", "only act on objects seen",
             provenance={"run": "r", "step": 3}, created_at=2.0)
    book.record_outcome(1, verified=True, helped=True)
    path = tmp_path / "exported.jsonl"
    assert book.export_jsonl(path) == 2
    with Playbook(tmp_path / "copy.db") as copy:
        report = copy.import_jsonl(path)
        assert (report.imported, report.first_id, report.last_id) == (2, 1, 2)
        assert [l.to_dict() for l in copy.all()] == [l.to_dict() for l in book.all()]
        copy.export_jsonl(tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == path.read_bytes()


GOOD = {"failure_type": "progress", "labels": [LOOP], "trigger": "t", "principle": "p"}


@pytest.mark.parametrize("bad_line, why", [
    (json.dumps({k: v for k, v in GOOD.items() if k != "principle"}), "missing field 'principle'"),
    (json.dumps({**GOOD, "principle": "x" * 10_000_000}), "bytes, more than 131,072"),
    (json.dumps({**GOOD, "principle": "x" * 5_000}), "'principle' is 5,000 characters, more than 4,000"),
    (json.dumps({**GOOD, "failure_type": "nonsense"}), "unknown failure type 'nonsense'"),
    (json.dumps({**GOOD, "labels": ["no_such_label"]}), "unknown label(s) 'no_such_label'"),
    (json.dumps({**GOOD, "helped": -1}), "'helped' must be an integer from 0 to 9007199254740991, not -1"),
    (json.dumps({**GOOD, "verified": 10**22}), "'verified' must be an integer from 0 to 9007199254740991"),
    (json.dumps({**GOOD, "created_at": 1e300}), "'created_at' 1e+300 is outside 0 to"),
    (json.dumps({**GOOD, "created_at": -5.0}), "'created_at' -5.0 is outside 0 to"),
    ('{"failure_type": "progress", "labels": ["repetition_or_looping"], "trigger": "t", "principle": "p", '
     '"created_at": 1e400}', "'created_at' must be a finite number"),
    (json.dumps({**GOOD, "extra": 1}), "unknown field(s) 'extra'"),
    ('{"failure_type": "progress", "labels": [', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({**GOOD, "created_at": "NaN"}), "'created_at' must be a finite number"),
])
def test_import_rejects_the_whole_file_naming_bad_lines(book, tmp_path, bad_line, why):
    lesson(book, [LOOP], 1.0)
    before = (book.stats(), list(book.changes()))
    path = tmp_path / "incoming.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), "", bad_line, json.dumps(GOOD), bad_line]) + "\n")
    with pytest.raises(PlaybookImportError) as caught:
        book.import_jsonl(path)
    message = str(caught.value)
    assert str(path) in message and "nothing imported" in message
    assert [p.split(":")[0] for p in caught.value.problems] == ["line 3", "line 5"]
    assert why in message
    assert (book.stats(), list(book.changes())) == before


def test_import_refuses_files_over_the_size_cap(book, tmp_path, monkeypatch):
    monkeypatch.setattr(playbook_io, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.jsonl"
    path.write_text((json.dumps(GOOD) + "\n") * 5)
    with pytest.raises(PlaybookImportError, match="more than 100"):
        book.import_jsonl(path)
    assert len(book) == 0


def test_import_ace_sample(book):
    if not ACE_SAMPLE.exists():
        pytest.skip(f"ACE sample not present at {ACE_SAMPLE}")
    report = book.import_ace(ACE_SAMPLE)
    assert report.imported == 359 == len(book)
    first = book.get(report.first_id)
    assert first.failure_type == "procedure" and first.labels == ("strategies_and_hard_rules",)
    assert first.subtype == "STRATEGIES AND HARD RULES"
    assert first.provenance == {"source": "ace", "id": "shr-00001"}
    assert first.principle.startswith("Make sure to end code blocks")
    assert first.trigger == "ACE section: STRATEGIES AND HARD RULES"
    by_ace_id = {l.provenance["id"]: l for l in book.all()}
    assert by_ace_id["shr-00009"].trigger == "When syncing contacts across different platforms"
    assert set(book.stats()["by_label"]["procedure"]) <= set(playbook_io.ACE_SECTIONS.values())
    assert book.retrieve("procedure", ["verification_checklist"], k=5)[0].lesson.subtype == "VERIFICATION CHECKLIST"


def test_import_ace_counts_and_bad_lines(book, tmp_path):
    path = tmp_path / "ace.txt"
    path.write_text("## COMMON MISTAKES AND CORRECT STRATEGIES\n"
                    "[cms-1] helpful=3 harmful=1 :: When paging, fetch every page.\n"
                    "## MY OWN SECTION\n[x-2] Check the result.\n")
    report = book.import_ace(path)
    first, second = book.get(report.first_id), book.get(report.last_id)
    assert (first.labels, first.helped, first.provenance) == (
        ("common_mistakes",), 3, {"source": "ace", "id": "cms-1", "harmful": 1})
    assert first.trigger == "When paging"
    assert (second.labels, second.subtype) == (("others",), "MY OWN SECTION")
    path.write_text("## OTHERS\n[ok-1] fine\nnot a bullet\n[bad-2]\n")
    with pytest.raises(PlaybookImportError, match=r"(?s)ace\.txt.*line 3.*line 4"):
        book.import_ace(path, strict=True)
    assert len(book) == 2


def test_import_ace_skips_what_ace_skips_naming_each_line(book, tmp_path):
    """ACE's parsers pass over prose lines (and a one-'#' title) and keep ids with spaces and empty bullets; a tolerant
    import does the same and says so (issue 56: the rules in docs/playbook-ace-format.md)."""
    path = tmp_path / "ace.txt"
    path.write_text("# My playbook\nSome prose the author wrote.\n## OTHERS\n[ok-1] fine\n[my id 2] helpful=1 harmful=0 "
                    ":: spaced id\n[empty-3] helpful=0 harmful=0 ::\n")
    report = book.import_ace(path)
    assert report.imported == 3
    assert [p.split(":")[0] for p in report.skipped] == ["line 1", "line 2"]
    assert {l.provenance["id"] for l in book.all()} == {"ok-1", "my id 2", "empty-3"}
    with pytest.warns(playbook_io.PlaybookImportWarning, match=r"ace\.txt: line [12]: "):
        playbook_io.read_ace(path)


def test_import_ace_round_trip_keeps_order_headers_and_text(book, tmp_path):
    path = tmp_path / "ace.txt"
    path.write_text("## VERIFICATION CHECKLIST\n[v-1] Check  twice,   then  once.\n\n## APIs To Use:\n"
                    "[a-2] helpful=2 harmful=1 :: Use\tthe docs :: first.\n## EMPTY\n## STRATEGIES AND HARD RULES\n"
                    "[s-3] Plan.\n")
    book.import_ace(path)
    out = tmp_path / "out.txt"
    book.export_ace(out)
    assert out.read_text() == ("## VERIFICATION CHECKLIST\n[v-1] helpful=0 harmful=0 :: Check  twice,   then  once.\n\n"
                               "## APIs To Use:\n[a-2] helpful=2 harmful=1 :: Use\tthe docs :: first.\n\n"
                               "## EMPTY\n\n## STRATEGIES AND HARD RULES\n[s-3] helpful=0 harmful=0 :: Plan.\n")
    with Playbook(tmp_path / "again.db") as again:
        again.import_ace(out)
        second = tmp_path / "second.txt"
        again.export_ace(second)
    assert second.read_bytes() == out.read_bytes()


def test_import_export_import_of_the_ace_sample_is_byte_identical(book, tmp_path):
    if not ACE_SAMPLE.exists():
        pytest.skip(f"ACE sample not present at {ACE_SAMPLE}")
    first = tmp_path / "first.txt"
    book.import_ace(ACE_SAMPLE)
    book.export_ace(first)
    with Playbook(tmp_path / "again.db") as again:
        assert again.import_ace(first).skipped == ()
        second = tmp_path / "second.txt"
        again.export_ace(second)
    assert second.read_bytes() == first.read_bytes()
    sample = ACE_SAMPLE.read_text(encoding="utf-8")
    headers = [line for line in sample.splitlines() if line.startswith("## ")]  # empty sections too (issue 56)
    exported = first.read_text(encoding="utf-8")
    assert [line for line in exported.splitlines() if line.startswith("## ")] == headers
    texts = [re.sub(r"^\[[^\]]+\]\s*", "", line) for line in sample.splitlines() if line.startswith("[")]
    assert [line.split(" :: ", 1)[1] for line in exported.splitlines() if line.startswith("[")] == texts


@pytest.mark.parametrize("bullet, why", [
    ("[a-1]    ", "the bullet has no text"),
    ("[a-1] helpful=-1 harmful=0 :: text", "'helpful' must be an integer from 0 to 9007199254740991, not '-1'"),
    ("[a-1] helpful=2 harmful=-3 :: text", "'harmful' must be an integer from 0"),
    ("[a-1] helpful=99999999999999999999999 harmful=0 :: text", "'helpful' must be an integer from 0"),
    ("[a-1] helpful=1.5 harmful=0 :: text", "'helpful' must be an integer from 0"),
    ("[a-1] helpful=1 :: text", "counters must read 'helpful=N harmful=N :: text'"),
])
def test_import_ace_refuses_empty_bullets_and_bad_counters_naming_file_and_line(book, tmp_path, bullet, why):
    """Issue 16: these used to be imported, the counters as part of the text (or overflowing SQLite)."""
    path = tmp_path / "ace.txt"
    path.write_text(f"## OTHERS\n[ok-1] helpful=1 harmful=0 :: fine\n{bullet}\n")
    with Playbook(tmp_path / "tolerant.db") as tolerant:
        report = tolerant.import_ace(path)
        assert report.imported == 1 and report.skipped[0].startswith(f"line 3: {why}")
    with pytest.raises(PlaybookImportError) as caught:
        book.import_ace(path, strict=True)
    assert str(path) in str(caught.value)
    assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith(f"line 3: {why}")
    assert len(book) == 0


# ---- bad files --------------------------------------------------------------------------

def test_corrupt_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "playbook.db"
    path.write_bytes(b"this is not a database\n" * 100)
    with pytest.raises(PlaybookError, match="playbook.db.*not an SQLite database"):
        Playbook(path)
    assert path.read_bytes() == b"this is not a database\n" * 100
    damaged = b"SQLite format 3\x00" + b"\xff" * 4_080
    path.write_bytes(damaged)
    with pytest.raises(PlaybookError, match="playbook.db"):
        Playbook(path)
    assert path.read_bytes() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["playbook.db"]


def test_foreign_sqlite_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    db.close()
    before = path.read_bytes()
    with pytest.raises(PlaybookError, match="other.db.*not a playbook.*users"):
        Playbook(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    Playbook(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE playbook_meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(PlaybookError, match="schema version 99"):
        Playbook(path)


def test_reopening_keeps_lessons_and_creates_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "playbook.db"
    with Playbook(path) as book:
        lesson(book, [LOOP], 1.0)
    with Playbook(path) as book:
        assert len(book) == 1


# ---- several processes ------------------------------------------------------------------

def _add_lessons(path: str, worker: int, count: int, errors) -> None:
    try:
        with Playbook(path) as book:
            for i in range(count):
                book.add("progress", [LOOP], f"worker {worker} trigger {i}", "principle",
                         provenance={"run": f"w{worker}", "step": i})
    except Exception as error:  # reported to the parent, which fails the test
        errors.put(f"worker {worker}: {error!r}")


def test_four_processes_add_at_once(tmp_path):
    path, per_worker = str(tmp_path / "shared" / "playbook.db"), 100
    context = multiprocessing.get_context("spawn")
    errors = context.Queue()
    workers = [context.Process(target=_add_lessons, args=(path, w, per_worker, errors)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    assert errors.empty(), errors.get()
    with Playbook(path) as book:
        assert len(book) == 4 * per_worker
        assert sum(1 for c in book.changes() if c.op == "add") == 4 * per_worker


def test_read_only_playbook_retrieves_and_refuses_changes(tmp_path):
    import os
    import stat

    path = tmp_path / "shipped" / "lessons.sqlite"
    with Playbook(path) as writable:
        lesson_id = writable.add("progress", ["repetition_or_looping"], "the same action again", "try something new")
    before = path.read_bytes()
    folder = path.parent
    os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)  # a folder nobody may write, like site-packages
    try:
        with Playbook(path, read_only=True) as shipped:
            found = shipped.retrieve("progress", ["repetition_or_looping"], k=5)
            assert [r.lesson.id for r in found] == [lesson_id] and len(shipped) == 1
            assert shipped.get(lesson_id).retrieved == 0  # counters are not kept
            with pytest.raises(PlaybookError, match="opened read-only"):
                shipped.add("progress", ["planning_stall"], "t", "p")
            with pytest.raises(PlaybookError, match="opened read-only"):
                shipped.record_outcome(lesson_id, verified=True, helped=True)
    finally:
        os.chmod(folder, stat.S_IRWXU)
    assert path.read_bytes() == before
    with pytest.raises(PlaybookError, match="no playbook to open read-only"):
        Playbook(tmp_path / "missing.sqlite", read_only=True)


def test_copy_to_writes_a_whole_independent_playbook_and_never_overwrites(book, tmp_path):
    first = lesson(book, [LOOP], 1.0)
    book.record_outcome(first, verified=True, helped=True)
    copy_path = book.copy_to(tmp_path / "copies" / "a.sqlite")
    with Playbook(copy_path) as copy:
        assert [(x.id, x.trigger, x.helped) for x in copy.all()] == [(x.id, x.trigger, x.helped) for x in book.all()]
        assert [c.op for c in copy.changes()] == ["add", "outcome"]
        copy.add("progress", [STALL], "only in the copy", "p")
    assert len(book) == 1  # the copy is its own file
    assert not list((tmp_path / "copies").glob(".*.tmp"))
    with pytest.raises(PlaybookError, match="already exists"):
        book.copy_to(copy_path)
    with Playbook(copy_path, read_only=True) as copy:
        assert len(copy) == 2  # left as it was


def test_the_reason_counts_the_shared_labels_in_words(book):
    lesson(book, [LOOP, STALL], 1.0)
    lesson(book, [LOOP], 2.0)
    got = book.retrieve("progress", [LOOP, STALL], k=2, count=False)
    assert [item.reason for item in got] == [f"shares 2 labels: {STALL}, {LOOP}" if STALL < LOOP else
                                             f"shares 2 labels: {LOOP}, {STALL}", f"shares 1 label: {LOOP}"]


def test_a_playbook_is_created_complete_or_not_at_all(tmp_path, monkeypatch):
    """The disk fills while the tables are made: nothing is left at the path (no empty file that later reads as
    'not a playbook'), no temporary file either, and the next open creates it whole."""
    import sqlite3

    path = tmp_path / "pb.sqlite"
    real = schema.create_schema

    def disk_full(db):
        db.execute(schema.SCHEMA[0])
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(schema, "create_schema", disk_full)
    with pytest.raises(PlaybookError, match="disk is full.*nothing was written"):
        Playbook(path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(schema, "create_schema", real)
    with Playbook(path) as playbook:
        assert len(playbook) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("pb.sqlite")) == []


def test_an_empty_file_left_by_an_older_version_becomes_a_playbook(tmp_path):
    from playground.plugins.playbook.store import Playbook

    path = tmp_path / "pb.sqlite"
    path.write_bytes(b"")
    with Playbook(path) as playbook:
        assert len(playbook) == 0


def test_a_lone_surrogate_in_a_lesson_file_is_a_named_bad_line_and_no_playbook_is_made(tmp_path, capsys):
    """Issue 38: it used to raise UnicodeEncodeError from the insert and leave an empty playbook behind."""
    from tests.conftest import cli

    source = tmp_path / "lessons.jsonl"
    good = {"failure_type": "progress", "labels": ["planning_stall"], "trigger": "stuck", "principle": "do x"}
    source.write_text(json.dumps(good) + "\n" + json.dumps({**good, "trigger": "when \udc80 stuck"}) + "\n")
    with pytest.raises(PlaybookImportError) as caught:
        playbook_io.read_jsonl(source)
    assert caught.value.problems == ["line 2: 'trigger' holds a lone surrogate ('\\udc80'): not valid Unicode"]
    code, _, err = cli(capsys, "playbook", "import", str(tmp_path / "pb.db"), str(source))
    assert code == 2 and "lone surrogate" in err and not (tmp_path / "pb.db").exists()


def test_a_playbook_with_a_valid_header_and_damaged_pages_is_refused_up_front(tmp_path, capsys):
    """Issue 38: the up-front check read only the header, so damaged pages failed a run mid-way."""
    from tests.conftest import cli

    path = tmp_path / "pb.sqlite"
    with Playbook(path) as pb:
        for number in range(400):
            pb.add("progress", [STALL], f"trigger {number} " + "x" * 200, "principle " + "y" * 300)
    data = bytearray(path.read_bytes())
    for page in (10, 20):
        data[(page - 1) * 4096:(page - 1) * 4096 + 12] = b"\xab" * 12  # the b-tree page headers
    path.write_bytes(bytes(data))
    problem = schema.playbook_problem(path, read_pages=True)  # the check before a run reads every page
    assert problem is not None and "restore it from a copy" in problem and "\n" not in problem
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "sentry", "--episodes", "1",
                       "--playbook", str(path), "--quiet", "--out", str(tmp_path / "run"))
    assert code == 2 and "restore it from a copy" in err and not (tmp_path / "run" / "episodes.jsonl").exists()


def test_a_lesson_from_an_observation_with_a_lone_surrogate_is_stored_with_u_fffd(book):
    """Issue 38: Sentry writes lessons from what the agent saw; a lone surrogate there must not fail the episode."""
    text = playbook_io.without_surrogates("take the \udc80 key")
    assert text == "take the \ufffd key"
    assert book.get(book.add("progress", [STALL], text, "p")).trigger == text
