"""A Ray run on a multi-node cluster: workers never touch the run directory, a lost node loses nothing, and a playbook
file is refused when workers are on other machines.

The cluster is real: `ray.cluster_utils.Cluster` starts a head (no CPU: it plays nothing) and two worker nodes, each
its own raylet with one CPU, on this machine, once for the module. Every Ray worker process runs an audit hook
(`sys.addaudithook`, installed by the job's `worker_process_setup_hook`) that logs each file it opens or makes under
the watched folders, so the test reads what the workers did, not what they were meant to do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.episodes import RunWork
from playground.run.executors.ray_tasks import PlaybookPlacementError, check_playbook_placement
from playground.run.progress import EpisodeDone
from playground.run.runner import run
from tests.conftest import needs_extra, write_plugin_dist

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = needs_extra("ray", HAS_RAY, "`ray` is not installed")
TASKS = [f"tiny-{n}" for n in range(20_000, 20_003)]
CLOCK = re.compile(rb'"(t|seconds)": [0-9.e-]+')  # when an event was written, how long a step took

AUDIT = '''
import os
import sys

WATCH = tuple(p for p in os.environ.get("RAY_TEST_AUDIT_WATCH", "").split(os.pathsep) if p)
LOG = os.environ.get("RAY_TEST_AUDIT_LOG", "")
EVENTS = {"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.truncate", "os.link",
          "os.symlink", "os.chmod", "os.utime", "os.listdir", "os.scandir", "shutil.rmtree", "shutil.copyfile"}
busy = []


def hook(event, args):
    if event not in EVENTS or busy:
        return
    for arg in args[:2]:
        try:
            path = os.path.abspath(os.fsdecode(os.fspath(arg)))
        except TypeError:
            continue
        if path.startswith(WATCH):
            busy.append(1)
            try:
                fd = os.open(os.path.join(LOG, f"{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.write(fd, f"{event}\\t{path}\\n".encode())
                os.close(fd)
            finally:
                busy.pop()


def install():
    sys.addaudithook(hook)
'''

SLOW = '''
import time

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl


class Slow(NoisyAgent):
    # The noisy agent, 80 ms a step: a node can be lost while its episode plays.
    def propose(self, view):
        time.sleep(0.08)
        return super().propose(view)


@hookimpl
def register_agents(register):
    register("slow-noisy", Slow, needs_expert=True)
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head without CPUs and two one-CPU worker nodes on this machine, joined by this process; the job's workers
    run the audit hook. Yields (cluster, folder): runs go under folder/runs, the audit logs in folder/audit."""
    import ray
    from ray.cluster_utils import Cluster

    folder = tmp_path_factory.mktemp("cluster")
    site = write_plugin_dist(folder / "site", "ray-cluster-agents", {"ray_cluster_agents": SLOW})
    (site / "ray_test_audit.py").write_text(AUDIT)
    (folder / "audit").mkdir()
    (folder / "runs").mkdir()
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "RAY_TEST_AUDIT_WATCH", "RAY_TEST_AUDIT_LOG")}
    os.environ.update({  # the raylets, and so every worker, inherit them
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p),
        "RAY_TEST_AUDIT_WATCH": os.pathsep.join([str(folder / "runs") + os.sep, str(site) + os.sep]),
        "RAY_TEST_AUDIT_LOG": str(folder / "audit")})
    import sys
    sys.path.insert(0, str(site))  # this process (the driver) loads the same plugins
    small = {"object_store_memory": 80 * 1024**2}
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    try:
        for _ in range(2):
            nodes.add_node(num_cpus=1, **small)
        nodes.wait_for_nodes()
        ray.init(address=nodes.address, include_dashboard=False, logging_level="WARNING",
                 runtime_env={"worker_process_setup_hook": "ray_test_audit.install"})
        yield nodes, folder
    finally:
        ray.shutdown()
        nodes.shutdown()
        sys.path.remove(str(site))
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _config(out: Path, agent: str = "noisy", harnesses: tuple[str, ...] = ("base", "guard-only"),
            tasks: list[str] = TASKS, **extra) -> RunConfig:
    return RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent=agent, harnesses=list(harnesses),
                     out=str(out), max_steps=15, agent_options={"invalid": 0.3, "repeat": 0.2}, **extra)


