"""`playground new-plugin` writes a plugin that loads, runs, and passes its own test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from playground.cli.main import main
from playground.host.manager import Host
from playground.run.runner import RunConfig, run


def test_new_plugin_project_loads_runs_and_passes_its_test(tmp_path, monkeypatch, capsys):
    assert main(["new-plugin", "no-repeat", "--dir", str(tmp_path)]) == 0
    project = tmp_path / "no-repeat"
    assert {p.name for p in project.iterdir()} >= {"pyproject.toml", "no_repeat.py", "test_no_repeat.py"}

    monkeypatch.syspath_prepend(str(project))
    host = Host(strict=True).load(extra={"no-repeat": "no_repeat"})
    assert "no-repeat" in host.harnesses and "no-repeat" in host.interventions
    summary = run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"],
                                  agent="noisy", harnesses=["base", "no-repeat"], out=str(tmp_path / "run"),
                                  agent_options={"repeat": 0.5}))
    assert summary["harnesses"]["no-repeat"]["interventions"].get("soft_repair", 0) > 0

    result = subprocess.run([sys.executable, "-m", "pytest", "-q", str(project)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(project)}, cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["Bad Name", "9lives", ""])
def test_bad_plugin_names_are_refused(tmp_path, capsys, name):
    assert main(["new-plugin", name, "--dir", str(tmp_path)]) == 2
    assert "must be lowercase" in capsys.readouterr().err
