"""Issue 57: hostile servers, plugins and names change nothing they should not (terminal escapes, a run's own files,
long names, undecodable text, foreign cache folders, a lost run id, FIFOs, unchecked detections, a mistaken run
directory, a full stdout, non-finite deadlines, a cache entry of the wrong shape)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from playground.testing.openai_server import Reply, ScriptedChatServer
from tests.conftest import cli, write_plugin_dist

TINY = ["--env", "tiny", "--agent", "noisy", "--harness", "base", "--quiet"]
HOSTILE_BODY = '{"error": "\x1b]0;pwned\x07\x1b]8;;http://evil.example\x07click\x1b]8;;\x07"}'
ESCAPED_ID = "\x1b]0;owned\x07\x1b[2J-20002"
LONG_ID = "long-" + "x" * 300 + "-20001"

PLUGIN = f"""
import math
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Detection
from playground.core.task_sets import TaskSet
from playground.testing.tiny import TinyProvider

IDS = tuple({json.dumps([ESCAPED_ID, "plain-20003", LONG_ID])})


class HostileTiny(TinyProvider):
    # the tiny worlds under odd task ids: one of 300 characters, one holding terminal escapes
    name = "hostile-tiny"

    def task_sets(self):
        return {{"default": TaskSet("default", "tiny worlds, odd ids", {{"test": IDS}})}}


class BadDetector:
    def __init__(self, params=None, services=None):
        pass

    @hookimpl
    def detect_failures(self, context, proposal):
        return Detection("bad-detector", "no_such_type", ("no_such_label",), 7.5)


class Hang:
    # blocks inside one C call, once: the first call that finds the file $HANG_FILE removes it and sleeps
    def __init__(self, params=None, services=None):
        pass

    @hookimpl
    def detect_failures(self, context, proposal):
        import os, time
        try:
            os.unlink(os.environ["HANG_FILE"])
        except (KeyError, OSError):
            return None
        time.sleep(10 ** 6)


@hookimpl
def register_envs(register):
    register(HostileTiny())


@hookimpl
def register_interventions(register):
    register("bad-detector", BadDetector, description="returns a detection the registry does not know")
    register("hang", Hang, description="sleeps in one C call, once")


@hookimpl
def register_harnesses(register):
    register("bad-detector", interventions=["bad-detector"], description="the unchecked detection")
    register("hang", interventions=["hang"], description="a hook blocked in a C call")
"""


@pytest.fixture
def hostile_site(tmp_path, monkeypatch):
    """A plugin distribution with the `hostile-tiny` env and the `bad-detector` harness, on sys.path and PYTHONPATH."""
    site = write_plugin_dist(tmp_path / "site", "hostile", {"hostile": PLUGIN})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    return site


# -- 1: nothing a run prints carries a raw escape -------------------------------------------------------------------

def _run_args(server: ScriptedChatServer, out: Path) -> list[str]:
    return [sys.executable, "-m", "playground.cli.main", "run", "--env", "hostile-tiny", "--agent", "llm",
            "--llm-base-url", server.base_url, "--model", "m", "--agent-option", "retries=0", "--harness", "base",
            "--episodes", "2", "--max-consecutive-errors", "0", "--out", str(out)]


def _on_a_pty(args: list[str], timeout: float = 120) -> tuple[int, bytes]:
    """Run `args` with stdout and stderr on a pseudo-terminal; return its exit code and all it wrote."""
    master, slave = pty.openpty()
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(master)
    return process.wait(timeout=10), b"".join(chunks)


def _raw_escapes(text: str) -> list[str]:
    """The hostile sequences (OSC, BEL, a clear screen) in `text`; the progress bar's own cursor codes are fine."""
    return [seq for seq in ("\x1b]", "\x07", "\x1b[2J") if seq in text]


