"""Executors: serial, long-lived local workers and Ray play the same episodes; a dead worker costs one episode.

What a run's summary says must not depend on where its episodes were played: a player that
keeps its env and agent across episodes plays each one as a fresh env and agent would, and
`--workers 2` and `--executor ray` give the serial run's summary for the same seeds. A worker
that dies mid-episode is recorded as that episode's error (a strict run stops, naming it).
The Ray tests start a private local Ray on 127.0.0.1; they need the `ray` extra.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from playground.host.manager import Host
from playground.processes import Reaper, is_running, marked_processes, process_start_time
from playground.run.executors import EXECUTORS, Job, make_executor
from playground.run.executors.base import JobQueue
from playground.run.config import RunConfig
from playground.run.episodes import RunWork
from playground.run.runner import run
from playground.run.traces import read_trace
from tests.conftest import cli, needs_extra, run_cli, write_plugin_dist
from tests.test_orphans import MARKER, kill_and_check, needs_linux, records, start_run, wait_for_record

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = needs_extra("ray", HAS_RAY, "`ray` is not installed")

# A noisy TextWorld job whose harnesses do not learn online, so the order episodes finish in cannot change them;
# `reflexion` is a cascade (several attempts per episode, one env), `guard-only` and `monitor` intervene.
NOISIER = {"invalid": 0.3, "repeat": 0.2, "drift": 0.2}  # failures in most episodes, so repairs and retries happen
TEXTWORLD_JOB = ["--env", "textworld:custom", "--agent", "noisy", "--episodes", "4", "--max-steps", "12",
                 "--harness", "base", "--harness", "guard-only", "--harness", "reflexion",
                 *[part for key, rate in NOISIER.items() for part in ("--agent-option", f"{key}={rate}")]]
TIMING = {"seconds_per_step", "run_id"}  # what may differ between two plays of the same episodes

AGENTS = """
import os
import signal
import time

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl

# With $DIE_ON_START, every process but the first to load this plugin (the run) dies loading it: its workers.
if os.environ.setdefault("EXECUTOR_TEST_RUN", str(os.getpid())) != str(os.getpid()) and os.environ.get("DIE_ON_START"):
    os._exit(3)


