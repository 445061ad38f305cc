"""Hosted endpoints at scale (issue 55, part 5): Retry-After per endpoint, the AIMD limit on requests in flight, and
a run that meets a saturated server finishing with no error record. Against a real HTTP server on 127.0.0.1 (the
scripted server with `AdmitsAtOnce`, which refuses requests beyond K at once). Times are only ever bounded below
(the gaps the server recorded are at least what it asked for), never above: a loaded machine only adds to them."""

from __future__ import annotations

import email.utils
import importlib.util
import json
import threading
import time
from pathlib import Path

from playground.agents.endpoint_limits import (
    BETA,
    DEFAULT_CEILING,
    MAX_CONNECTIONS_VARIABLE,
    PROBE_WINDOWS,
    EndpointLimiter,
    retry_after_seconds,
)
from playground.agents.http_model import HTTPChatModel
from playground.testing.openai_server import FirstActionModel, Reply, ScriptedChatServer
from playground.testing.rate_limit import AdmitsAtOnce
from tests.conftest import needs_extra, run_cli

MESSAGES = [{"role": "user", "content": "hi"}]


def _client(server: ScriptedChatServer, **options) -> HTTPChatModel:
    return HTTPChatModel(server.base_url, "m", cache_dir=None, **options)


def test_retry_after_in_seconds_on_429_spaces_the_retry_at_least_that_much():
    admits = AdmitsAtOnce(100, refuse_first=1, retry_after="1")
    with ScriptedChatServer(default=admits) as server:
        assert _client(server, retries=1, backoff=0.0).complete(MESSAGES).text == "Action: look"
    first, second = admits.arrivals
    assert not first.admitted and second.admitted
    assert second.at - first.at >= 1.0  # the server's recorded gap: at least what it asked for


def test_retry_after_as_an_http_date_on_503_is_read_against_the_clock():
    assert retry_after_seconds(email.utils.formatdate(1_000_005, usegmt=True), now=1_000_000) == 5.0
    assert retry_after_seconds(email.utils.formatdate(999_000, usegmt=True), now=1_000_000) == 0.0  # past: at once
    arrivals: list[float] = []
    when = email.utils.formatdate(time.time() + 3, usegmt=True)  # 2 to 3 s ahead: the date has whole seconds
    replies = iter([Reply(status=503, raw="{}", headers={"Retry-After": when}), Reply(content="Action: look")])

    def answer(body: dict) -> Reply:
        arrivals.append(time.monotonic())
        return next(replies)

    with ScriptedChatServer(default=answer) as server:
        assert _client(server, retries=1, backoff=0.0).complete(MESSAGES).text == "Action: look"
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 1.0


def test_a_retry_after_pauses_its_own_endpoint_only():
    """The pause is per endpoint: while one server's Retry-After holds its requests, another endpoint's go through."""
    paused_server = AdmitsAtOnce(100, refuse_first=1, retry_after="3")
    other_server = AdmitsAtOnce(100)
    with ScriptedChatServer(default=paused_server) as paused, ScriptedChatServer(default=other_server) as other:
        waiting = threading.Thread(target=_client(paused, retries=1, backoff=0.0).complete, args=(MESSAGES,))
        waiting.start()
        while not paused_server.arrivals:
            time.sleep(0.01)
        _client(other, retries=0).complete(MESSAGES)
        waiting.join(30)
    refused, retried = paused_server.arrivals
    assert retried.at - refused.at >= 3.0
    assert refused.at < other_server.arrivals[0].at < retried.at  # the other endpoint was not held


def test_without_retry_after_the_backoff_is_todays():
    """No header: the waits are backoff x 2^attempt (a fake sleep records them), a lone request spends its attempts."""
    admits = AdmitsAtOnce(0)  # refuses everything, with no Retry-After
    with ScriptedChatServer(default=admits) as server:
        client = _client(server, retries=3, backoff=0.25)
        slept: list[float] = []
        client.limiter.sleep = slept.append  # type: ignore[method-assign]
        try:
            client.complete(MESSAGES)
        except Exception as exc:  # noqa: BLE001 - the error is checked below
            error = str(exc)
    assert "gave up after 4 attempts" in error and "HTTP 429" in error
    assert slept == [0.25, 0.5, 1.0] and admits.refused == 4