def test_a_servers_error_body_and_a_task_id_reach_no_terminal_raw(hostile_site, tmp_path):
    with ScriptedChatServer(default=Reply(status=500, raw=HOSTILE_BODY)) as server:
        piped = subprocess.run(_run_args(server, tmp_path / "piped"), capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
        code, shown = _on_a_pty(_run_args(server, tmp_path / "tty"))
    assert piped.returncode == 3, piped.stderr
    printed = piped.stdout + piped.stderr
    assert "unfinished" in printed and "\\x1b]0;pwned" in printed and "\\x1b[2J-20002" in printed, printed
    assert not _raw_escapes(printed), printed
    text = shown.decode("utf-8", "replace")
    assert code == 3 and "\\x1b]0;pwned" in text, text
    assert not _raw_escapes(text), text


# -- 2: no command writes over a run's own files --------------------------------------------------------------------

def _contents(run: Path) -> dict[Path, bytes]:
    """Every file of `run` and its bytes (less the lock and SQLite's side files, which opening a playbook makes)."""
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.name.endswith((".lock", "-shm", "-wal"))}


def test_no_command_writes_over_a_runs_own_files_with_force_either(capsys, tmp_path):
    run = tmp_path / "run"
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "sentry", "--episodes", "1",
                       "--quiet", "--out", str(run))
    assert code == 0, err
    (run / "unfinished.jsonl").write_text("{}\n")
    before = _contents(run)
    book = next((run / "playbooks").glob("*.sqlite"))
    attempts = [("playbook", "export", str(book), str(run / "episodes.jsonl"), "--force"),
                ("aed", "export", str(run), "--view", "diagnosis", "--out", str(run / "config.json"), "--force"),
                ("report", str(run), "--out", str(run / "unfinished.jsonl"), "--force")]
    for attempt in attempts:
        code, _, err = cli(capsys, *attempt)
        assert code == 2 and "own files" in err, (attempt, err)
    assert _contents(run) == before


# -- 3: a hook blocked in one C call, with --workers ----------------------------------------------------------------

@pytest.mark.slow  # spawns worker processes, and waits out a deadline and its grace
def test_a_worker_blocked_in_a_c_call_past_the_hook_deadline_is_replaced(hostile_site, tmp_path):
    from tests.conftest import run_cli

    hang = tmp_path / "hang"
    hang.write_text("once")
    args = ["run", *TINY[:4], "--harness", "hang", "--quiet", "--episodes", "3", "--workers", "2", "--hook-deadline",
            "1", "--out", str(tmp_path / "run")]
    started = time.monotonic()
    first = run_cli(*args, env={"HANG_FILE": str(hang)}, timeout=240)
    assert first.returncode == 3 and time.monotonic() - started < 120, first.stderr
    assert not hang.exists()  # the hook did block
    [entry] = [json.loads(line) for line in (tmp_path / "run" / "unfinished.jsonl").read_text().splitlines()]
    assert "past its deadline" in entry["error"] and "replaced" in entry["error"], entry
    assert (tmp_path / "run" / "episodes.jsonl").read_text().count("\n") == 2  # the others were played
    again = run_cli(*args, env={"HANG_FILE": str(hang)}, timeout=240)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "run" / "episodes.jsonl").read_text().count("\n") == 3


# -- 4: ids too long for a file name --------------------------------------------------------------------------------

def test_a_300_character_task_id_gets_a_bounded_trace_name(capsys, hostile_site, tmp_path):
    from playground.run.files import safe_file_name

    out = tmp_path / "run"
    args = ["run", "--env", "hostile-tiny", "--agent", "noisy", "--harness", "base", "--episodes", "3", "--quiet",
            "--out", str(out)]
    code, _, err = cli(capsys, *args)
    assert code == 0 and "Traceback" not in err, err
    [trace] = [p for p in (out / "traces" / "base").iterdir() if p.name.startswith("long-")]
    assert trace.name.startswith("long-xxx") and len(trace.name) < 120
    assert cli(capsys, *args)[0] == 0  # the rerun finds it finished
    names = {safe_file_name("a" * 300), safe_file_name("a" * 299 + "b")}
    assert len(names) == 2 and all(len(name) < 100 for name in names)
    assert safe_file_name("tiny-20000") == "tiny-20000" and safe_file_name("x" * 150) == "x" * 150  # as before


# -- 5: undecodable text in a trace or the run's path ---------------------------------------------------------------

