"""With `--executor ray` every step played reaches the run's step callback while the episodes play, as with the local
executor (tests/test_progress.py), and an episode's notes all come before its record; the workers still open no
file under --out (each Ray worker runs the audit hook of tests/test_ray_cluster.py, which logs what it opens)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import pytest

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.progress import EpisodeDone, StepNote
from playground.run.rundir import load_records
from playground.run.runner import run
from tests.conftest import needs_extra, write_plugin_dist
from tests.test_ray_cluster import AUDIT

needs_ray = needs_extra("ray", importlib.util.find_spec("ray") is not None, "`ray` is not installed")
pytestmark = [pytest.mark.slow, needs_ray]
TASKS = [f"tiny-{n}" for n in range(20_000, 20_004)]

PACED = '''
import time

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl


class Paced(NoisyAgent):
    # The noisy agent, 150 ms a step: an episode outlasts the run's pulls of its step notes.
    def propose(self, view):
        time.sleep(0.15)
        return super().propose(view)


@hookimpl
def register_agents(register):
    register("paced-noisy", Paced, needs_expert=True)
'''


@pytest.fixture
def audited_ray(tmp_path, monkeypatch):
    """A private local Ray (two CPUs) whose workers load the `paced-noisy` agent and run the audit hook on tmp/runs;
    yields tmp_path (runs under runs/, audit logs under audit/)."""
    import ray

    site = write_plugin_dist(tmp_path / "site", "ray-step-notes-agents", {"paced": PACED})
    (site / "ray_test_audit.py").write_text(AUDIT)
    (tmp_path / "audit").mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("RAY_TEST_AUDIT_WATCH", os.pathsep.join([str(tmp_path / "runs") + os.sep, str(site) + os.sep]))
    monkeypatch.setenv("RAY_TEST_AUDIT_LOG", str(tmp_path / "audit"))
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])  # this process (the driver) loads the same plugins
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING",
             _node_ip_address="127.0.0.1", object_store_memory=128 * 1024**2,
             runtime_env={"worker_process_setup_hook": "ray_test_audit.install"})
    try:
        yield tmp_path
    finally:
        ray.shutdown()


@pytest.mark.parametrize("batch_share, batch", [(16, 1), (1, 2)])  # 4 episodes on 2 actors: 1 or 2 per call
def test_each_step_played_on_ray_reaches_the_step_callback_before_its_record(audited_ray, monkeypatch, batch_share,
                                                                              batch):
    from playground.run.executors import ray_tasks

    monkeypatch.setattr(ray_tasks, "BATCH_SHARE", batch_share)
    answered: list[int] = []
    answer = ray_tasks._Actors._answer
    monkeypatch.setattr(ray_tasks._Actors, "_answer",
                        lambda self, ref, jobs, actor: (answered.append(len(jobs)), answer(self, ref, jobs, actor))[1])
    out = audited_ray / "runs" / "run"
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="paced-noisy",
                       harnesses=["base"], out=str(out), max_steps=12, agent_options={"invalid": 0.3})
    notes: list[tuple[float, StepNote]] = []
    finished: dict[str, float] = {}

    def progress(event) -> None:  # the one channel: steps, episodes recorded and messages, in order
        if isinstance(event, StepNote):
            assert event.key not in finished, "a step note came after its episode's record"
            notes.append((time.monotonic(), event))
        elif isinstance(event, EpisodeDone):
            finished[event.record.key] = time.monotonic()

    summary = run(Host().load(), config, progress, executor="ray", workers=2)
    assert summary["unfinished"] == 0
    steps = {r.key: r.steps for r in load_records(out)}
    assert len(steps) == len(TASKS) and sum(steps.values()) > len(steps)  # episodes of several steps
    played: dict[str, int] = {}
    for _, note in notes:
        played[note.key] = played.get(note.key, 0) + note.steps
    assert played == steps  # every step of every episode, once
    assert sorted(finished) == sorted(steps)
    first = {}
    for when, note in notes:
        first.setdefault(note.key, when)
    # notes came while the episodes played (pulled from the actors), not all with their records
    assert any(finished[key] - first[key] > 0.3 for key in steps), (first, finished)
    opened = [line for log in (audited_ray / "audit").glob("*.log") for line in log.read_text().splitlines()]
    assert answered == [batch] * (len(TASKS) // batch)  # the episodes went in calls of `batch`
    assert not [line for line in opened if str(audited_ray / "runs") in line], opened  # no file under --out
    assert any("ray_step_notes_agents" in line for line in opened), opened  # the hook ran where the plugins loaded
