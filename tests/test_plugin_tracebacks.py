"""A plugin that raises is shown with its traceback and file:line: under `--strict` the CLI prints the traceback to
stderr above the error line naming the plugin and the hook; otherwise the run goes on and the episode's trace keeps
it (the `error` event's `traceback`; unfinished.jsonl's `error` ends with ` (at FILE:LINE)`).
"""

from __future__ import annotations

import inspect
import json
import pickle
from pathlib import Path

import pytest

from playground.core.episode_hooks import PluginError
from playground.core.events import ErrorEvent
from playground.core.hookspecs import hookimpl
from playground.host import manager
from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.run.traces import read_events
from tests.conftest import cli


class Explodes:
    """An intervention whose `step_completed` raises."""

    @hookimpl
    def step_completed(self, outcome):
        raise ValueError("the plugin's own bug")


RAISING_LINE = inspect.getsourcelines(Explodes.step_completed)[1] + 2  # the `raise` line
WHERE = f"{Path(__file__).name}\", line {RAISING_LINE}"  # as a traceback names it
AT = f"{Path(__file__).name}:{RAISING_LINE})"  # as an error message names it: ` (at FILE:LINE)`


class ExplodesPlugin:
    @hookimpl
    def register_interventions(self, register):
        register("explodes", lambda params: Explodes())


@pytest.fixture
def host(monkeypatch) -> Host:
    loaded = Host(strict=True).load(extra={"explodes-test": ExplodesPlugin()})
    loaded.harnesses.add("explodes", HarnessSpec("explodes", ("explodes",)))
    monkeypatch.setattr(manager, "_HOST", loaded)  # the process-wide host the CLI uses
    return loaded


def command(out: Path, *extra: str) -> list[str]:
    return ["run", "--env", "tiny", "--agent", "expert", "--harness", "explodes", "--episodes", "2", "--quiet",
            "--out", str(out), *extra]


def test_strict_prints_the_plugins_traceback_with_its_file_and_line(host, capsys, tmp_path):
    code, _, err = cli(capsys, *command(tmp_path / "run", "--strict"))
    assert code == 2
    assert "Traceback (most recent call last)" in err and WHERE in err
    assert "ValueError: the plugin's own bug" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: plugin 'explodes' raised in hook 'step_completed': ValueError") and AT in last


def test_without_strict_the_run_goes_on_and_its_trace_keeps_the_traceback(host, capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *command(out, "--max-consecutive-errors", "0"))
    assert code == 3, err  # both episodes unfinished, the run went through them
    logged = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    assert len(logged) == 2 and all(AT in entry["error"] for entry in logged)
    errors = [event for event in read_events(out / logged[0]["trace"]) if isinstance(event, ErrorEvent)]
    assert errors and errors[0].plugin == "explodes" and errors[0].hook == "step_completed"
    assert "Traceback (most recent call last)" in errors[0].traceback and WHERE in errors[0].traceback


def test_a_plugin_error_crosses_to_another_process_with_its_traceback():
    try:
        Explodes().step_completed(None)
    except ValueError as exc:
        error = PluginError("explodes", "step_completed", exc)
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) and AT in str(back)
    assert (back.plugin, back.hook, back.traceback) == ("explodes", "step_completed", error.traceback)
    assert WHERE in back.traceback
