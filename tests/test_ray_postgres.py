"""Sentry on a multi-node Ray cluster with its playbook in PostgreSQL: workers open no file under --out, lessons land
in the database, a node lost mid-run loses and duplicates nothing, and two runs share one playbook exactly-once.

The cluster is `tests/test_ray_cluster.py`'s (a head without CPUs and two one-CPU worker nodes on this machine, every
Ray worker under an audit hook), started for this module after PGPASSWORD is set: each node's workers reach the
server with the password their node's environment holds, as on a real cluster (the URLs carry none). The server is
the session's (`tests/postgres_server.py`). Exactly-once is checked from the run directories alone
(`tests/exactly_once.py`): no record twice, every lesson's provenance names one finished episode, and each lesson's
counters equal what the finished episodes' traces say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from playground.host.manager import Host
from playground.run.config import RunConfig, episode_id
from playground.run.runner import run
from tests.conftest import write_plugin_dist
from tests.exactly_once import problems
from tests.postgres_server import PASSWORD
from tests.test_ray_cluster import _audit, _records, needs_ray
from tests.test_ray_cluster import cluster as ray_cluster  # noqa: F401 (the fixture, this module's own instance)

pytestmark = [pytest.mark.slow, needs_ray]
ROOT = Path(__file__).resolve().parent.parent
NOISE = {"repeat": 0.3, "stall": 0.2}  # sentry repairs, verifies and learns on most tiny episodes
SMALL = {"num_cpus": 1, "object_store_memory": 80 * 1024**2}

STUCK = '''
import os
import time

import ray

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl


class Stuck(NoisyAgent):
    # The noisy agent, 80 ms a step. On task PLAYGROUND_TEST_STUCK_TASK, at step PLAYGROUND_TEST_STUCK_STEP, it writes
    # its node's id to PLAYGROUND_TEST_STUCK_FILE and waits a minute there: its node can be lost while it holds that
    # episode part-way. (The run gives its workers its PLAYGROUND_* variables.)
    def reset(self, task_id, seed):
        super().reset(task_id, seed)
        self.task = task_id

    def propose(self, view):
        time.sleep(0.08)
        marker = os.environ.get("PLAYGROUND_TEST_STUCK_FILE")
        if marker and self.task == os.environ["PLAYGROUND_TEST_STUCK_TASK"] \\
                and view.step == int(os.environ["PLAYGROUND_TEST_STUCK_STEP"]):
            with open(marker + ".part", "w") as f:
                f.write(ray.get_runtime_context().get_node_id())
            os.replace(marker + ".part", marker)
            time.sleep(60)
        return super().propose(view)


@hookimpl
def register_agents(register):
    register("stuck-noisy", Stuck, needs_expert=True)
'''


@pytest.fixture(scope="module")
def credentials(postgres_server):
    """PGPASSWORD in this process's environment before the cluster starts: its raylets, so its workers, inherit it."""
    saved = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = PASSWORD
    yield
    if saved is None:
        os.environ.pop("PGPASSWORD", None)
    else:
        os.environ["PGPASSWORD"] = saved


@pytest.fixture(scope="module")
def pg_cluster(credentials, request, tmp_path_factory):
    """`tests/test_ray_cluster.py`'s cluster (nodes, folder), started once PGPASSWORD is set and the `stuck-noisy`
    agent's plugin is on PYTHONPATH (so on every node's)."""
    site = write_plugin_dist(tmp_path_factory.mktemp("stuck"), "stuckagent", {"stuck": STUCK})
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), saved) if p)
    sys.path.insert(0, str(site))
    try:
        yield request.getfixturevalue("ray_cluster")
    finally:
        sys.path.remove(str(site))
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _config(out: Path, url: str, tasks: int = 8, agent: str = "noisy") -> RunConfig:
    return RunConfig(env="tiny", task_set="default", split="test",
                     tasks=[f"tiny-{n}" for n in range(20_000, 20_000 + tasks)], agent=agent, harnesses=["sentry"],
                     out=str(out), max_steps=15, agent_options=NOISE, playbook=url)


def test_workers_on_two_nodes_keep_sentrys_lessons_in_postgresql_and_open_nothing_under_out(pg_cluster,
                                                                                             postgres_server):
    _, folder = pg_cluster
    url, out = postgres_server.url("ray_learning"), folder / "runs" / "pg-learning"
    before = set(_audit(folder))
    summary = run(Host().load(), _config(out, url), executor="ray", workers=2)
    assert summary["unfinished"] == 0
    opened = set(_audit(folder)) - before
    assert not [line for line in opened if str(folder / "runs") in line], opened  # not one file under --out
    assert any("ray_cluster_agents" in line for line in opened), opened  # the hook ran in the new workers
    assert not (out / "playbooks").exists()  # the lessons went to the server, none to a file of the run
    count, found = problems(url, [out])
    assert count > 0 and found == []
    assert PASSWORD not in (out / "config.json").read_text() + (out / "lock.json").read_text()


