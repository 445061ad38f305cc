"""Issue 38: an episode that fails for a reason outside the agent is left unfinished, not recorded as its failure.

Against a scripted OpenAI-compatible server on 127.0.0.1: an endpoint that fails for the first requests of a run
and then answers leaves those episodes unfinished (exit 3, unfinished.jsonl); the same command run again plays
them, and the records equal those of an undisturbed run. A circuit breaker stops a run whose endpoint keeps failing.
"""

from __future__ import annotations

import json
import socket
import threading

from playground.testing.openai_server import FirstActionModel, Reply, ScriptedChatServer
from tests.conftest import cli

TASKS = "6"


class DownThenUp:
    """Answers HTTP 503 to the first `down` requests, then as `FirstActionModel` does."""

    def __init__(self, down: int) -> None:
        self.down, self.model, self.lock = down, FirstActionModel(), threading.Lock()

    def __call__(self, body: dict):
        with self.lock:
            self.down -= 1
            failing = self.down >= 0
        return Reply(status=503, raw='{"error": "overloaded"}') if failing else self.model(body)


def command(url: str, out, *extra: str) -> list[str]:
    return ["run", "--env", "tiny", "--agent", "llm", "--agent-option", f"base_url={url}", "--agent-option", "model=m",
            "--agent-option", "retries=0", "--no-response-cache", "--episodes", TASKS, "--max-steps", "6",
            "--harness", "base", "--quiet", "--out", str(out), *extra]


def records(out) -> dict[str, dict]:
    path = out / "episodes.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {r["key"]: r for r in map(json.loads, lines)}


def outcome(record: dict) -> tuple:
    return record["status"], record["won"], record["steps"], record["invalid_actions"]


def test_an_endpoint_down_then_up_finishes_every_episode_in_two_runs_of_one_command(capsys, tmp_path):
    with ScriptedChatServer(default=DownThenUp(0)) as server:
        code, _, err = cli(capsys, *command(server.base_url, tmp_path / "clean"))
        assert code == 0, err
    clean = records(tmp_path / "clean")

    out = tmp_path / "run"
    with ScriptedChatServer(default=DownThenUp(3)) as server:
        code, _, err = cli(capsys, *command(server.base_url, out))
        assert code == 3 and "unfinished: 3 episode(s)" in err and "rerun the same command" in err
        first = records(out)
        assert len(first) == int(TASKS) - 3 and all(r["status"] != "error" for r in first.values())
        logged = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
        assert len(logged) == 3 and all("503" in entry["error"] for entry in logged)
        assert json.loads((out / "summary.json").read_text())["unfinished"] == 3

        code, _, err = cli(capsys, *command(server.base_url, out))
        assert code == 0, err
    second = records(out)
    assert sorted(second) == sorted(clean)  # every episode once, none an error
    assert {k: outcome(r) for k, r in second.items()} == {k: outcome(r) for k, r in clean.items()}
    assert len((out / "episodes.jsonl").read_text().splitlines()) == int(TASKS)


def test_the_circuit_breaker_stops_handing_out_work(capsys, tmp_path):
    with ScriptedChatServer() as server:
        url = server.base_url  # closed on leaving: every request is refused
    out = tmp_path / "run"
    code, _, err = cli(capsys, *command(url, out, "--max-consecutive-errors", "2"))
    assert code == 3 and "2 episodes in a row ended in an error" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unfinished"] == 2 and summary["stopped_by_breaker"] and records(out) == {}


def test_record_errors_keeps_them_as_they_ended(capsys, tmp_path):
    with ScriptedChatServer() as server:
        url = server.base_url
    out = tmp_path / "run"
    code, _, err = cli(capsys, *command(url, out, "--record-errors", "--max-consecutive-errors", "0"))
    assert code == 0, err
    assert [r["status"] for r in records(out).values()] == ["error"] * int(TASKS)


def test_a_dead_endpoint_costs_the_first_episodes_retries_then_the_breaker_stops_the_run(capsys, tmp_path,
                                                                                          monkeypatch):
    """A closed port: the first episode spends its retries, every later one gives up after one try (the endpoint is
    marked unreachable), so the breaker stops the run after the first episode's retries, not five episodes' worth."""
    from playground.agents.endpoint_limits import MAX_CONNECTIONS_VARIABLE, endpoint_limiter
    from playground.agents.http_model import HTTPChatModel

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"  # closed on leaving: every connection is refused
    monkeypatch.delenv(MAX_CONNECTIONS_VARIABLE, raising=False)
    limiter = endpoint_limiter(url)
    monkeypatch.setattr(limiter, "sleep", lambda seconds: None)  # the backoff's waits: attempts are counted, not timed
    monkeypatch.setattr(limiter, "unreachable", None)
    tries, real = [], HTTPChatModel._post_once

    def counted(self, *args):
        tries.append(1)
        return real(self, *args)

    monkeypatch.setattr(HTTPChatModel, "_post_once", counted)
    retries, breaker = 3, 5
    out = tmp_path / "run"
    command = ["run", "--env", "tiny", "--agent", "llm", "--agent-option", f"base_url={url}", "--agent-option",
               "model=m", "--agent-option", f"retries={retries}", "--no-response-cache", "--episodes", "8",
               "--max-steps", "6", "--harness", "base", "--quiet", "--out", str(out),
               "--max-consecutive-errors", str(breaker)]
    code, _, err = cli(capsys, *command)
    assert code == 3 and f"{breaker} episodes in a row ended in an error" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by_breaker"] and summary["unfinished"] == breaker and records(out) == {}
    # the first episode's whole schedule, then one try for each later episode (before: retries + 1 each)
    assert len(tries) == (retries + 1) + (breaker - 1)
    logged = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    assert f"gave up after {retries + 1} attempts" in logged[0]["error"]
    assert all("unreachable" in entry["error"] for entry in logged[1:])
