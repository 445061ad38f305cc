"""Issue 16, item 6: bad input is refused before the first episode is played."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from playground.core.hookspecs import hookimpl

from tests.conftest import cli

COMMON = ["--env", "tiny", "--agent", "noisy", "--episodes", "2", "--quiet"]


def _refused(capsys, tmp_path, *args, expect: str):
    out = tmp_path / "run"
    code, _, err = cli(capsys, "run", *COMMON, "--out", str(out), *args)
    assert code == 2 and expect in err and "Traceback" not in err, err
    assert not (out / "episodes.jsonl").exists() and not (out / "traces").exists()
    return err


@pytest.mark.parametrize("kind", ["jsonl", "garbage", "folder", "foreign sqlite", "empty name"])
def test_a_bad_playbook_is_refused_before_any_episode(capsys, tmp_path, kind):
    path = tmp_path / "pb.sqlite"
    if kind == "jsonl":
        path.write_text(json.dumps({"failure_type": "progress", "labels": ["x"], "trigger": "t", "principle": "p"}) + "\n")
    elif kind == "garbage":
        path.write_bytes(b"\x00\x01garbage" * 100)
    elif kind == "folder":
        path.mkdir()
    elif kind == "foreign sqlite":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE customers (id INTEGER)")
        db.commit()
        db.close()
    else:
        path = ""
    before = path.read_bytes() if kind in ("jsonl", "garbage", "foreign sqlite") else None
    _refused(capsys, tmp_path, "--harness", "sentry", "--playbook", str(path), expect="--playbook")
    if before is not None:
        assert path.read_bytes() == before


def test_a_new_or_existing_playbook_is_accepted(capsys, tmp_path):
    path = tmp_path / "pb.sqlite"
    for _ in range(2):
        code, _, err = cli(capsys, "run", *COMMON, "--harness", "sentry", "--playbook", str(path),
                           "--out", str(tmp_path / f"run{_}"))
        assert code == 0, err


def test_unknown_params_are_refused_naming_the_known_ones(capsys, tmp_path):
    err = _refused(capsys, tmp_path, "--harness", "sentry", "--param", "treshold=0.5", expect="treshold")
    assert "threshold" in err and "max_reasks_per_step" in err
    _refused(capsys, tmp_path, "--harness", "base", "--param", "k=3", expect="unknown --param 'k'")


@pytest.mark.parametrize("value", ["-1", "1e309", "1.5", "nan", "101"])
def test_max_reasks_per_step_out_of_range_is_refused(capsys, tmp_path, value):
    _refused(capsys, tmp_path, "--harness", "base", "--param", f"max_reasks_per_step={value}",
             expect="max_reasks_per_step must be a whole number")


def test_known_params_are_accepted(capsys, tmp_path):
    for i, args in enumerate((["--harness", "sentry", "--param", "threshold=0.5"],
                              ["--harness", "base", "--param", "max_reasks_per_step=1"],
                              ["--harness", "base", "--harness", "sentry", "--param", "k=3"])):
        code, _, err = cli(capsys, "run", *COMMON, "--out", str(tmp_path / f"r{i}"), *args)
        assert code == 0, err


def test_empty_env_and_out_are_errors(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "run", "--env", "", "--agent", "noisy", "--episodes", "1", "--quiet", "--out", "r")
    assert code == 2 and "--env" in err
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet", "--out", "")
    assert code == 2 and "--out" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r").exists()


def test_zero_tasks_is_an_error(tmp_path):
    from playground.host.manager import Host
    from playground.run.config import RunConfig, RunConfigError
    from playground.run.runner import run

    config = RunConfig(env="tiny", task_set="default", split="test", tasks=[], agent="noisy", harnesses=["base"],
                       out=str(tmp_path / "r"))
    with pytest.raises(RunConfigError, match="no tasks"):
        run(Host().load(), config)
    assert not (tmp_path / "r").exists()


class RefusesPlaybooks:
    """A third-party plugin with its own rule for playbooks."""

    @hookimpl
    def check_playbook(self, path):
        return f"not a playbook this plugin accepts ({Path(path).name})"


class BreaksOnPlaybooks:
    @hookimpl
    def check_playbook(self, path):
        raise RuntimeError("bug")


def test_check_playbook_lets_any_plugin_refuse_a_playbook_before_the_run(tmp_path):
    from playground.core.episode_hooks import PluginError
    from playground.host.manager import Host
    from playground.run.config import RunConfig, RunConfigError
    from playground.run.runner import run

    def config(name):
        return RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent="noisy",
                         harnesses=["base", "sentry"], out=str(tmp_path / name), playbook=str(tmp_path / "pb.sqlite"))

    with pytest.raises(RunConfigError) as refused:
        run(Host().load(extra={"picky": RefusesPlaybooks()}), config("r1"))
    assert str(refused.value) == f"--playbook {str(tmp_path / 'pb.sqlite')!r}: not a playbook this plugin accepts " \
                                 "(pb.sqlite)"  # said once, though both harnesses use it
    with pytest.raises(PluginError, match="plugin 'broken' raised in hook 'check_playbook'.*bug"):
        run(Host().load(extra={"broken": BreaksOnPlaybooks()}), config("r2"))
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists() and not (tmp_path / "pb.sqlite").exists()


def test_the_host_knows_no_playbook_schema():
    """What a playbook file is, is the playbook plugin's business (`check_playbook`), not the host's."""
    import playground

    for source in Path(playground.__file__).parent.rglob("*.py"):
        text = source.read_text()
        assert "playbook_meta" not in text and "sqlite_master" not in text and "import sqlite3" not in text, source


def test_sys_exit_in_a_hook_is_a_plugin_fault_naming_the_plugin():
    """A plugin calling sys.exit() inside a hook errors its episode by name instead of ending the run silently."""
    import sys

    from playground.testing import ScriptedAgent, play, tiny_env

    class Exits:
        @hookimpl
        def step_completed(self, outcome):
            sys.exit(3)

    result = play(tiny_env(), ScriptedAgent(["look", "look"]), [Exits()], task="tiny-3", strict=False)
    assert result.result.status == "error"
    assert "plugin 'plugin0' raised in hook 'step_completed': SystemExit: 3" in result.result.error


def test_a_lone_surrogate_in_an_event_is_written_and_read_back(tmp_path):
    """A model reply or an env's text holding a lone surrogate (not encodable as UTF-8) does not error the episode:
    the trace keeps it as its JSON escape and reads it back unchanged."""
    from playground.core.events import HeaderEvent, StepEvent
    from playground.run.traces import TraceWriter, read_events

    text = "You see a \ud800 broken glyph."
    writer = TraceWriter(tmp_path / "t.jsonl", HeaderEvent(env="tiny", task_set="", task_id="", seed=0))
    writer.emit(StepEvent(step=0, action="look", observation=text))
    writer.close()
    assert read_events(tmp_path / "t.jsonl")[1].observation == text


def test_an_output_name_too_long_for_the_file_system_is_a_named_error(tmp_path):
    from playground.run.files import OutputError, check_output

    with pytest.raises(OutputError, match="File name too long"):
        check_output(tmp_path / ("a" * 300 + ".md"), what="report")


@pytest.mark.parametrize("command", ["view", "report", "compare"])
def test_a_run_directory_name_too_long_is_a_named_error_for_every_reader(tmp_path, capsys, command):
    """Issue 38: a 256-character run path made `view` crash with a traceback."""
    from tests.conftest import cli

    long = str(tmp_path / ("a" * 256))
    args = {"view": [long], "report": [long, "--out", str(tmp_path / "r.html")], "compare": [long, long]}[command]
    code, _, err = cli(capsys, command, *args)
    assert code == 2 and "Traceback" not in err and ("too long" in err or "not a run directory" in err), err
