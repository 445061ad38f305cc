"""One flag for endpoint concurrency: with an endpoint agent, `--max-connections N` alone keeps N episodes in flight
(so N requests at once); `--in-flight` stays for explicit control, and the embedded model, `--workers` and Ray keep
their own rules."""

from __future__ import annotations

from playground.agents.http_model import MAX_CONNECTIONS_VARIABLE, HTTPChatModel
from playground.agents.llm import LLMAgent
from playground.testing.openai_server import FirstActionModel, ScriptedChatServer
from tests.conftest import run_cli


def test_max_connections_alone_puts_that_many_requests_in_flight(tmp_path):
    walker = FirstActionModel(delay=0.1)
    with ScriptedChatServer(default=walker) as server:
        result = run_cli("run", "--env", "tiny", "--agent", "llm", "--llm-base-url", server.base_url, "--model", "m",
                         "--agent-option", "retries=0", "--harness", "base", "--episodes", "8", "--max-steps", "4",
                         "--quiet", "--no-response-cache", "--max-connections", "4", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert walker.peak == 4  # four episodes in flight, their requests at the server together, never more
    assert len((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()) == 8


def test_episodes_in_flight_follow_the_cap_only_for_an_endpoint_agent_played_here(monkeypatch):
    from playground.cli.options import episodes_in_flight

    monkeypatch.delenv(MAX_CONNECTIONS_VARIABLE, raising=False)
    endpoint = LLMAgent(HTTPChatModel("http://127.0.0.1:9/v1", "m", cache_dir=None))
    assert episodes_in_flight(endpoint, None, 16) == 16  # the cap alone
    assert episodes_in_flight(endpoint, 2, 16) == 2  # --in-flight wins
    assert episodes_in_flight(endpoint, None, None) == 1  # no cap (the default): one at a time, as before
    assert episodes_in_flight(endpoint, None, 16, workers=2) == 1  # worker processes keep their rule
    assert episodes_in_flight(endpoint, None, 16, workers=1) == 16
    assert episodes_in_flight(endpoint, None, 16, executor="ray") == 1
    assert episodes_in_flight(object(), None, 16) == 1  # not an endpoint agent (the embedded model, noisy)
    monkeypatch.setenv(MAX_CONNECTIONS_VARIABLE, "6")  # the variable does what the flag does
    assert episodes_in_flight(endpoint, None, None) == 6
