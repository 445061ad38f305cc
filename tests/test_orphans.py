"""No orphans: what a run starts dies with it, even after `kill -9`; a stale AppWorld server is stopped.

How the kill tests check: the run is started in its own session with a unique marker
variable in its environment, which every process it starts inherits (workers, the pool's
resource tracker, AppWorld servers). Once the run is under way (an event: the agent's or
the server's line on stderr, then the first record in episodes.jsonl) the test notes the
run's descendants from /proc (pid and start time), kills the run with SIGKILL, and then
requires that within a few seconds no process is left that is one of those descendants,
in the run's process group, or carries the marker. The same command then resumes the run
to the end.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from playground.processes import is_running, process_start_time, stop_process_group
from tests.conftest import write_plugin_dist

LINUX = sys.platform.startswith("linux")
needs_linux = pytest.mark.skipif(not LINUX, reason="parent-death signal and /proc are Linux only")
MARKER = "PLAYGROUND_ORPHAN_TEST"

SLOW_AGENT = """
import os
import sys
import time
from playground.core.hookspecs import hookimpl
from playground.agents.base import ExpertAgent

class SlowExpert(ExpertAgent):
    def reset(self, task_id, seed):
        sys.stderr.write(f"agent-reset pid={os.getpid()}\\n")  # one write: two workers' lines never interleave
        sys.stderr.flush()
        return super().reset(task_id, seed)

    def propose(self, view):
        time.sleep(0.03)
        return super().propose(view)

@hookimpl
def register_agents(register):
    register("slow-expert", SlowExpert, needs_expert=True)
"""


# -- /proc helpers ----------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # [state, ppid, pgrp, ...]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> dict[int, str | None]:
    """Every live descendant of `root`: {pid: start time}."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields:
            children.setdefault(int(fields[1]), []).append(pid)
    found: dict[int, str | None] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = process_start_time(child)
            todo.append(child)
    return found


def marked(marker: str) -> list[int]:
    """Live processes whose environment carries `MARKER=marker`."""
    needle = f"{MARKER}={marker}".encode()
    hits = []
    for pid in _pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and is_running(pid):
            hits.append(pid)
    return hits


def in_group(pgid: int) -> list[int]:
    return [pid for pid in _pids() if (fields := _stat(pid)) and int(fields[2]) == pgid and fields[0] != "Z"]


def left_over(tracked: dict[int, str | None], pgid: int, marker: str) -> list[str]:
    alive = [f"descendant {pid}" for pid, start in tracked.items() if is_running(pid, start)]
    alive += [f"group member {pid}" for pid in in_group(pgid)]
    alive += [f"marked {pid}" for pid in marked(marker)]
    return sorted(set(alive))


def wait_until_gone(tracked: dict[int, str | None], pgid: int, marker: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (alive := left_over(tracked, pgid, marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


class Lines:
    """A pipe read line by line in a thread, so a test can wait for a line with a deadline."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.lines.put(raw.decode(errors="replace"))

    def wait_for(self, predicate, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout} s; saw: {self.seen[-10:]}") from None
            self.seen.append(line)
            if predicate(line):
                return line


def records(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def wait_for_record(out: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not records(out):
        assert time.monotonic() < deadline, "no episode finished in time"
        time.sleep(0.01)


def start_run(args: list[str], env: dict, marker: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "playground.cli.main", "run", *args, "--quiet"]
    return subprocess.Popen(command, env={**env, MARKER: marker}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def kill_and_check(proc: subprocess.Popen, marker: str, timeout: float = 10.0) -> dict[int, str | None]:
    """SIGKILL the run alone (not its group) and require that nothing it started survives it by `timeout` s."""
    tracked = descendants(proc.pid)
    assert tracked, "the run should have started processes"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    alive = wait_until_gone(tracked, proc.pid, marker, timeout)
    assert not alive, f"left running after kill -9 of the run: {alive}"
    return tracked


# -- the building blocks (fast) ---------------------------------------------------------------


@needs_linux
def test_a_child_that_dies_with_its_parent_goes_when_the_parent_is_killed():
    child = ("import os, sys, time\nfrom playground.processes import die_with_parent\n"
             "die_with_parent(int(sys.argv[1]))\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n")
    parent = ("import subprocess, sys, os, time\n"
              f"subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())])\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE)
    grandchild = int(proc.stdout.readline())
    start = process_start_time(grandchild)
    assert is_running(grandchild, start)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while is_running(grandchild, start) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not is_running(grandchild, start)
    proc.stdout.close()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace():
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline().strip() == b"ready"
    started = time.monotonic()
    assert stop_process_group(proc.pid, grace=0.3)
    assert time.monotonic() - started < 3
    assert proc.wait(timeout=5) == -signal.SIGKILL
    proc.stdout.close()


@needs_linux
def test_stale_server_records_are_stopped_and_live_runs_servers_left_alone(tmp_path):
    from playground.envs.appworld.server import stop_stale_servers, write_pid_file

    def sleeper() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(60)"],
                                stdout=subprocess.PIPE, start_new_session=True)
        assert proc.stdout.readline().strip() == b"ready"
        return proc

    gone_parent = subprocess.Popen([sys.executable, "-c", "pass"])
    gone_parent.wait()
    stale, live = sleeper(), sleeper()
    stale_file = write_pid_file(tmp_path, stale.pid, 1, "t1", tmp_path)
    record = json.loads(stale_file.read_text())
    stale_file.write_text(json.dumps({**record, "parent_pid": gone_parent.pid, "parent_start_time": "1"}))
    live_file = write_pid_file(tmp_path, live.pid, 2, "t2", tmp_path)  # its parent (this process) is alive
    reused = write_pid_file(tmp_path, live.pid + 10**7, 3, "t3", tmp_path)  # a pid whose process is gone
    reused.write_text(json.dumps({**json.loads(reused.read_text()), "parent_pid": gone_parent.pid}))
    assert oct(live_file.stat().st_mode & 0o777) == "0o600"  # it holds the token

    stopped = stop_stale_servers(tmp_path)
    assert [r["pid"] for r in stopped] == [stale.pid]
    assert stale.wait(timeout=5) is not None and live.poll() is None
    assert not stale_file.exists() and not reused.exists() and live_file.exists()
    live.kill()
    live.wait()
    for proc in (stale, live):
        proc.stdout.close()


# -- kill -9 of real runs (slow) --------------------------------------------------------------


@pytest.mark.slow
@needs_linux
def test_kill_9_of_a_run_with_workers_leaves_no_process_and_the_run_resumes(tmp_path):
    site = write_plugin_dist(tmp_path / "site", "slow-agent", {"slow": SLOW_AGENT})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    args = ["--env", "tiny", "--agent", "slow-expert", "--harness", "base", "--episodes", "30", "--workers", "2",
            "--out", str(out)]
    marker = uuid.uuid4().hex
    proc = start_run(args, env, marker)
    stderr = Lines(proc.stderr)
    workers: set[str] = set()
    while len(workers) < 2:  # both workers are playing
        workers.add(stderr.wait_for(lambda line: line.startswith("agent-reset"), 60).split("pid=")[1].strip())
    wait_for_record(out, 60)
    tracked = kill_and_check(proc, marker)
    assert {int(pid) for pid in workers} <= set(tracked)
    killed_at = len(records(out))
    assert 1 <= killed_at < 30 and not (out / "summary.json").exists()

    done = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *args, "--quiet"], env=env, check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    keys = [r["key"] for r in records(out)]
    assert len(keys) == 30 and len(set(keys)) == 30
    assert json.loads((out / "summary.json").read_text())["harnesses"]["base"]["success_rate"] == 1.0