def test_report_copes_with_a_lone_surrogate_in_a_trace_and_bytes_in_the_path(capsys, tmp_path):
    run = tmp_path / os.fsdecode(b"run-\xff")
    assert cli(capsys, "run", *TINY, "--episodes", "1", "--out", str(run))[0] == 0
    trace = next((run / "traces" / "base").iterdir())
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    for event in events:
        if "observation" in event:
            event["observation"] = "odd \ud800 text"
    trace.write_text("".join(json.dumps(event) + "\n" for event in events))
    report = tmp_path / "report.html"
    code, _, err = cli(capsys, "report", str(run), "--out", str(report))
    assert code == 0 and "Traceback" not in err, err
    assert report.is_file() and list((tmp_path / "report-transcripts").rglob("*.html"))


# -- 6: cache clear only clears a response cache --------------------------------------------------------------------

def test_cache_clear_refuses_a_folder_that_is_not_a_response_cache(capsys, tmp_path):
    from playground.agents.response_cache import ResponseCache

    locales = tmp_path / "locales"
    for code in ("de", "fa", "ca"):
        (locales / code).mkdir(parents=True)
        (locales / code / "messages.json").write_text("{}")
    code, _, err = cli(capsys, "cache", "clear", "--folder", str(locales), "--yes")
    assert code == 2 and "not a response cache" in err, err
    assert len(list(locales.rglob("messages.json"))) == 3
    cache = ResponseCache(tmp_path / "cache")
    cache.put({"a": 1}, {"text": "x"})
    code, out, err = cli(capsys, "cache", "clear", "--folder", str(tmp_path / "cache"), "--yes")
    assert code == 0 and "removed 1 entries" in out, err
    old = tmp_path / "old"  # a cache written before the marker: known by its entries' names
    (old / "ab").mkdir(parents=True)
    (old / "ab" / ("ab" + "0" * 62 + ".json")).write_text('{"text": "x"}')
    code, out, err = cli(capsys, "cache", "clear", "--folder", str(old), "--yes")
    assert code == 0 and "removed 1 entries" in out, err


# -- 7: a config.json without its run id ----------------------------------------------------------------------------

def test_a_config_without_run_id_keeps_the_runs_id_on_resume(capsys, tmp_path):
    out = tmp_path / "run"
    assert cli(capsys, "run", *TINY, "--episodes", "1", "--out", str(out))[0] == 0
    config = json.loads((out / "config.json").read_text())
    run_id = config.pop("run_id")
    (out / "config.json").write_text(json.dumps(config))
    code, _, err = cli(capsys, "run", *TINY, "--episodes", "2", "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["run_id"] == run_id
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["episode_id"].startswith(run_id + ":") for r in records)


# -- 9 and 15: the response cache reads only regular files of its own shape ----------------------------------------

def test_a_fifo_in_the_response_cache_is_a_miss_not_a_hang(tmp_path):
    from playground.agents.response_cache import ResponseCache

    cache = ResponseCache(tmp_path)
    request = {"model": "m", "messages": []}
    path = cache._path(request)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(cache.get(request)), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # let the blocked open go before failing
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert not reader.is_alive() and got == [None]


def test_a_cache_entry_of_the_wrong_shape_counts_as_a_miss(tmp_path):
    from playground.agents.response_cache import ResponseCache, cache_use_counted

    cache = ResponseCache(tmp_path)
    request = {"model": "m", "messages": []}
    path = cache._path(request)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"reply": "not an entry"}))
    with cache_use_counted() as counts:
        assert cache.get(request) is None
    assert counts == {"misses": 1}
    cache.put(request, {"text": "fine", "prompt_tokens": 1, "completion_tokens": 1})
    with cache_use_counted() as counts:
        assert cache.get(request)["text"] == "fine"
    assert counts == {"hits": 1}


# -- 10: a detection is checked against the label registry and [0, 1] ----------------------------------------------

def test_a_detection_of_an_unknown_type_or_a_confidence_beyond_one_names_the_plugin(capsys, hostile_site,
                                                                                       tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "bad-detector",
                       "--episodes", "1", "--quiet", "--out", str(out))
    assert code == 3, err
    [entry] = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    assert "'bad-detector'" in entry["error"] and "no_such_type" in entry["error"], entry["error"]
    trace = (out / entry["trace"]).read_text()
    assert '"type": "detection"' not in trace

    from playground.core.episode_hooks import PluginError
    from playground.core.payloads import Detection
    from playground.testing import ScriptedAgent, play, tiny_env

    class Overconfident:
        from playground.core.hookspecs import hookimpl

        @hookimpl
        def detect_failures(self, context, proposal):
            return Detection("over", "progress", ("planning_stall",), 7.5)

    with pytest.raises(PluginError, match=r"plugin0.*confidence 7.5.*\[0, 1\]"):
        play(tiny_env(), ScriptedAgent(), plugins=[Overconfident()], task="tiny-1")


