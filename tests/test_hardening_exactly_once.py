"""Issue 16, item 2: exactly-once lessons across a kill and a resume.

A lesson's identity is its provenance (run, episode, attempt, step): storing it again, as
a replayed episode does when its process was killed after the lesson was written but
before the episode's record was, returns the stored lesson. The run id survives resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from playground.plugins.playbook.store import Playbook

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run

TASKS = [f"tiny-{i}" for i in range(20_000, 20_026)]  # the last one stores two lessons
NOISE = {"stop": 0.04, "repeat": 0.08, "stall": 0.08}


def _config(out: Path, playbook: Path | None = None) -> RunConfig:
    return RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="noisy", harnesses=["sentry"],
                     out=str(out), playbook=str(playbook) if playbook else None, agent_options=NOISE)


def _lessons(playbook: Path) -> list:
    with Playbook(playbook, read_only=True) as pb:
        return list(pb.all())


def _traced_lessons(out: Path) -> set[int]:
    ids = set()
    for record in map(json.loads, (out / "episodes.jsonl").read_text().splitlines()):
        for line in (out / record["trace"]).read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "lesson":
                ids.add(event["id"])
    return ids


def _content(lessons: list) -> list[tuple]:
    """What a playbook holds, apart from ids and creation times: each lesson's text, provenance and counters."""
    return [(lesson.failure_type, lesson.labels, lesson.subtype, lesson.trigger, lesson.principle,
             json.dumps(lesson.provenance, sort_keys=True), lesson.retrieved, lesson.verified, lesson.helped)
            for lesson in lessons]


def test_a_replayed_episode_leaves_the_playbook_an_uninterrupted_run_leaves(tmp_path):
    out, playbook = tmp_path / "run", tmp_path / "pb.sqlite"
    run(Host().load(), _config(out, playbook))
    first = _lessons(playbook)
    run_id = json.loads((out / "config.json").read_text())["run_id"]
    assert first, "the noisy agent should make sentry store lessons"
    assert any(lesson.retrieved for lesson in first), "later episodes should retrieve earlier lessons"

    # As if killed after the last episode stored its lessons and counted its retrievals, before its record was written.
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert records[-1]["lessons_added"] > 0
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:-1]))

    run(Host().load(), _config(out, playbook))
    again = _lessons(playbook)
    assert json.loads((out / "config.json").read_text())["run_id"] == run_id  # stable across resumes
    # the replay's lessons replace the ones the cut-off play stored; no counter is counted twice
    assert _content(again) == _content(first)
    assert [lesson.id for lesson in again][:-2] == [lesson.id for lesson in first][:-2]
    origins = [(l.provenance["run"], l.provenance["episode"], l.provenance["attempt"], l.provenance["step"])
               for l in again]
    assert len(origins) == len(set(origins))
    assert _traced_lessons(out) == {lesson.id for lesson in again}


def test_the_store_returns_the_stored_lesson_for_a_repeated_provenance(tmp_path):
    provenance = {"run": "r1", "env": "tiny", "task": "t", "episode": "r1:sentry:t", "step": 3}
    with Playbook(tmp_path / "pb.sqlite") as pb:
        first = pb.add("progress", ["planning_stall"], "idles", "act", provenance=provenance)
        again = pb.add("progress", ["planning_stall"], "idles (worded anew)", "act", provenance=dict(provenance))
        other_step = pb.add("progress", ["planning_stall"], "idles", "act", provenance={**provenance, "step": 4})
        other_attempt = pb.add("progress", ["planning_stall"], "idles", "act", provenance={**provenance, "attempt": 2})
        no_provenance = [pb.add("progress", ["planning_stall"], "idles", "act") for _ in range(2)]
        assert again == first and len({first, other_step, other_attempt}) == 3
        assert no_provenance[0] != no_provenance[1]  # lessons without an episode's provenance are not keyed
        assert len(pb) == 5
        # merging moves the identity to the kept lesson; pruning forgets it
        pb.merge(0.5)
        kept = {lesson.id for lesson in pb.all()}
        assert pb.add("progress", ["planning_stall"], "x", "y", provenance={**provenance, "step": 4}) in kept


def test_an_older_playbook_gains_the_identity_table_when_opened_for_writing(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    with Playbook(path) as pb:
        pb.add("progress", ["planning_stall"], "idles", "act")
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER lessons_forget_origin")
    db.execute("DROP TABLE lesson_origins")
    db.commit()
    db.close()
    provenance = {"run": "r", "episode": "e", "step": 1}
    with Playbook(path) as pb:
        assert pb.add("progress", ["planning_stall"], "a", "b", provenance=provenance) == \
            pb.add("progress", ["planning_stall"], "a", "b", provenance=provenance)


SLOW_NOISY = """
import time
from playground.core.hookspecs import hookimpl
from playground.agents.noisy import NoisyAgent

class SlowNoisy(NoisyAgent):
    def propose(self, view):
        time.sleep(0.01)
        return super().propose(view)

@hookimpl
def register_agents(register):
    register("slow-noisy", SlowNoisy, needs_expert=True)
"""


@pytest.mark.slow
def test_sigkill_with_two_workers_then_resume_stores_each_lesson_once(tmp_path):
    from tests.conftest import write_plugin_dist

    root = write_plugin_dist(tmp_path / "site", "slow-noisy", {"slow": SLOW_NOISY})
    out, playbook = tmp_path / "run", tmp_path / "pb.sqlite"
    cmd = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--split", "test", "--agent",
           "slow-noisy", "--harness", "sentry", "--episodes", "40", "--workers", "2", "--out", str(out),
           "--playbook", str(playbook), "--quiet"] + [f"--agent-option={k}={v}" for k, v in NOISE.items()]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 90
    path = out / "episodes.jsonl"
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 8):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and both workers
    proc.wait()
    assert len(path.read_text().splitlines()) < 40, "the run should have been killed part-way"
    finished = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert finished.returncode == 0, finished.stderr
    lessons = _lessons(playbook)
    origins = [(l.provenance["run"], l.provenance["episode"], l.provenance["step"]) for l in lessons]
    assert lessons and len(origins) == len(set(origins))
    assert _traced_lessons(out) <= {lesson.id for lesson in lessons}
    assert len({run_id for run_id, _, _ in origins}) == 1