def _records(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _audit(folder: Path) -> list[str]:
    return [line for log in (folder / "audit").glob("*.log") for line in log.read_text().splitlines()]


def _without_run(data: bytes, out: Path) -> bytes:
    """`data` with the run's id and the clock's figures taken out."""
    run_id = json.loads((out / "config.json").read_text())["run_id"]
    return CLOCK.sub(b"CLOCK", data.replace(run_id.encode(), b"RUN"))


# -- the placement rule, without Ray ------------------------------------------------------------------------------


def test_a_playbook_file_is_refused_only_with_a_worker_on_another_machine():
    books = {"sentry": "/runs/x/playbooks/sentry.sqlite"}
    check_playbook_placement(books, "10.0.0.1", ["10.0.0.1", "10.0.0.1"])  # every worker on this machine
    check_playbook_placement({}, "10.0.0.1", ["10.0.0.2"])  # no playbook file: nothing to share
    with pytest.raises(PlaybookPlacementError, match=r"other machines \(10\.0\.0\.2\).*sentry: /runs/x/playbooks/"
                                                     r"sentry\.sqlite.*--playbook postgresql://USER@HOST:PORT/DB"):
        check_playbook_placement(books, "10.0.0.1", ["10.0.0.1", "10.0.0.2"])
    with pytest.raises(PlaybookPlacementError, match="not a node"):  # through Ray Client the run is on no node
        check_playbook_placement(books, None, ["10.0.0.1"])


def test_the_playbook_files_are_those_of_harnesses_with_interventions_and_not_urls(tmp_path):
    host = Host().load()
    config = _config(tmp_path / "run", harnesses=("base", "guard-only", "reflexion"))
    files = RunWork(config, "r", str(tmp_path / "run"), {}).playbook_files(host)
    assert sorted(files) == ["guard-only", "reflexion"]  # base keeps no lessons
    assert files["reflexion"] == str(tmp_path / "run" / "playbooks" / "reflexion.sqlite")
    url = _config(tmp_path / "run", playbook="postgresql://lab@db.example:5432/lessons")
    assert RunWork(url, "r", str(tmp_path / "run"), {}).playbook_files(host) == {}  # a server every worker reaches


# -- on the cluster -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_ray
def test_workers_on_two_nodes_open_no_file_under_out_and_the_run_equals_a_local_one(cluster):
    _, folder = cluster
    host = Host().load()
    local, remote = folder / "runs" / "local", folder / "runs" / "ray"
    run(host, _config(local))
    before = set(_audit(folder))
    summary = run(host, _config(remote), executor="ray", workers=2)
    assert summary["unfinished"] == 0
    opened = [line for line in set(_audit(folder)) - before]
    assert not [line for line in opened if str(folder / "runs") in line], opened  # not one file under --out
    assert any("ray_cluster_agents.py" in line for line in opened), opened  # the hook ran where plugins loaded
    assert sorted(r["key"] for r in _records(remote)) == sorted(r["key"] for r in _records(local))
    by_key = {r["key"]: r for r in _records(local)}
    for record in _records(remote):
        mine, theirs = dict(record), dict(by_key[record["key"]])
        assert _without_run(json.dumps(mine, sort_keys=True).encode(), remote) == \
            _without_run(json.dumps(theirs, sort_keys=True).encode(), local)
        assert _without_run((remote / record["trace"]).read_bytes(), remote) == \
            _without_run((local / record["trace"]).read_bytes(), local)


@pytest.mark.slow
@needs_ray
def test_a_playbook_file_with_workers_on_another_machine_is_refused_before_any_episode(cluster, monkeypatch):
    import ray

    nodes, folder = cluster
    here = ray.get_runtime_context().get_node_id()
    real = ray.nodes

    def elsewhere():  # the worker nodes as a driver on another machine sees them
        return [{**node, "NodeManagerAddress": "10.9.8.7"} if node["NodeID"] != here else node for node in real()]

    monkeypatch.setattr(ray, "nodes", elsewhere)
    out = folder / "runs" / "refused"
    with pytest.raises(PlaybookPlacementError, match=r"other machines \(10\.9\.8\.7\).*guard-only: .*--playbook "
                                                     "postgresql://"):
        run(Host().load(), _config(out), executor="ray", workers=2)
    assert _records(out) == [] and not (out / "traces").exists()
    done = run(Host().load(), _config(folder / "runs" / "base-only", harnesses=("base",), tasks=TASKS[:2]),
               executor="ray", workers=2)  # base keeps no lessons: it runs on any node
    assert done["unfinished"] == 0


@pytest.mark.slow
@needs_ray
def test_a_node_lost_mid_run_leaves_its_episode_unfinished_and_the_rerun_plays_it_once(cluster):
    nodes, folder = cluster
    out = folder / "runs" / "lost"
    config = _config(out, agent="slow-noisy", harnesses=("base",), tasks=[f"tiny-{n}" for n in range(20_000, 20_006)])
    lost = []

    def progress(event):
        if isinstance(event, EpisodeDone) and not lost:  # the first record: both workers hold an episode now
            lost.append(next(iter(nodes.worker_nodes)))
            nodes.remove_node(lost[0], allow_graceful=False)

    try:
        summary = run(Host().load(), config, progress=progress, executor="ray", workers=2)
    finally:
        nodes.add_node(num_cpus=1, object_store_memory=80 * 1024**2)  # the cluster as the module's other tests see it
    assert lost and summary["unfinished"] >= 1, summary
    first = _records(out)
    unfinished = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    assert all("Ray worker died" in u["error"] for u in unfinished)
    assert len(first) + len(unfinished) == 6 and {u["key"] for u in unfinished}.isdisjoint(r["key"] for r in first)

    again = run(Host().load(), config, executor="ray", workers=2)
    assert again["unfinished"] == 0
    keys = [r["key"] for r in _records(out)]
    assert len(keys) == len(set(keys)) == 6  # no record twice
    assert keys[:len(first)] == [r["key"] for r in first]  # the rerun played only what was left
    for record in _records(out):
        trace = (out / record["trace"]).read_text().splitlines()
        assert json.loads(trace[0])["type"] == "header" and json.loads(trace[-1])["type"] == "end"
