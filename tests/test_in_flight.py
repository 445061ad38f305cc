"""Many episodes in flight in one process (`--in-flight`), a per-endpoint cap on requests (`--max-connections`),
and a Retry-After that pauses the whole endpoint: against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from playground.agents.http_model import HTTPChatModel
from playground.testing.openai_server import FirstActionModel, HeldReplies, Reply, ScriptedChatServer
from tests.conftest import run_cli

TASKS = 16  # x 2 harnesses = 32 episodes


def _run(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("run", "--env", "tiny", "--agent", "llm", "--llm-base-url", url, "--model", "m",
                   "--agent-option", "retries=0", "--harness", "base", "--harness", "sentry",
                   "--episodes", str(TASKS), "--max-steps", "5", "--quiet", "--no-response-cache", "--out", str(out),
                   *extra)


def _played(run_dir: Path) -> dict[str, tuple]:
    """Per episode key: outcome and the actions its trace played (what must not depend on scheduling)."""
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)), "an episode recorded twice"
    played = {}
    for r in records:
        events = [json.loads(line) for line in (run_dir / r["trace"]).read_text().splitlines()]
        played[r["key"]] = (r["status"], r["won"], r["steps"], r["detected_failures"],
                            tuple(e["action"] for e in events if e["type"] == "step"))
    return played


def test_32_episodes_in_flight_equal_a_serial_run_each_recorded_once(tmp_path):
    serial_server, flight_server = FirstActionModel(delay=0.02), FirstActionModel(delay=0.02)
    with ScriptedChatServer(default=serial_server) as server:
        serial = _run(server.base_url, tmp_path / "serial")
    with ScriptedChatServer(default=flight_server) as server:
        in_flight = _run(server.base_url, tmp_path / "flight", "--in-flight", "32")
    assert serial.returncode == 0 and in_flight.returncode == 0, in_flight.stderr
    assert serial_server.peak == 1 and flight_server.peak > 8  # requests really were in flight together
    serial_played, flight_played = _played(tmp_path / "serial"), _played(tmp_path / "flight")
    assert len(flight_played) == 2 * TASKS and flight_played == serial_played


def test_max_connections_caps_requests_at_once_across_episodes(tmp_path):
    walker = FirstActionModel(delay=0.05)
    with ScriptedChatServer(default=walker) as server:
        result = _run(server.base_url, tmp_path / "capped", "--in-flight", "16", "--max-connections", "3")
    assert result.returncode == 0, result.stderr
    assert walker.peak == 3


def test_kill_9_with_episodes_in_flight_resumes_exactly(tmp_path):
    records = tmp_path / "run" / "episodes.jsonl"
    # once 3 episodes are recorded the server holds every request, so the kill surely lands with episodes in flight
    held = HeldReplies(FirstActionModel(delay=0.1),
                       hold_when=lambda: records.exists() and len(records.read_text().splitlines()) >= 3)
    with ScriptedChatServer(default=held) as server:
        command = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "llm",
                   "--llm-base-url", server.base_url, "--model", "m", "--harness", "base", "--harness", "sentry",
                   "--episodes", str(TASKS), "--max-steps", "5", "--quiet", "--no-response-cache",
                   "--in-flight", "8", "--out", str(tmp_path / "run")]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=os.environ.copy())
        try:
            held.wait_holding(gave_up=lambda: process.poll() is not None)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            held.release()
        before = len(records.read_text().splitlines())
        assert 3 <= before < 2 * TASKS
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        with ScriptedChatServer(default=FirstActionModel(delay=0.02)) as serial_server:
            serial = _run(serial_server.base_url, tmp_path / "serial")
    assert serial.returncode == 0
    assert _played(tmp_path / "run") == _played(tmp_path / "serial")


def test_retry_after_pauses_every_request_to_the_endpoint():
    arrivals: list[float] = []
    answers = iter([Reply(status=429, raw="slow down", headers={"Retry-After": "1"})])

    def answer(body: dict) -> Reply:
        arrivals.append(time.monotonic())
        return next(answers, Reply(content="ok"))

    with ScriptedChatServer(default=answer) as server:
        first = HTTPChatModel(server.base_url, "m", retries=2, backoff=0.01, cache_dir=None)
        second = HTTPChatModel(server.base_url, "m", retries=2, backoff=0.01, cache_dir=None)
        thread = threading.Thread(target=first.complete, args=([{"role": "user", "content": "a"}],))
        thread.start()
        while not arrivals:
            time.sleep(0.01)
        time.sleep(0.2)  # the 429 has arrived: the endpoint is paused
        second.complete([{"role": "user", "content": "b"}])
        thread.join(10)
    assert len(arrivals) == 3
    assert min(arrivals[1:]) - arrivals[0] >= 0.95  # neither client asked again before the server said


def test_an_env_that_is_not_thread_safe_takes_turns_in_its_engine(tmp_path):
    """TextWorld's engine shares a parser between its envs: resets in several threads at once broke it (IndexError in
    tatsu). Declared not thread-safe, its envs are called under one lock, and episodes in flight equal serial ones."""
    with ScriptedChatServer(default=FirstActionModel(delay=0.05)) as server:
        results = [run_cli("run", "--env", "textworld:easy", "--agent", "llm", "--llm-base-url", server.base_url,
                           "--model", "m", "--harness", "base", "--episodes", "6", "--max-steps", "3", "--quiet",
                           "--no-response-cache", "--out", str(tmp_path / name), *extra, timeout=600)
                   for name, extra in (("serial", ()), ("flight", ("--in-flight", "6")))]
    assert all(r.returncode == 0 for r in results), results[1].stderr
    flight = _played(tmp_path / "flight")
    assert all(status != "error" for status, *_ in flight.values()) and flight == _played(tmp_path / "serial")


def test_a_playbook_whose_creation_was_cut_off_does_not_block_the_resume(tmp_path):
    """A kill -9 (or a full disk) between creating a playbook file and writing its schema left an SQLite file with
    no tables; the resume's cleanup called it "not a playbook" and refused the run for good."""
    import sqlite3

    from playground.plugins.playbook.store import Playbook, discard_episodes

    path = tmp_path / "sentry.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    assert path.stat().st_size > 0
    assert discard_episodes(path, "run", ["run:sentry:tiny-20000"]) == (0, 0)
    with Playbook(path) as playbook:  # opened for writing, it gets its schema
        assert len(playbook) == 0


@pytest.mark.parametrize("stop, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_a_run_like_ctrl_c_and_it_resumes(tmp_path, stop, code):
    records = tmp_path / "run" / "episodes.jsonl"
    held = HeldReplies(FirstActionModel(), hold_when=lambda: records.exists() and bool(records.read_text().strip()))
    with ScriptedChatServer(default=held) as server:
        command = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "llm",
                   "--llm-base-url", server.base_url, "--model", "m", "--harness", "base", "--episodes", "8",
                   "--max-steps", "5", "--quiet", "--no-response-cache", "--out", str(tmp_path / "run")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=os.environ.copy())
        try:
            held.wait_holding(gave_up=lambda: process.poll() is not None)  # the stop surely lands mid-run
            process.send_signal(stop)
            _, err = process.communicate(timeout=60)
        finally:
            held.release()
        assert process.returncode == code and "rerun the same command to resume" in err, err
        assert "Traceback" not in err
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    keys = [json.loads(line)["key"] for line in records.read_text().splitlines()]
    assert len(keys) == 8 == len(set(keys))