def test_a_node_lost_mid_run_loses_no_lesson_and_duplicates_none(pg_cluster, postgres_server, monkeypatch):
    from playground.plugins.playbook.store import Playbook

    nodes, folder = pg_cluster
    url, out = postgres_server.url("ray_lost"), folder / "runs" / "pg-lost"
    marker = folder / "stuck-node"
    # The last task sticks at step 10: by then it has retrieved the earlier episodes' lessons and counted an outcome.
    stuck = {"FILE": str(marker), "TASK": "tiny-20005", "STEP": "10"}
    for name, value in stuck.items():
        monkeypatch.setenv(f"PLAYGROUND_TEST_STUCK_{name}", value)
    config = _config(out, url, tasks=6, agent="stuck-noisy")
    lost: list[bool] = []
    ended = threading.Event()

    def lose_its_node():  # once the episode is stuck: what it wrote so far, then its node killed
        while not marker.exists() and not ended.wait(0.05):
            pass
        if marker.exists():
            run_id = json.loads((out / "config.json").read_text())["run_id"]
            with Playbook(url, read_only=True) as book:
                lost.append(book.has_episode_writes(run_id, [episode_id(run_id, "sentry", "tiny-20005")]))
            node = next(node for node in nodes.worker_nodes if node.node_id == marker.read_text())
            nodes.remove_node(node, allow_graceful=False)

    killer = threading.Thread(target=lose_its_node, daemon=True)
    killer.start()
    try:
        summary = run(Host().load(), config, executor="ray", workers=2)
        ended.set()
        killer.join(30)
        assert lost == [True], "the stuck episode should have written to the playbook before its node was lost"
        assert summary["unfinished"] == 1, summary
        unfinished = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
        assert [u["key"] for u in unfinished] == ["sentry/tiny-20005"] and "Ray worker died" in unfinished[0]["error"]
        first = _records(out)
        assert len(first) == 5
        assert problems(url, [out])[1] == []  # what the lost episode wrote was taken back when it was left unfinished

        for name in stuck:
            monkeypatch.delenv(f"PLAYGROUND_TEST_STUCK_{name}")
        again = run(Host().load(), config, executor="ray", workers=2)  # on the node that is left
        assert again["unfinished"] == 0
        keys = [r["key"] for r in _records(out)]
        assert len(keys) == len(set(keys)) == 6 and keys[:5] == [r["key"] for r in first]
        count, found = problems(url, [out])
        assert count > 0 and found == []
    finally:
        ended.set()
        killer.join(30)
        while len(nodes.worker_nodes) < 2:
            nodes.add_node(**SMALL)  # the cluster as the module's other tests see it


def test_two_runs_with_workers_on_two_nodes_each_share_one_playbook_exactly_once(pg_cluster, postgres_server):
    nodes, folder = pg_cluster
    url = postgres_server.url("ray_shared")
    added = [nodes.add_node(**SMALL) for _ in range(2)]  # four one-CPU nodes: each run's two workers on two of them
    try:
        nodes.wait_for_nodes()
        args = ["run", "--env", "tiny", "--split", "test", "--episodes", "8", "--agent", "slow-noisy", "--harness",
                "sentry", "--max-steps", "15", "--playbook", url, "--executor", "ray", "--address", nodes.address,
                "--workers", "2", "--quiet"] + [f"--agent-option={key}={value}" for key, value in NOISE.items()]
        outs = [folder / "runs" / "pg-shared-a", folder / "runs" / "pg-shared-b"]
        other = subprocess.Popen([sys.executable, "-m", "playground.cli.main", *args, "--out", str(outs[1])],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        from playground.cli.main import main

        try:
            assert main([*args, "--out", str(outs[0])]) == 0  # this process's run, beside the other driver's
        finally:
            output, _ = other.communicate(timeout=300)
        assert other.returncode == 0, output[-3000:]
    finally:
        for node in added:
            nodes.remove_node(node)
    assert [len(_records(out)) for out in outs] == [8, 8]
    runs = {json.loads((out / "config.json").read_text())["run_id"] for out in outs}
    assert len(runs) == 2
    count, found = problems(url, outs)
    assert count > 0 and found == []
    from playground.plugins.playbook.store import Playbook

    with Playbook(url, read_only=True) as book:
        assert {lesson.provenance["run"] for lesson in book.all()} == runs  # both runs learned into it