# -- 12: a run directory is known by its config and records ---------------------------------------------------------

def test_a_repository_root_with_a_playbooks_folder_is_no_run_directory(capsys, tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "playbooks").mkdir(parents=True)
    (root / "README.md").write_text("a project\n")
    (root / "src").mkdir()
    monkeypatch.chdir(root)
    code, _, err = cli(capsys, "run", *TINY, "--episodes", "1", "--out", ".")
    assert code == 2 and "folder of other files" in err, err
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "playbooks", "src"]
    setting_up = tmp_path / "new"  # a folder holding only its playbooks is a run being set up
    (setting_up / "playbooks").mkdir(parents=True)
    assert cli(capsys, "run", *TINY, "--episodes", "1", "--out", str(setting_up))[0] == 0


# -- 13: a stdout that cannot be written ---------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_run_and_view_into_dev_full_end_in_a_named_error(tmp_path):
    out = tmp_path / "run"
    base = [sys.executable, "-m", "playground.cli.main"]
    with open("/dev/full", "w") as full:
        ran = subprocess.run([*base, "run", *TINY, "--episodes", "1", "--out", str(out)], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=120)
        viewed = subprocess.run([*base, "view", str(out), "--no-pager"], stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120)
    for done in (ran, viewed):
        assert done.returncode == 2 and "Traceback" not in done.stderr and "Exception" not in done.stderr, \
            done.stderr
        assert "error: cannot write to standard output" in done.stderr, done.stderr
    assert (out / "episodes.jsonl").read_text().count("\n") == 1  # the records are kept


# -- 14: non-finite deadlines --------------------------------------------------------------------------------------

@pytest.mark.parametrize("option", ["--hook-deadline", "--episode-deadline"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_deadline_is_refused(capsys, tmp_path, option, value):
    code, _, err = cli(capsys, "run", *TINY, "--episodes", "1", option, value, "--out", str(tmp_path / "run"))
    assert code == 2 and option in err and "finite" in err, err
    assert not (tmp_path / "run").exists()


# -- also seen: a plugin that changes a frozen payload with object.__setattr__ is named ----------------------------

def test_a_plugin_that_changes_a_frozen_proposal_is_named_and_the_trace_does_not_lie():
    from playground.core.episode_hooks import EpisodeHooks, PluginError
    from playground.core.events import ErrorEvent, ProposalEvent, StepEvent
    from playground.core.hookspecs import hookimpl
    from playground.core.loop import EpisodeConfig, run_episode
    from playground.testing import ScriptedAgent, tiny_env

    class Forger:
        @hookimpl
        def detect_failures(self, context, proposal):
            object.__setattr__(proposal, "action", "x")

    events: list = []
    config = EpisodeConfig("r", "e", "tiny", "tiny-1", "h", "scripted", 0, 10)
    result = run_episode(tiny_env(), ScriptedAgent(), EpisodeHooks([("forger", Forger())]), config, events.append)
    assert result.status == "error"
    assert "'forger'" in result.error and "detect_failures" in result.error and "proposal.action" in result.error
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.plugin == "forger" and error.hook == "detect_failures"
    proposed = {e.step: e.action for e in events if isinstance(e, ProposalEvent)}
    assert "x" not in proposed.values()
    assert all(proposed[e.step] == e.action for e in events if isinstance(e, StepEvent))  # no step differs

    class OutcomeForger:
        @hookimpl
        def step_completed(self, outcome):
            object.__setattr__(outcome.proposal, "action", "x")

    with pytest.raises(PluginError, match=r"'late'.*step_completed.*outcome\.proposal\.action"):
        run_episode(tiny_env(), ScriptedAgent(), EpisodeHooks([("late", OutcomeForger())]),
                    EpisodeConfig("r", "e", "tiny", "tiny-1", "h", "scripted", 0, 10, strict=True), events.append)
