"""A run stopped by Ctrl-C, SIGTERM or SIGHUP leaves a readable run directory: summary.json over the episodes
recorded (`interrupted: true`), lock.json finished, the table printed; `report` and `view` say it was interrupted,
and the resumed run writes the normal summary (no `interrupted`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from playground.host.manager import get_host
from playground.run.config import RunConfig
from playground.run.executors.local import LocalExecutor
from playground.run.lock import playbook_hash
from playground.run.runner import run
from tests.conftest import cli, write_plugin_dist

PAUSING_AGENT = """
import os
import sys
import threading
import time

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl

STARTED = 0
LOCK = threading.Lock()


class Pausing(NoisyAgent):
    # The noisy agent; with PAUSE_AFTER=N, every episode after this process's N-th says PAUSED on stderr at its first
    # step and waits there, so a stop surely lands with N episodes recorded and another in flight.
    def reset(self, task_id, seed):
        global STARTED
        with LOCK:
            STARTED += 1
            self.number = STARTED
        return super().reset(task_id, seed)

    def propose(self, view):
        limit = os.environ.get("PAUSE_AFTER")
        if limit and self.number > int(limit):
            print("PAUSED", file=sys.stderr, flush=True)
            while True:
                time.sleep(0.05)
        return super().propose(view)


@hookimpl
def register_agents(register):
    register("pausing-noisy", Pausing, needs_expert=True)
"""

TASKS = ["tiny-20000", "tiny-20001", "tiny-20002"]


def _records(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _assert_readable_interrupted_run(out: Path, recorded: int, capsys) -> None:
    """summary.json covers the `recorded` episodes and says interrupted; lock.json has the playbook as it is now;
    `view` and `report` say the run was interrupted."""
    assert len(_records(out)) == recorded
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["harnesses"]["sentry"]["episodes"] == recorded
    lock = json.loads((out / "lock.json").read_text())
    book = out / "playbooks" / "sentry.sqlite"
    assert book.is_file() and lock["playbooks"]["sentry"]["after"] == playbook_hash(book, get_host()) is not None
    code, shown, _ = cli(capsys, "view", str(out), "--no-pager")
    shown = " ".join(shown.split())  # as one line, however the terminal's width wrapped it
    assert code == 0 and f"interrupted: this run was stopped before its end; summary.json covers the {recorded} " \
                         "episode(s) recorded" in shown
    code, _, _ = cli(capsys, "report", str(out), "--out", str(out.parent / "report.html"))
    assert code == 0 and "was interrupted" in (out.parent / "report.html").read_text()


class StopsAfterTwo(LocalExecutor):
    """The local executor, interrupted (as by Ctrl-C) once two episodes have come back."""

    def play(self, host, work, jobs, on_step=None):
        for number, record in enumerate(super().play(host, work, jobs, on_step), start=1):
            yield record
            if number == 2:
                raise KeyboardInterrupt


def test_an_interrupted_run_writes_its_summary_and_lock_and_the_resume_the_normal_summary(tmp_path, capsys):
    out = tmp_path / "run"
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="noisy",
                       harnesses=["sentry"], out=str(out))
    with pytest.raises(KeyboardInterrupt) as stopped:
        run(get_host(), config, executor=StopsAfterTwo())
    assert stopped.value.summary["interrupted"] is True  # the summary comes with the interrupt, for the table
    _assert_readable_interrupted_run(out, 2, capsys)

    summary = run(get_host(), config)
    assert "interrupted" not in summary and "interrupted" not in json.loads((out / "summary.json").read_text())
    assert summary["harnesses"]["sentry"]["episodes"] == 3
    code, shown, _ = cli(capsys, "view", str(out), "--no-pager")
    assert code == 0 and "interrupted" not in shown


@pytest.mark.slow
@pytest.mark.parametrize("stop, code, extra, pause_after", [
    (signal.SIGINT, 130, (), 2),
    (signal.SIGTERM, 143, ("--workers", "2"), 1),  # each worker plays one episode, then waits in its second
    (signal.SIGHUP, 129, ("--in-flight", "2"), 2),
])
def test_a_signal_mid_run_leaves_a_readable_run(tmp_path, capsys, stop, code, extra, pause_after):
    site = write_plugin_dist(tmp_path / "site", "pausing-agent", {"pausing": PAUSING_AGENT})
    out = tmp_path / "run"
    command = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "pausing-noisy",
               "--harness", "sentry", "--episodes", str(len(TASKS)), "--quiet", "--out", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err:  # SIGINT as at a terminal, even when the tests run with it ignored
        process = subprocess.Popen(command, env={**env, "PAUSE_AFTER": str(pause_after)}, stdout=subprocess.PIPE,
                                   stderr=err, text=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not (len(_records(out)) >= 2 and "PAUSED" in err_file.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, err_file.read_text()
            time.sleep(0.05)
        process.send_signal(stop)
        table, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = err_file.read_text()
    assert process.returncode == code and "rerun the same command to resume" in errors, errors
    assert "Traceback" not in errors
    assert "harness" in table and "episodes" in table and table.count("sentry") == 1, table  # what was played
    _assert_readable_interrupted_run(out, 2, capsys)
    if stop == signal.SIGINT:  # the resume plays the rest and writes the normal summary
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert "interrupted" not in summary and summary["harnesses"]["sentry"]["episodes"] == len(TASKS)