def test_aimd_cuts_once_per_round_floors_at_one_and_grows_by_one_per_window():
    limiter = EndpointLimiter(8, capped=True)
    tickets = [limiter.acquire() for _ in range(8)]
    assert limiter.limit == 8 and limiter.in_flight == 8
    assert limiter.release(tickets[0], 429) is True  # others in flight: congestion
    assert limiter.limit == int(8 * BETA) == 5 and limiter.cuts == 1
    for ticket in tickets[1:4]:  # refusals of requests sent before the cut do not cut again
        limiter.release(ticket, 503)
    assert limiter.limit == 5 and limiter.cuts == 1
    for ticket in tickets[4:]:
        limiter.release(ticket, 200)
    assert limiter.limit == 5 and limiter.in_flight == 0  # 4 successes: not yet a window at 5
    limiter.release(limiter.acquire(), 200)
    assert limiter.limit == 6 and limiter.held == 5  # a whole window held at 5
    for _ in range(3):  # later rounds: each refusal cuts what is in flight, never below 1
        ticket = limiter.acquire()
        assert limiter.release(ticket, 429) is False  # alone in flight: not congestion, an attempt is spent
    assert limiter.limit == 1 and limiter.cuts == 4
    for expected in range(2, 12):  # refused last at 1 in flight: every step is one window
        for _ in range(limiter.limit):
            limiter.release(limiter.acquire(), 200)
        assert limiter.limit == min(expected, 8)  # never above the cap
    limiter.release(limiter.acquire(), 500)  # neither a success nor the server being full
    limiter.release(limiter.acquire(), None)
    assert limiter.limit == 8 and EndpointLimiter(1).limit == 1 and DEFAULT_CEILING >= 64


def test_near_the_level_refused_last_the_limit_plateaus():
    """A server that admits 16 refuses the 17th: the limit falls to 11 (BETA of 17) and climbs a window at a time to
    16; the step to 17 waits PROBE_WINDOWS windows at 16, and a refused probe steps back to 16 (the level that just
    held a whole window) instead of cutting, so the limit spends its time at what the server admits."""
    limiter = EndpointLimiter(64, capped=True)
    limiter.limit = 17
    tickets = [limiter.acquire() for _ in range(17)]
    limiter.release(tickets[0], 429)  # the 17th refused while 17 were in flight
    assert limiter.limit == 11 and limiter.refused_at == 17 and limiter.held is None
    for ticket in tickets[1:]:  # the 16 admitted end (the old round's successes count)
        limiter.release(ticket, 200)
    successes = 16
    while limiter.limit < 16:
        before = limiter.limit
        while limiter.limit == before:
            limiter.release(limiter.acquire(), 200)
            successes += 1
    assert successes <= sum(range(11, 16)) + 1
    for _ in range(16 * PROBE_WINDOWS - 1):
        limiter.release(limiter.acquire(), 200)
    assert limiter.limit == 16
    limiter.release(limiter.acquire(), 200)
    assert limiter.limit == 17 and limiter.held == 16  # the probe
    probe = [limiter.acquire() for _ in range(17)]
    limiter.release(probe[0], 429)  # the probe refused with 17 in flight: back to 16, no cut to 11
    assert limiter.limit == 16 and limiter.cuts == 2 and limiter.refused_at == 17
    for ticket in probe[1:]:
        limiter.release(ticket, 200)
    refused = [limiter.acquire() for _ in range(16)]
    limiter.release(refused[0], 429)  # refused at the level that held: the server shrank, a real cut
    assert limiter.limit == int(16 * BETA) == 11 and limiter.held is None
    for ticket in refused[1:]:
        limiter.release(ticket, 200)


