"""AppWorld: error classification, the procedural help, noisy variants, and (after
`playground envs setup appworld`) the real AppWorld server: every embedded task solved by
its scripted solution, a no-op failing, checkpoints by replay, and runs through the CLI.

The server tests are skipped, saying so, when the setup has not been done; `.ci/run`
runs the README's test command, which does the setup first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from playground.envs.appworld import setup as appworld_setup
from playground.envs.appworld.env import wrong_api_name
from playground.envs.appworld.interventions import classify_error, full_listing, induced_rule, relevant_docs
from playground.envs.appworld.server import STOP_GRACE, answering_pid
from playground.processes import is_running
from tests.test_orphans import Lines, descendants, kill_and_check, needs_linux, records, start_run, wait_for_record
from tests.conftest import needs_extra

CACHE_AT_IMPORT = os.environ.get("PLAYGROUND_CACHE")
SET_UP = appworld_setup.is_set_up()
needs_server = needs_extra("appworld", SET_UP, f"AppWorld not set up: {appworld_setup.not_set_up_message()}")

UNKNOWN_API = """Execution failed. Traceback:
  File "<python-input>", line 1, in <module>
    apis.venmo.send_money(receiver_email='x@y.com', amount=3)
Exception: No API named 'send_money' found in the venmo app."""
UNAUTHORIZED = """Execution failed. Traceback:
Exception: Response status code is 401:
{"message":"You are either not authorized to access this venmo API endpoint or your access token is missing, invalid or expired."}"""
MISSING_RECORD = """Execution failed. Traceback:
Exception: Response status code is 409:
{"message":["The user with email nobody@example.com does not exist."]}"""
SYNTAX = """Execution failed. Traceback:
Syntax error in line:
print(apis.venmo.show_venmo_balance(access_token='abc')
Message: '(' was never closed"""
MISSING_FIELD = """Execution failed. Traceback:
Exception: Response status code is 422:
{"message":"Validation error. Reason: \\nreceiver_email: field required"}"""

DOCS = {"venmo": {"create_transaction": {"description": "Send money to a user.", "parameters": [
            {"name": "receiver_email", "required": True}, {"name": "amount", "required": True},
            {"name": "access_token", "required": True}]},
                  "login": {"description": "Log in to venmo.", "parameters": [{"name": "username", "required": True}]},
                  "show_transactions": {"description": "List transactions.", "parameters": []}},
        "spotify": {"show_playlists": {"description": "List your playlists.", "parameters": []}}}


@pytest.fixture(autouse=True)
def appworld_cache(monkeypatch):
    """Other test modules point PLAYGROUND_CACHE at session folders; AppWorld's setup lives in the user's cache."""
    if CACHE_AT_IMPORT is None:
        monkeypatch.delenv("PLAYGROUND_CACHE", raising=False)
    else:
        monkeypatch.setenv("PLAYGROUND_CACHE", CACHE_AT_IMPORT)


def test_classify_appworld_errors():
    assert classify_error(UNKNOWN_API).label == "unknown_api"
    assert (classify_error(UNKNOWN_API).app, classify_error(UNKNOWN_API).api) == ("venmo", "send_money")
    code = "print(apis.venmo.show_venmo_balance())"
    assert (classify_error(UNAUTHORIZED, code).label, classify_error(UNAUTHORIZED, code).app) == ("missing_login", "venmo")
    assert classify_error(MISSING_RECORD).label == "missing_lookup"
    assert classify_error(SYNTAX).label == "syntax_error"
    assert classify_error(MISSING_FIELD).label == "missing_argument"
    assert classify_error("Execution failed. Traceback:\nZeroDivisionError: division by zero").label == "api_error"


def test_procedural_help_texts():
    rule = induced_rule(classify_error(UNKNOWN_API), DOCS)
    assert "The venmo app has no API send_money" in rule and "show_api_descriptions(app_name='venmo')" in rule
    assert "apis.venmo.login" in induced_rule(classify_error(UNAUTHORIZED, "apis.venmo.show_venmo_balance()"))
    assert "never a guessed value" in induced_rule(classify_error(MISSING_RECORD))
    found = relevant_docs(DOCS, "send money to my friend on venmo", ["venmo"], k=2)
    assert found[0].startswith("apis.venmo.create_transaction(receiver_email, amount, access_token)")
    listing = full_listing(DOCS, ["venmo"])
    assert listing.count("- apis.venmo.") == 3 and "spotify" not in listing


def test_wrong_api_name_variant():
    cell = "tok = apis.venmo.login(username=u, password=p)['access_token']\napis.venmo.create_transaction(amount=1)"
    assert wrong_api_name(cell).startswith("tok = apis.venmo.sign_in(")
    assert wrong_api_name("apis.supervisor.complete_task(answer=None)") is None
    assert wrong_api_name("apis.spotify.play_music()") == "apis.spotify.play_musics()"


def test_not_set_up_is_a_clear_one_line_error(capsys, tmp_path, monkeypatch):
    from playground.cli.main import main

    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "empty-cache"))
    code = main(["run", "--env", "appworld", "--agent", "expert", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "AppWorld is not set up here" in err and "playground envs setup appworld" in err


# -- against the real AppWorld server (after setup) ---------------------------------------------


@pytest.fixture(scope="module")
def provider():
    from playground.envs.appworld.env import AppWorldProvider

    return AppWorldProvider()


def embedded_ids(provider) -> list[str]:
    return provider.task_sets()["embedded"].tasks("test", 100)


@needs_server
def test_embedded_set_has_at_least_12_tasks_over_3_apps(provider):
    ids = embedded_ids(provider)
    apps = set()
    for task_id in ids:
        meta = json.loads((appworld_setup.embedded_root() / "data" / "tasks" / task_id / "playground.json").read_text())
        apps.update(a for a in meta["apps"] if a not in ("supervisor", "admin"))
    assert len(ids) >= 12 and len(apps) >= 3


@needs_server
def test_expert_solves_every_task_and_doing_nothing_fails(provider):
    env = provider.make("embedded", expert=True)
    for task_id in embedded_ids(provider):
        observation, info = env.reset(options={"task": task_id})
        assert observation.startswith("Task: ") and info["action_format"] == "code" and info["admissible_actions"] is None
        for _ in range(10):
            observation, reward, done, _, info = env.step(info["expert_plan"][0])
            assert info["valid_action"], (task_id, observation)
            if done:
                break
        assert done and reward == 1.0 and info["won"] and info["test_report"]["failures"] == [], task_id
        _, info = env.reset(options={"task": task_id})
        _, reward, done, _, info = env.step("apis.supervisor.complete_task(answer=None)")
        assert done and reward == 0.0 and not info["won"] and info["test_report"]["failures"], task_id
    env.close()


@needs_server
def test_failed_cells_are_invalid_and_checkpoints_replay(provider):
    env = provider.make("embedded", expert=True)
    task_id = embedded_ids(provider)[0]
    _, info = env.reset(options={"task": task_id})
    variants = env.failure_variants()
    assert {"malformed", "stall", "stop"} <= set(variants) and "failure_variants" not in info
    output, _, done, _, info = env.step(variants["malformed"]["action"])
    assert output.startswith("Execution failed") and not info["valid_action"] and not done
    plan = info["expert_plan"]
    _, _, _, _, info = env.step(plan[0])
    saved = env.snapshot()
    rest = info["expert_plan"]
    for cell in rest:
        _, reward, done, _, info = env.step(cell)
    assert done and reward == 1.0
    env.restore(saved)  # back before the rest of the solution: replaying it must win again
    for cell in rest:
        _, reward, done, _, info = env.step(cell)
    assert done and reward == 1.0
    env.close()


@needs_server
def test_every_scripted_cell_passes_the_schema_check_and_the_noisy_cells_fail_it(provider):
    env = provider.make("embedded", expert=True)
    labels = set()
    for task_id in embedded_ids(provider):
        env.reset(options={"task": task_id})
        for cell in env.solution:
            assert env.check_action(cell) == [], (task_id, cell)
        for step in range(2):  # the first cell's wrong cell renames an API, the second's a keyword
            variants = env.failure_variants()
            invalid, malformed = variants["invalid"], variants["malformed"]
            assert invalid["label"] in [p.kind for p in env.check_action(invalid["action"])], (task_id, invalid)
            assert [p.kind for p in env.check_action(malformed["action"])] == ["syntax_error"], task_id
            labels.add(invalid["label"])
            env.step(env.solution[step])
    assert labels == {"unknown_api", "unknown_argument"}
    env.close()


@needs_server
@pytest.mark.slow
def test_sentry_hard_repairs_a_schema_invalid_cell_and_sentry_no_hard_runs_it(provider):
    from playground.plugins.sentry.harness import SentryPlugin
    from playground.testing import ScriptedAgent, play

    env = provider.make("embedded", expert=True)
    task_id = embedded_ids(provider)[0]
    env.reset(options={"task": task_id})
    wrong = env.failure_variants()["invalid"]["action"]  # the first cell, logging in with `sign_in`
    app = re.search(r"apis\.(\w+)\.sign_in\(", wrong).group(1)
    agent = ScriptedAgent([wrong])  # then the scripted solution
    repaired = play(env, agent, plugins=[SentryPlugin({})], task=task_id, max_steps=10)
    [repair] = [e for e in repaired.of("intervention") if e["kind"] == "hard_repair"]
    text = repair["message"]["text"]
    assert f"unknown_api (line 3): the {app} app has no API 'sign_in'" in text
    assert f"- apis.{app}.login(username, password)" in text
    assert agent.views[1].message.labels == ("wrong_schema", "unknown_api")
    assert wrong not in [s["action"] for s in repaired.of("step")] and repaired.result.won
    sent = play(env, ScriptedAgent([wrong]), plugins=[SentryPlugin({"hard_repair": False})], task=task_id,
                max_steps=10)
    assert not [e for e in sent.of("intervention") if e["kind"] == "hard_repair"]
    first = sent.of("step")[0]
    assert first["action"] == wrong and not first["valid_action"] and "No API named 'sign_in'" in first["observation"]
    env.close()


@needs_server
def test_noisy_runs_under_base_sentry_and_procedural_harnesses(capsys, tmp_path):
    from playground.cli.main import main

    out = tmp_path / "run"
    code = main(["run", "--env", "appworld", "--agent", "noisy", "--agent-option", "invalid=0.3",
                 "--agent-option", "drift=0.2", "--harness", "base", "--harness", "sentry",
                 "--harness", "retrieval_fallback", "--harness", "auto_knowledge", "--episodes", "4", "--max-steps", "12",
                 "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["harnesses"]) == {"base", "sentry", "retrieval_fallback", "auto_knowledge"}
    assert all(h["errors"] == 0 for h in summary["harnesses"].values())
    # Sentry re-asks schema-invalid cells instead of running them; base runs every one
    base, sentry = summary["harnesses"]["base"], summary["harnesses"]["sentry"]
    assert sentry["interventions"].get("hard_repair", 0) > 0 and "hard_repair" not in base["interventions"]
    assert base["schema_invalid_per_episode"] > sentry["schema_invalid_per_episode"]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    fallback = [r for r in records if r["harness"] == "retrieval_fallback"]
    assert sum(r["detected_failures"] for r in fallback) > 0
    trace = [json.loads(line) for line in (out / fallback[0]["trace"]).read_text().splitlines()]
    assert trace[0]["env"] == "appworld" and trace[0]["appworld"] == appworld_setup.APPWORLD_REQUIREMENT
    # auto_knowledge's help carries API docs from the server (passed to it in the env's reset info)
    helps = [e["message"]["text"] for r in records if r["harness"] == "auto_knowledge"
             for e in map(json.loads, (out / r["trace"]).read_text().splitlines()) if e["type"] == "intervention"]
    assert helps and any("Relevant APIs:\n- apis." in text for text in helps)


@needs_server
def test_server_stops_without_leaving_a_process(provider):
    from playground.envs.appworld.server import AppWorldServer

    server = AppWorldServer(appworld_setup.venv_python(), appworld_setup.embedded_root())
    server.start()
    pid, url = server.process.pid, server.url
    assert url == f"http://127.0.0.1:{server.port}" and server.port > 0
    welcome = server.get("/")  # it answers, as AppWorld's own server
    assert isinstance(welcome, dict) and "Welcome to AppWorld Server" in welcome["message"]
    docs = server.api_docs()
    assert {"supervisor", "spotify", "venmo"} <= set(docs)
    assert "complete_task" in docs["supervisor"] and "login" in docs["spotify"]
    record = json.loads(server.pid_file.read_text())
    assert (record["pid"], record["parent_pid"], record["port"], record["token"]) == (
        pid, os.getpid(), server.port, server.token)
    with pytest.raises(urllib.error.HTTPError) as refused:  # a request without this run's token never reaches AppWorld
        urllib.request.urlopen(server.url + "/", timeout=10)
    assert refused.value.code == 403
    assert answering_pid(server.port, server.token) == pid and answering_pid(server.port, "other") is None
    server.request("/initialize", task_id=embedded_ids(provider)[0], experiment_name="stop-test")
    started = time.monotonic()
    server.stop()  # AppWorld alone takes seconds to exit after a task; bounded by serve.py's grace
    assert time.monotonic() - started < STOP_GRACE + 2
    assert server.process is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    assert not (appworld_setup.home() / "servers" / f"{pid}.json").exists()
    with pytest.raises(urllib.error.URLError):  # and nothing listens on its port any more
        urllib.request.urlopen(url + "/", timeout=5)


@pytest.mark.slow
@needs_server
@needs_linux
def test_a_stale_server_is_stopped_when_a_new_run_starts(tmp_path):
    from playground.envs.appworld.server import AppWorldServer

    server = AppWorldServer(appworld_setup.venv_python(), appworld_setup.embedded_root())
    server.start()
    pid, pid_file = server.process.pid, server.pid_file
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    # as a run killed before this fix (or off Linux) leaves it: its starter is gone, the server runs on
    pid_file.write_text(json.dumps({**json.loads(pid_file.read_text()), "parent_pid": gone.pid}))
    done = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", "--env", "appworld", "--agent",
                           "expert", "--episodes", "1", "--out", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"stopped a stale server (pid {pid}," in done.stderr
    assert server.process.wait(timeout=5) is not None and not pid_file.exists()
    server.stop()


@pytest.mark.slow
@needs_server
@needs_linux
def test_kill_9_of_an_appworld_run_leaves_no_server_and_the_run_resumes(tmp_path):
    out = tmp_path / "run"
    args = ["--env", "appworld", "--agent", "expert", "--harness", "base", "--episodes", "6", "--workers", "2",
            "--out", str(out)]
    marker = uuid.uuid4().hex
    proc = start_run(args, dict(os.environ), marker)
    Lines(proc.stderr).wait_for(lambda line: "appworld: server on" in line, 180)
    wait_for_record(out, 300)
    family = {proc.pid, *descendants(proc.pid)}
    servers = [r for r in _server_records() if r["parent_pid"] in family]
    assert len(servers) >= 2  # the run's own (started by prepare) and at least one worker's
    tracked = kill_and_check(proc, marker)
    assert {r["pid"] for r in servers} <= set(tracked)
    assert 1 <= len(records(out)) < 6

    done = subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *args, "--quiet"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    keys = [r["key"] for r in records(out)]
    assert len(keys) == 6 and len(set(keys)) == 6
    assert json.loads((out / "summary.json").read_text())["harnesses"]["base"]["success_rate"] == 1.0
    # the killed run's pid files went with the rerun's first start; the rerun left none of its own
    assert not [r for r in _server_records() if r["pid"] in {s["pid"] for s in servers}]
    assert not [r for r in _server_records() if not is_running(r["parent_pid"], r.get("parent_start_time"))]


def _server_records() -> list[dict]:
    folder = appworld_setup.home() / "servers"
    found = []
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


@needs_server
def test_appworld_meets_the_env_contract(provider):
    from playground.testing import check_env

    check_env(provider, "embedded", tasks=1, steps=2)
