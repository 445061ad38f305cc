"""The papers' baselines keep their memories in PostgreSQL beside a `postgresql://` playbook (issue 55: every method
that keeps lessons works with a PostgreSQL playbook), against a real server (tests/postgres_server.py): what a run
writes is there, once per episode however often the run is resumed or how many workers write at once, the next
episodes read it, and no memory file is made anywhere."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from playground.cli.main import main
from playground.core.payloads import EpisodeIds, EpisodeStart
from playground.plugins.baselines.memory import PostgresMemory, append_once, memory_for
from playground.run.rundir import load_records
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401 (fixtures: a real PostgreSQL)

RB_ITEMS = 3  # ReasoningBank's rb_items default (plugins/baselines/params.py)
FAILING = ["--agent-option", "stop=0.1", "--agent-option", "repeat=0.2", "--agent-option", "invalid=0.15"]
# harness -> the memory it keeps (its name in PostgreSQL: the file suffix it has beside a file playbook)
MEMORIES = {"ace": "ace.txt.deltas.jsonl", "awm": "workflows.jsonl", "reasoningbank": "memory.jsonl",
            "reflexion:2": "reflections.jsonl"}


def run(out: Path, harness: str, url: str, *extra: str) -> None:
    """4 episodes of `noisy` on tiny under `harness` (failing more often for Reflexion, which learns from failures;
    at its default rates for the others; AWM learns from successes, told by the env: tiny prints no completion
    message for its `observed` rule)."""
    failing = FAILING if harness.startswith("reflexion") else []
    if harness == "awm":
        failing = ["--param", "awm_success=env"]
    assert main(["run", "--env", "tiny", "--agent", "noisy", *failing, "--harness", harness, "--episodes", "4",
                 "--playbook", url, "--out", str(out), "--quiet", *extra]) == 0


def keys(records: list[dict]) -> list[tuple]:
    return [(r["run"], r["episode"], r["attempt"]) for r in records]


@pytest.mark.parametrize("harness", sorted(MEMORIES))
def test_a_baseline_keeps_its_memory_in_postgresql_once_per_episode(harness, postgres_url, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    run(out, harness, postgres_url)
    memory = PostgresMemory(postgres_url, MEMORIES[harness])
    written = memory.records()
    assert written, harness  # the run learnt something, and it is in the server
    if harness != "reasoningbank":  # one record per (run, episode, attempt); ReasoningBank writes a few at once
        assert len(set(keys(written))) == len(written)
    finished = {(r.episode_id, r.trial) for r in load_records(out)}
    assert {(episode, 1) for _, episode, _ in keys(written)} <= {(e, 1) for e, _ in finished}
    run(out, harness, postgres_url)  # a resume with nothing left to play writes nothing
    assert memory.records() == written
    suffix = MEMORIES[harness].removesuffix(".deltas.jsonl")
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith((suffix, suffix + ".lock"))]  # no memory file
    if harness == "ace":
        assert PostgresMemory(postgres_url, "ace.txt").read_text().strip()  # the curated playbook itself


def test_two_workers_write_a_memory_exactly_once(postgres_url, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    run(out, "reasoningbank", postgres_url, "--workers", "2")
    written = PostgresMemory(postgres_url, "memory.jsonl").records()
    episodes = {r.episode_id for r in load_records(out)}
    assert {episode for _, episode, _ in keys(written)} == episodes  # every episode learnt
    per_episode = Counter(keys(written))
    assert max(per_episode.values()) <= RB_ITEMS  # one write of at most rb_items items each, none twice


def test_the_next_episodes_read_what_the_earlier_ones_wrote(postgres_url):  # noqa: F811
    start = EpisodeStart(EpisodeIds("r", "e1", "tiny", "t", "awm"), "noisy", 1, "goal", "obs", 10,
                         playbook=postgres_url)
    memory = memory_for(start, "workflows.jsonl")
    assert isinstance(memory, PostgresMemory) and memory.records() == []
    append_once(memory, {"run": "r", "episode": "e1", "attempt": 1}, [{"steps": ["go"]}, {"steps": ["look"]}])
    append_once(memory, {"run": "r", "episode": "e1", "attempt": 1}, [{"steps": ["again"]}])  # a replay: nothing
    assert [r["steps"] for r in memory_for(start, "workflows.jsonl").records()] == [["go"], ["look"]]
    assert memory_for(start, "memory.jsonl").records() == []  # another baseline's memory is its own
    with memory.locked():
        memory.write_text("## STRATEGIES\n[s-1] helpful=0 harmful=0 :: look first\n")
    assert memory.read_text().startswith("## STRATEGIES")