class Dies(NoisyAgent):
    # The noisy agent, whose process dies (SIGKILL) on its first step of task $DIE_TASK.
    def propose(self, view):
        if self.task == os.environ.get("DIE_TASK"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().propose(view)

    def reset(self, task_id, seed):
        self.task = task_id
        return super().reset(task_id, seed)


class Slow(NoisyAgent):
    # The noisy agent, 20 ms a step: the same episodes, slow enough to be killed in the middle of a run.
    def propose(self, view):
        time.sleep(0.02)
        return super().propose(view)


@hookimpl
def register_agents(register):
    register("dies-noisy", Dies, needs_expert=True)
    register("slow-noisy", Slow, needs_expert=True)
"""


def without_timing(value):
    """`value` (a summary) without what depends on the clock or the run."""
    if isinstance(value, dict):
        return {key: without_timing(item) for key, item in value.items() if key not in TIMING}
    return value


def summary(out: Path) -> dict:
    return without_timing(json.loads((out / "summary.json").read_text()))


def plugin_env(tmp_path: Path, **extra: str) -> dict:
    site = write_plugin_dist(tmp_path / "site", "executor-agents", {"executor_agents": AGENTS})
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), **extra}


# -- the player: one env and agent for many episodes play them as fresh ones would -------------------------------


def _jobs(harnesses: list[str], tasks: list[str]) -> list[Job]:
    return [Job(harness, task) for task in tasks for harness in harnesses]


def _play(host: Host, config: RunConfig, jobs: list[Job], keep: bool) -> list[tuple[dict, list[dict]]]:
    """Play `jobs` with one player (`keep`) or a new player each; return each record with its trace's events."""
    out = Path(config.out)
    work = RunWork(config, "run0", str(out), {"env": config.env, "run_id": "run0"})
    played = []
    player = work.player(host)
    try:
        for job in jobs:
            if not keep:
                player.close()
                player = work.player(host)
            record = player.play(job)
            events = [{k: v for k, v in e.items() if k not in ("t", "seconds")}
                      for e in read_trace(out / record.trace)]
            played.append((record.model_dump(exclude={"seconds"}), events))
    finally:
        player.close()
    return played


@pytest.mark.parametrize("env, task_set, harnesses, tasks", [
    ("tiny", "default", ["base", "guard-only", "reflexion"], [f"tiny-{i}" for i in range(20_000, 20_004)]),
    ("textworld", "custom", ["base", "guard-only", "reflexion"], [f"custom-{i}" for i in range(20_000, 20_003)]),
    ("workflow", "etl", ["base", "dart"], None),
])
def test_a_player_that_keeps_its_env_and_agent_plays_each_episode_as_fresh_ones_do(tmp_path, env, task_set,
                                                                                    harnesses, tasks):
    from playground.run.validation import resolve_tasks

    host = Host().load()
    task_set, split, found = resolve_tasks(host, env, task_set, None, 3 if tasks is None else len(tasks))
    tasks = tasks or found

    def config(name: str) -> RunConfig:
        return RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent="noisy", harnesses=harnesses,
                         out=str(tmp_path / name), max_steps=15, agent_options=NOISIER)

    host.envs.get(env).provider.prepare(task_set, tasks)
    jobs = _jobs(harnesses, tasks)
    kept = _play(host, config("kept"), jobs, keep=True)
    fresh = _play(host, config("fresh"), jobs, keep=False)
    assert [record for record, _ in kept] == [record for record, _ in fresh]
    assert [events for _, events in kept] == [events for _, events in fresh]
    assert sum(record["invalid_actions"] for record, _ in kept) >= 3  # the noisy agent erred, so plugins acted


class _Counting:
    """A factory that counts what it builds."""

    def __init__(self, factory) -> None:
        self.factory, self.built = factory, 0

    def __call__(self, *args, **kwargs):
        self.built += 1
        return self.factory(*args, **kwargs)


def test_a_player_builds_its_env_and_agent_once_and_again_only_after_an_error(tmp_path, monkeypatch):
    from playground.agents import noisy

    host = Host().load()
    provider = host.envs.get("tiny").provider
    make = _Counting(provider.make)
    monkeypatch.setattr(provider, "make", make)
    agent_spec = host.agents.get("noisy")
    factory = _Counting(agent_spec.factory)
    monkeypatch.setitem(host.agents._items, "noisy", dataclasses.replace(agent_spec, factory=factory))
    tasks = [f"tiny-{i}" for i in range(20_000, 20_006)]
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                       harnesses=["base", "guard-only"], out=str(tmp_path / "run"), record_errors=True)
    calls = {"n": 0}
    original = noisy.NoisyAgent.reset

    def reset(self, task_id, seed):  # the agent faults in its 4th episode
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("agent fault")
        return original(self, task_id, seed)

    monkeypatch.setattr(noisy.NoisyAgent, "reset", reset)
    result = run(host, config)
    statuses = [json.loads(line)["status"] for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert statuses.count("error") == 1 and len(statuses) == 12
    assert result["harnesses"]["base"]["episodes"] == 6
    assert make.built == 2  # once for the run, once after the error
    assert factory.built == 2  # the same: the first is the one check_config built (lock.json reads it too)


def test_a_detached_player_writes_nothing_and_the_run_writes_its_traces_as_a_player_does(tmp_path):
    # What a Ray worker plays (`RunWork.detach`): traces kept in memory, handed back, written by the run's process.
    import re
    import shutil

    host = Host().load()
    tasks = ["tiny-20000", "tiny-20001"]
    out = tmp_path / "run"
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                       harnesses=["base", "reflexion"], out=str(out), max_steps=15, agent_options=NOISIER,
                       playbook=str(tmp_path / "books" / "shared.sqlite"))  # reflexion keeps its notes beside it
    work = RunWork(config, "run0", str(out), {"env": "tiny", "run_id": "run0"})
    jobs = _jobs(["base", "reflexion"], tasks)
    detached = work.detach().player(host)
    played = []
    for job in jobs:
        record = detached.play(job)
        traces = detached.take_traces()
        sent = pickle.dumps(traces)  # as they travel back from a Ray worker: compressed
        assert len(sent) < sum(len("".join(trace.lines)) for trace in traces) / 3
        played.append((record, pickle.loads(sent)))
    assert not out.exists()  # nothing under the run directory, not even its folders
    assert sum(len(traces) for _, traces in played) > len(jobs)  # a cascade's attempts have a trace each
    for _, traces in played:
        work.write_traces(traces)
    written = {path: path.read_bytes() for path in sorted(out.rglob("*.jsonl"))}
    for path in written:
        path.unlink()
    shutil.rmtree(tmp_path / "books")  # the same episodes again, from the same (empty) notes
    serial = [record for record in map(work.player(host).play, jobs)]
    stamp = re.compile(rb'"(t|seconds)": [0-9.e-]+')  # the clock's: when an event was written, how long it took
    assert {p: stamp.sub(b"t", data) for p, data in written.items()} == \
        {p: stamp.sub(b"t", p.read_bytes()) for p in sorted(out.rglob("*.jsonl"))}
    drop = {"seconds"}
    assert [r.model_dump(exclude=drop) for r, _ in played] == [r.model_dump(exclude=drop) for r in serial]


