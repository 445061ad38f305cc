"""`playground new-plugin` writes a plugin that loads, runs, and passes its own test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from playground.cli.main import main
from playground.host.manager import Host
from playground.run.config import RunConfig, RunConfigError
from playground.run.runner import run
from playground.run.validation import check_config


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
    assert "3 passed" in result.stdout, result.stdout


def test_new_intervention_declares_its_parameters_and_tests_with_typed_events(tmp_path, monkeypatch, capsys):
    """The scaffold's intervention registers a frozen pydantic `params_model` that a run checks its --param values
    against, and its generated tests read typed events (`playground.core.events`), never event-type strings."""
    assert main(["new-plugin", "no-repeat", "--dir", str(tmp_path)]) == 0
    project = tmp_path / "no-repeat"
    monkeypatch.syspath_prepend(str(project))
    host = Host(strict=True).load(extra={"no-repeat": "no_repeat"})
    model = host.interventions.get("no-repeat").params_model
    assert model is not None and model.__name__ == "NoRepeatParams" and model.model_config.get("frozen")
    assert {name: field.default for name, field in model.model_fields.items()} == {
        "message": "You just did that. Try something that makes progress.", "window": 1}
    assert all(field.description for field in model.model_fields.values())

    def config(**params):
        return RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent="noisy",
                         harnesses=["base", "no-repeat"], out=str(tmp_path / "run"), params=params)

    check_config(host, config(window=3, message="Stop repeating."))
    with pytest.raises(RunConfigError, match="no-repeat parameter 'window' must be a whole number from 1 to 10"):
        check_config(host, config(window=11))
    with pytest.raises(RunConfigError, match="unknown --param 'windw'"):
        check_config(host, config(windw=2))

    tests = (project / "test_no_repeat.py").read_text()
    assert "from playground.core.events import InterventionEvent, StepEvent" in tests
    assert "events_of(InterventionEvent)" in tests and "events_of(StepEvent)" in tests
    assert not re.search(r"""\.(of|count)\(\s*["']""", tests), "the generated tests look events up by type string"
    assert "params_model=NoRepeatParams" in (project / "no_repeat.py").read_text()


def _run_pytest(project: Path, python: str = sys.executable, env: dict | None = None) -> None:
    result = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)], capture_output=True,
                            text=True, env=env or {**os.environ, "PYTHONPATH": str(project)}, cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("kind, listing", [("env", "envs"), ("agent", "agents")])
def test_new_env_and_agent_projects_load_run_and_pass_their_tests(tmp_path, monkeypatch, capsys, kind, listing):
    name = f"my-{kind}"
    assert main(["new-plugin", name, "--kind", kind, "--dir", str(tmp_path)]) == 0
    project = tmp_path / name
    module = name.replace("-", "_")
    assert {p.name for p in project.iterdir()} >= {"pyproject.toml", "README.md", f"{module}.py", f"test_{module}.py"}
    assert f'{name} = "{module}"' in (project / "pyproject.toml").read_text()

    monkeypatch.syspath_prepend(str(project))
    host = Host(strict=True).load(extra={name: module})
    assert name in getattr(host, listing)
    env, agent = (f"{name}", "expert") if kind == "env" else ("tiny", name)
    config = RunConfig(env=env, task_set="default", split="test", tasks=[f"{env}-20000", f"{env}-20001"], agent=agent,
                       harnesses=["base", "sentry"], out=str(tmp_path / "run"))
    summary = run(host, config)
    assert all(h["episodes"] == 2 and h["errors"] == 0 for h in summary["harnesses"].values())
    if kind == "env":
        assert summary["harnesses"]["base"]["success_rate"] == 1.0
    _run_pytest(project)
    if kind == "agent":
        assert not re.search(r"""\.(of|count)\(\s*["']""", (project / f"test_{module}.py").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind, listing", [("intervention", "harnesses"), ("env", "envs"), ("agent", "agents")])
def test_generated_package_installs_into_a_fresh_venv(tmp_path, kind, listing):
    """pip installs the generated project (--no-deps) into a new venv that sees this one's packages."""
    name = f"fresh-{kind}"
    assert main(["new-plugin", name, "--kind", kind, "--dir", str(tmp_path)]) == 0
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # --system-site-packages reaches the base interpreter's packages; this venv's (playground) come in by a .pth
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    Path(site_packages, "_host_venv.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(tmp_path / name)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLAYGROUND_PLUGINS")}
    plugins = subprocess.run([python, "-m", "playground.cli.main", "plugins"], capture_output=True, text=True, env=env)
    assert f"{name}  [loaded]  entry point: playground-{name}==0.1.0" in plugins.stdout, plugins.stdout + plugins.stderr
    listed = subprocess.run([python, "-m", "playground.cli.main", listing], capture_output=True, text=True, env=env)
    assert name in listed.stdout, listed.stdout + listed.stderr
    _run_pytest(tmp_path / name, python, env)


@pytest.mark.parametrize("name", ["Bad Name", "9lives", ""])
def test_bad_plugin_names_are_refused(tmp_path, capsys, name):
    assert main(["new-plugin", name, "--dir", str(tmp_path)]) == 2
    assert "must be lowercase" in capsys.readouterr().err