def test_the_in_flight_limit_shrinks_on_a_saturated_server_and_regrows_when_it_frees(monkeypatch):
    monkeypatch.delenv(MAX_CONNECTIONS_VARIABLE, raising=False)  # an in-process CLI test may have set a cap
    admits = AdmitsAtOnce(4, delay=0.05)
    with ScriptedChatServer(default=admits) as server:
        client = _client(server, retries=0, backoff=0.01)  # congestion retries spend no attempt
        limiter = client.limiter
        assert limiter.limit == DEFAULT_CEILING  # no cap in this process: the default ceiling
        errors: list[str] = []

        def send(count: int) -> None:
            for _ in range(count):
                try:
                    client.complete(MESSAGES)
                except Exception as exc:  # noqa: BLE001 - collected and checked
                    errors.append(str(exc))

        threads = [threading.Thread(target=send, args=(6,)) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        shrunk, cuts, refused = limiter.limit, limiter.cuts, admits.refused
        assert errors == [] and admits.refused > 0 and cuts >= 1
        assert shrunk < 16  # cut below what was in flight
        admits.limit, admits.delay = 1000, 0.0  # the server frees up: windows of successes raise the limit again
        sent, bound = 0, (PROBE_WINDOWS + 2) * (shrunk + 2)  # at most one slow step (back to the level refused)
        while limiter.limit < shrunk + 2 and sent < bound:
            client.complete(MESSAGES)
            sent += 1
        assert limiter.limit >= shrunk + 2 and limiter.cuts == cuts and admits.refused == refused


def _records(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run(url: str, out: Path, *extra: str):
    return run_cli("run", "--env", "tiny", "--agent", "llm", "--llm-base-url", url, "--model", "m",
                   "--harness", "base", "--max-steps", "5", "--quiet", "--no-response-cache", "--out", str(out),
                   *extra)


def test_a_server_admitting_8_of_32_at_once_ends_with_no_error_record(tmp_path):
    """The issue's run: more requests in flight than the server admits. Before the AIMD limit each refused request
    spent its attempts alone and the breaker stopped the run (exit 3; here within 1.5 s, 7 episodes unfinished, with
    one retry per request; 16 of 64 with 1 s replies and the default 4 retries: after 8.4 s); now the limit comes down
    to what the server admits, a refusal while others are in flight spends no attempt, and every episode is recorded."""
    admits = AdmitsAtOnce(8, FirstActionModel(), delay=0.1)
    with ScriptedChatServer(default=admits) as server:
        result = _run(server.base_url, tmp_path / "run", "--episodes", "32", "--max-connections", "32",
                      "--agent-option", "retries=1")
    assert result.returncode == 0, result.stderr
    records = _records(tmp_path / "run")
    assert len(records) == 32 and [r for r in records if r["status"] == "error"] == []
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["unfinished"] == 0 and not summary["stopped_by_budget"]
    assert admits.refused > 0 and admits.peak <= 8  # the server did refuse, and the run still finished


def _outcomes(out: Path) -> dict[str, tuple]:
    return {r["key"]: (r["status"], r["won"], r["steps"], r["prompt_tokens"]) for r in _records(out)}


def test_the_token_budget_stops_handing_out_episodes_and_a_rerun_resumes(tmp_path):
    with ScriptedChatServer(default=FirstActionModel()) as server:
        clean = _run(server.base_url, tmp_path / "clean", "--episodes", "6")
        assert clean.returncode == 0, clean.stderr

        out = tmp_path / "run"
        first = _run(server.base_url, out, "--episodes", "6", "--max-tokens-total", "1")
        assert first.returncode == 3 and "token budget reached" in first.stderr, first.stderr
        assert "5 episode(s) not played" in first.stderr and "larger --max-tokens-total" in first.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["stopped_by_budget"] and summary["not_played"] == 5 and summary["max_tokens_total"] == 1
        assert summary["tokens_spent"] > 0 and summary["unfinished"] == 0
        assert len(_records(out)) == 1
        assert json.loads((out / "config.json").read_text())["max_tokens_total"] == 1
        assert json.loads((out / "lock.json").read_text())["run"]["max_tokens_total"] == 1

        again = _run(server.base_url, out, "--episodes", "6", "--max-tokens-total", "1")  # spent: nothing is played
        assert again.returncode == 3 and "token budget reached" in again.stderr and len(_records(out)) == 1

        larger = _run(server.base_url, out, "--episodes", "6", "--max-tokens-total", str(summary["tokens_spent"] * 3))
        assert larger.returncode == 3 and 1 < len(_records(out)) < 6, larger.stderr

        rest = _run(server.base_url, out, "--episodes", "6")  # no budget: the run finishes
        assert rest.returncode == 0, rest.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["stopped_by_budget"] and "not_played" not in summary
    assert _outcomes(out) == _outcomes(tmp_path / "clean")  # every episode once, as an uninterrupted run plays it
    assert json.loads((out / "config.json").read_text())["max_tokens_total"] is None


def test_the_token_budget_with_episodes_in_flight_lets_those_playing_finish(tmp_path):
    with ScriptedChatServer(default=FirstActionModel(delay=0.01)) as server:
        out = tmp_path / "run"
        result = _run(server.base_url, out, "--episodes", "12", "--in-flight", "3", "--max-tokens-total", "1")
        assert result.returncode == 3 and "token budget reached" in result.stderr, result.stderr
        recorded = _records(out)
        summary = json.loads((out / "summary.json").read_text())
        assert 1 <= len(recorded) < 12 and summary["not_played"] == 12 - len(recorded)
        assert all(r["status"] != "error" for r in recorded) and summary["unfinished"] == 0
        rest = _run(server.base_url, out, "--episodes", "12", "--in-flight", "3")
        assert rest.returncode == 0, rest.stderr
    assert len(_records(out)) == 12 == len({r["key"] for r in _records(out)})


@needs_extra("ray", importlib.util.find_spec("ray") is not None, "`ray` is not installed")
def test_the_token_budget_on_ray_leaves_the_episodes_waiting_on_a_worker_unplayed(tmp_path):
    # A Ray worker holds the episode it plays and the next (ray_tasks.PREFETCH): when the first record spends the
    # budget, the second is already playing (it started as the first ended) and finishes; the third, given to the
    # worker meanwhile, is cancelled before it starts (without that, three records), and the rerun plays the rest.
    with ScriptedChatServer(default=FirstActionModel(delay=0.05)) as server:
        out = tmp_path / "run"
        first = _run(server.base_url, out, "--episodes", "4", "--executor", "ray", "--workers", "1",
                     "--max-tokens-total", "1")
        assert first.returncode == 3 and "token budget reached" in first.stderr, first.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert len(_records(out)) == 2 and summary["not_played"] == 2 and summary["unfinished"] == 0
        rest = _run(server.base_url, out, "--episodes", "4", "--executor", "ray", "--workers", "1")
        assert rest.returncode == 0, rest.stderr
    assert len(_records(out)) == 4 == len({r["key"] for r in _records(out)})