# -- local workers ------------------------------------------------------------------------------------------------


def test_the_job_queue_keeps_a_tasks_harnesses_for_one_worker_and_lends_them_out_at_the_end():
    jobs = [Job(h, t, trial) for trial in (1, 2) for t in ("a", "b") for h in ("base", "sentry")]
    queue = JobQueue(jobs)
    assert queue.next_for("w1") == Job("base", "a", 1)
    assert queue.next_for("w2") == Job("base", "b", 1)
    assert queue.next_for("w1") == Job("sentry", "a", 1)  # the rest of its task, not the next in line
    assert queue.next_for("w1") == Job("base", "a", 2)
    queue.give_back("w1", Job("base", "a", 2))  # w1 died holding it: the job and what it kept go first
    assert queue.next_for("w3") == Job("base", "a", 2)
    assert queue.next_for("w3") == Job("sentry", "a", 2)
    assert queue.next_for("w3") == Job("base", "b", 2)
    assert queue.next_for("w2") == Job("sentry", "b", 1)
    assert queue.next_for("w2") == Job("sentry", "b", 2)  # no task left: it takes w3's kept job
    assert not queue


@pytest.mark.slow
def test_serial_and_two_local_workers_give_the_same_summary_on_textworld(tmp_path):
    serial = run_cli("run", *TEXTWORLD_JOB, "--quiet", "--out", str(tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr
    parallel = run_cli("run", *TEXTWORLD_JOB, "--quiet", "--workers", "2", "--out", str(tmp_path / "two"))
    assert parallel.returncode == 0, parallel.stderr
    assert summary(tmp_path / "two") == summary(tmp_path / "serial")
    keys = [r["key"] for r in records(tmp_path / "two")]
    assert len(keys) == len(set(keys)) == 12


@pytest.mark.slow
@needs_linux
def test_a_local_worker_that_dies_costs_its_episode_alone_and_a_strict_run_stops(tmp_path):
    env = plugin_env(tmp_path, DIE_TASK="tiny-20002")
    args = ["run", "--env", "tiny", "--agent", "dies-noisy", "--harness", "base", "--episodes", "6", "--workers", "2",
            "--quiet"]
    done = subprocess.run([sys.executable, "-m", "playground.cli.main", *args, "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr  # the episode the worker died in is left unfinished, for a rerun
    by_task = {r["task_id"]: r for r in records(tmp_path / "run")}
    assert sorted(by_task) == ["tiny-20000", "tiny-20001", "tiny-20003", "tiny-20004", "tiny-20005"]
    assert all(r["status"] != "error" for r in by_task.values())
    (died,) = [json.loads(line) for line in (tmp_path / "run" / "unfinished.jsonl").read_text().splitlines()]
    assert died["task_id"] == "tiny-20002" and "worker process died" in died["error"]
    assert [e["type"] for e in read_trace(tmp_path / "run" / died["trace"])] == ["header", "error", "end"]

    recorded = subprocess.run([sys.executable, "-m", "playground.cli.main", *args, "--record-errors",
                               "--out", str(tmp_path / "recorded")], env=env, capture_output=True, text=True,
                              timeout=300)
    assert recorded.returncode == 0, recorded.stderr
    died_record = {r["task_id"]: r for r in records(tmp_path / "recorded")}["tiny-20002"]
    assert died_record["status"] == "error" and "worker process died" in died_record["error"]

    strict = subprocess.run([sys.executable, "-m", "playground.cli.main", *args, "--strict",
                             "--out", str(tmp_path / "strict")], env=env, capture_output=True, text=True, timeout=300)
    assert strict.returncode == 2
    assert "base/tiny-20002" in strict.stderr and "worker process died" in strict.stderr


@pytest.mark.slow
def test_workers_that_die_while_starting_stop_the_run_and_record_nothing(tmp_path):
    env = plugin_env(tmp_path, DIE_ON_START="1")
    done = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "noisy",
                           "--episodes", "4", "--workers", "2", "--quiet", "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "a worker process died while loading the plugins (exit code 3)" in done.stderr
    assert records(tmp_path / "run") == []


def test_executor_options_are_checked_before_anything_is_written(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--address", "127.0.0.1:6379",
                       "--out", str(tmp_path / "run"))
    assert code == 2 and "--address '127.0.0.1:6379' names a Ray cluster; it needs --executor ray" in err
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--executor", "dask",
                       "--out", str(tmp_path / "run"))
    assert code == 2 and "dask" in err
    assert not (tmp_path / "run").exists()
    assert sorted(EXECUTORS) == ["local", "ray"]
    with pytest.raises(ValueError, match="unknown executor 'dask'; choose from: local, ray"):
        make_executor("dask")


def test_without_the_ray_extra_executor_ray_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as it does where the extra is missing
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--executor", "ray",
                       "--out", str(tmp_path / "run"))
    assert code == 2 and "--executor ray needs the 'ray' extra" in err and "pip install" in err
    assert not (tmp_path / "run").exists()


# -- the reaper ---------------------------------------------------------------------------------------------------


def _sleeper(env: dict) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(60)"],
                            stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


@needs_linux
def test_the_reaper_kills_the_marked_processes_when_told():
    token = uuid.uuid4().hex
    marked = _sleeper({**os.environ, "REAPER_TEST": token})
    unmarked = _sleeper(dict(os.environ))
    assert marked_processes("REAPER_TEST", token) == [marked.pid]
    assert Reaper("REAPER_TEST", token).stop()
    assert marked.wait(timeout=10) == -signal.SIGKILL and unmarked.poll() is None
    unmarked.kill()
    unmarked.wait()
    for pipe in (marked.stdout, unmarked.stdout):
        pipe.close()


OWNER = """
import os, subprocess, sys, time
from playground.processes import Reaper

os.environ["REAPER_TEST"] = sys.argv[1]
reaper = Reaper("REAPER_TEST", sys.argv[1], every=0.1)
# A marked process in its own session starts a child whose environment lacks the mark, then dies: the child is an
# orphan the mark cannot find (as Ray's agents, whose titles overwrite their environment, once their raylet is gone).
middle = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\\n"
                           "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env={})\\n"
                           "print(child.pid, flush=True)\\ntime.sleep(60)"],
                          stdout=subprocess.PIPE, start_new_session=True)
child = int(middle.stdout.readline())
time.sleep(2)  # the reaper notes it
middle.kill()
middle.wait()
print(child, flush=True)
time.sleep(60)
"""


@needs_linux
def test_the_reaper_kills_what_it_noted_when_its_owner_is_killed():
    proc = subprocess.Popen([sys.executable, "-c", OWNER, uuid.uuid4().hex], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    start = process_start_time(child)
    assert is_running(child, start)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while is_running(child, start) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(child, start)
    proc.stdout.close()


# -- Ray ----------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_ray
@needs_linux
def test_ray_gives_the_serial_summary_and_leaves_no_process(tmp_path):
    serial = run_cli("run", *TEXTWORLD_JOB, "--quiet", "--out", str(tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr
    marker = uuid.uuid4().hex
    done = run_cli("run", *TEXTWORLD_JOB, "--quiet", "--executor", "ray", "--workers", "2",
                   "--out", str(tmp_path / "ray"), env={MARKER: marker})
    assert done.returncode == 0, done.stderr
    assert summary(tmp_path / "ray") == summary(tmp_path / "serial")
    keys = [r["key"] for r in records(tmp_path / "ray")]
    assert len(keys) == len(set(keys)) == 12
    left = [pid for pid in marked_processes(MARKER, marker)]
    assert not left, f"Ray processes left after the run: {left}"


@pytest.mark.slow
@needs_ray
@needs_linux
def test_a_ray_run_killed_mid_way_resumes_to_the_serial_summary(tmp_path):
    env = plugin_env(tmp_path)
    args = ["--env", "textworld:custom", "--agent", "slow-noisy", "--episodes", "6", "--max-steps", "12",
            "--harness", "base", "--harness", "guard-only"]
    serial = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *args, "--quiet",
                             "--out", str(tmp_path / "serial")], env=env, capture_output=True, text=True, timeout=300)
    assert serial.returncode == 0, serial.stderr

    out = tmp_path / "ray"
    ray_args = [*args, "--executor", "ray", "--workers", "2", "--out", str(out)]
    marker = uuid.uuid4().hex
    proc = start_run(ray_args, env, marker)
    try:
        wait_for_record(out, 240)
        kill_and_check(proc, marker, 30)  # the run and every Ray process it started are gone (a loaded machine
        # takes seconds to tear down a SIGKILLed raylet and its object store)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    killed_at = len(records(out))
    assert 1 <= killed_at < 12 and not (out / "summary.json").exists()

    done = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *ray_args, "--quiet"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    keys = [r["key"] for r in records(out)]
    assert len(keys) == len(set(keys)) == 12
    assert summary(out) == summary(tmp_path / "serial")


@pytest.mark.slow
@needs_ray
@needs_linux
def test_a_ray_worker_that_dies_costs_only_the_episodes_it_held(tmp_path):
    """A worker SIGKILLed in task 20001 costs that episode, and at most the one other it held (PREFETCH: the reply
    of the episode it finished just before may die with the process, a race Ray does not close), each left
    unfinished for the rerun: none is an error record, none is recorded twice, and the rerun plays exactly them."""
    from playground.run.executors.ray_tasks import PREFETCH

    env = plugin_env(tmp_path, DIE_TASK="tiny-20001")
    args = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "dies-noisy", "--harness",
            "base", "--episodes", "4", "--executor", "ray", "--workers", "2", "--quiet", "--out", str(tmp_path / "run")]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stderr  # the episode the worker died in is left unfinished, for a rerun
    by_task = {r["task_id"]: r for r in records(tmp_path / "run")}
    assert all(r["status"] != "error" for r in by_task.values())
    lost = [json.loads(line) for line in (tmp_path / "run" / "unfinished.jsonl").read_text().splitlines()]
    assert "tiny-20001" in [e["task_id"] for e in lost] and 1 <= len(lost) <= PREFETCH
    assert all("Ray worker died" in e["error"] for e in lost)
    assert sorted([*by_task, *(e["task_id"] for e in lost)]) == [f"tiny-2000{i}" for i in range(4)]
    env.pop("DIE_TASK")
    again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    keys = [r["key"] for r in records(tmp_path / "run")]
    assert len(keys) == len(set(keys)) == 4
