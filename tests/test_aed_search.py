"""AED's search-selected proposals: `aed diagnose --proposals N` gives up to N distinct checked candidate
corrections per pair (the first is the pair's correction, and N=1 leaves the records as they were), `aed replay`
plays every candidate against the same retry and selects the best, and the study columns
(`aed_selected_pass_rate`) and `aed export` report it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from playground.agents.http_model import HTTPChatModel
from playground.cli.main import main
from playground.plugins.aed.diagnose import (
    check_candidates,
    check_record,
    diagnose_run,
    failed_episodes,
    llm_diagnoses,
    rule_diagnoses,
)
from playground.plugins.aed.figures import figures_of
from playground.plugins.aed.replay import GRADES, select_candidate
from playground.plugins.aed.views import build_view, chosen_proposal
from playground.run.forks import load_episode
from playground.run.rundir import load_records
from playground.run.traces import read_trace
from playground.testing.openai_server import ScriptedChatServer


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("aed-search") / "run"
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3", "--agent-option",
                 "stop=0.05", "--harness", "base", "--harness", "sentry", "--episodes", "12", "--max-steps", "12",
                 "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def searched(tiny_run, tmp_path_factory):
    """A copy of the run diagnosed with three proposals per pair and replayed (a random continuation, so the
    candidates' outcomes can differ)."""
    run = tmp_path_factory.mktemp("aed-search-replayed") / "run"
    shutil.copytree(tiny_run, run)
    assert main(["aed", "diagnose", str(run), "--proposals", "3"]) == 0
    assert main(["aed", "replay", str(run), "--agent", "random", "--trials", "2"]) == 0
    return run


def test_one_proposal_leaves_the_records_as_they_were_and_three_add_checked_candidates(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    diagnose_run(run)
    single = read_jsonl(run / "aed" / "diagnoses.jsonl")
    diagnose_run(run, proposals=1)
    assert read_jsonl(run / "aed" / "diagnoses.jsonl") == single
    assert single and not any("candidates" in r for r in single)
    summary = diagnose_run(run, proposals=3)
    several = read_jsonl(run / "aed" / "diagnoses.jsonl")
    assert [{k: v for k, v in r.items() if k not in ("candidates", "candidates_dropped")} for r in several] == single
    assert any(len(r["candidates"]) > 1 for r in several)
    for record in several:
        candidates = record["candidates"]
        assert len(candidates) <= 3 and len(set(candidates)) == len(candidates)
        if record["correction"] is None:
            assert candidates == []
            continue
        assert candidates[0] == record["correction"]
        episode = load_episode(run / record["trace"])
        admissible = episode.at(record["step"]).admissible
        for candidate in candidates:
            assert candidate in admissible and candidate != record["attributed_action"]
            assert check_record({**record, "correction": candidate}, episode) is None
    assert summary["proposals"] == 3 and summary["candidates"]["kept"] == sum(len(r["candidates"]) for r in several)


def rule_records(run: Path) -> list[dict]:
    """The rule producer's records of a run, diagnosed in memory (nothing written)."""
    return [r for relative, episode in failed_episodes(run, Counter()) for r in rule_diagnoses(episode, relative)]


def test_the_llm_producer_asks_one_reply_for_alternatives_and_each_candidate_is_checked(tiny_run):
    record = next(r for r in rule_records(tiny_run) if r["correction"] is not None)
    episode = load_episode(tiny_run / record["trace"])
    other = next(a for a in episode.at(record["step"]).admissible if a != record["correction"])
    reply = {"step": record["step"], "responsible": "agent", "explanation": "it sent a garbled command",
             "quotations": record["quotations"][:1], "correction": record["correction"],
             "correction_reason": "the command it meant",
             "alternatives": [record["correction"], record["attributed_action"], "fly to the moon", other]}
    single = {k: v for k, v in reply.items() if k != "alternatives"}
    with ScriptedChatServer([json.dumps(reply), json.dumps(single)]) as server:
        model = HTTPChatModel(server.base_url, "test-model", retries=0)
        several = llm_diagnoses(episode, record["trace"], model, proposals=5)[0]
        one = llm_diagnoses(episode, record["trace"], model)[0]
        asked = [request["messages"][0]["content"] for request in server.requests]
    assert "alternatives" in asked[0] and "alternatives" not in asked[1]
    assert "candidates" not in one and one["correction"] == record["correction"]
    assert check_record(several, episode) is None
    check_candidates(several, episode)
    assert several["candidates"] == [record["correction"], other]
    assert [d["reason"] for d in several["candidates_dropped"]] == [
        "duplicate", "correction_is_the_error", "correction_not_admissible"]


def test_select_candidate_ranks_grade_then_trials_won_then_the_earliest():
    def candidate(won, grade="none"):
        return {"won": won, "grade": grade}

    assert select_candidate([candidate([False, False])]) == 0
    assert select_candidate([candidate([True, False]), candidate([True, True], "E2")]) == 1
    assert select_candidate([candidate([True, False]), candidate([True, True]), candidate([True, True])]) == 1
    assert select_candidate([candidate([True], "E1"), candidate([True, True])]) == 0  # a grade beats trials won
    assert select_candidate([candidate([True, False]), candidate([False, True])]) == 0


def test_replay_plays_every_candidate_and_the_selected_is_never_worse_than_the_first(searched):
    records = {r["id"]: r for r in read_jsonl(searched / "aed" / "diagnoses.jsonl")}
    replays = read_jsonl(searched / "aed" / "replays.jsonl")
    assert len(replays) == sum(r["correction"] is not None for r in records.values())
    assert any(len(r["candidates"]) > 1 for r in replays)
    for replay in replays:
        candidates = records[replay["id"]]["candidates"]
        assert [c["action"] for c in replay["candidates"]] == candidates
        episode = load_episode(searched / replay["trace"])
        played: dict[int, list[bool]] = {k: [] for k in range(len(candidates))}
        for transcript in replay["transcripts"]:
            events = read_trace(searched / transcript["trace"])
            assert events[1]["observation"] == episode.observation_before(replay["step"])  # the same start
            if transcript["arm"] == "control":
                continue
            index = transcript.get("candidate", 0)
            assert events[0]["lineage"].get("candidate", 0) == index
            first = next(e for e in events if e["type"] == "proposal")
            assert first["action"] == candidates[index]
            played[index].append(transcript["won"])
        assert [played[k] for k in range(len(candidates))] == [c["won"] for c in replay["candidates"]]
        assert all(len(won) == 2 for won in played.values())
        first, selected = replay["candidates"][0], replay["selected"]
        assert first["won"] == replay["treatment_won"] and first["grade"] == replay["grade"]
        assert selected == replay["candidates"][select_candidate(replay["candidates"])]
        assert GRADES.index(selected["grade"]) >= GRADES.index(first["grade"])
        assert sum(selected["won"]) >= sum(first["won"])


def test_the_study_columns_give_the_first_and_the_search_selected_pass_rates(searched, capsys):
    figures = figures_of(searched, load_records(searched))
    replays = read_jsonl(searched / "aed" / "replays.jsonl")
    first = [sum(r["candidates"][0]["won"]) / len(r["candidates"][0]["won"]) for r in replays]
    selected = [sum(r["selected"]["won"]) / len(r["selected"]["won"]) for r in replays]
    assert figures["aed_correction_pass_rate"] == pytest.approx(sum(first) / len(first))
    assert figures["aed_selected_pass_rate"] == pytest.approx(sum(selected) / len(selected))
    assert figures["aed_selected_pass_rate"] >= figures["aed_correction_pass_rate"]
    capsys.readouterr()
    assert main(["study", "table", str(searched)]) == 0
    assert "aed_selected_pass_rate" in capsys.readouterr().out


def test_export_carries_the_first_proposal_by_default_and_the_selected_one_on_request(searched):
    replays = {r["id"]: r for r in read_jsonl(searched / "aed" / "replays.jsonl")}
    records = {r["id"]: r for r in read_jsonl(searched / "aed" / "diagnoses.jsonl")}
    first = build_view(searched, "diagnosis", "none")
    selected = build_view(searched, "diagnosis", "none", proposal="selected")
    assert [r["output"]["correction"] for r in first] == [records[r["id"]]["correction"] for r in first]
    for row in selected:
        replay = replays.get(row["id"])
        expected = replay["selected"]["action"] if replay else records[row["id"]]["correction"]
        assert row["output"]["correction"] == expected and row["meta"]["proposal"] == "selected"
        assert row["meta"]["grade"] == (replay["selected"]["grade"] if replay else "none")
    for row in build_view(searched, "actor", "none", proposal="selected"):
        pair = row["id"].rsplit(":", 1)[0]
        assert row["target"]["action"] == replays[pair]["selected"]["action"]


def test_a_selected_candidate_replaces_the_correction_with_its_own_grade():
    record = {"id": "x", "correction": "go east", "correction_reason": "the command it meant"}
    replay = {"grade": "none", "candidates": [{"index": 0, "action": "go east", "won": [False], "grade": "none"},
                                              {"index": 1, "action": "go west", "won": [True], "grade": "E1"}],
              "selected": {"index": 1, "action": "go west", "won": [True], "grade": "E1"}}
    assert chosen_proposal(record, replay, "first") == (record, "none")
    chosen, grade = chosen_proposal(record, replay, "selected")
    assert (chosen["correction"], grade) == ("go west", "E1") and "candidate 2 of 2" in chosen["correction_reason"]
    assert chosen_proposal(record, None, "selected") == (record, "none")
