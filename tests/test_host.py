"""Plugin loading: built-ins through the same path as entry points, failure isolation, strict, allow-list."""

from __future__ import annotations

import json

import pytest

from playground.host.manager import Host, PluginLoadError
from tests.conftest import run_cli, write_plugin_dist

GOOD_PLUGIN = """
from playground.core.hookspecs import hookimpl
from playground.agents.base import ExpertAgent

@hookimpl
def register_agents(register):
    register("third-party-expert", ExpertAgent, description="from an entry point", needs_expert=True)
"""

BROKEN_IMPORT = """
raise ImportError("this plugin needs a package that is not installed")
"""

BROKEN_REGISTER = """
from playground.core.hookspecs import hookimpl
from playground.agents.base import ExpertAgent

@hookimpl
def register_agents(register):
    register("half-registered", ExpertAgent)
    raise RuntimeError("registration blew up")
"""


def test_builtins_load_as_plugins():
    host = Host().load()
    loaded = {r.name: r for r in host.records}
    assert {"agents", "harnesses", "tiny", "textworld"} <= set(loaded)
    assert all(r.status == "loaded" for r in loaded.values())
    assert "register_agents" in loaded["agents"].hooks
    assert {"random", "expert", "noisy"} <= set(host.agents.names())
    assert "base" in host.harnesses and "tiny" in host.envs


def test_import_failure_is_isolated_and_reported(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken_plugin_module.py").write_text(BROKEN_IMPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    host = Host(strict=False).load(extra={"good": _module(GOOD_PLUGIN), "broken": "broken_plugin_module"})
    records = {r.name: r for r in host.records}
    assert records["broken"].status == "failed" and "not installed" in records["broken"].error
    assert "third-party-expert" in host.agents
    assert "plugin 'broken' skipped" in capsys.readouterr().err


def test_registration_failure_removes_what_the_plugin_registered():
    host = Host(strict=False).load(extra={"halfway": _module(BROKEN_REGISTER)})
    record = next(r for r in host.records if r.name == "halfway")
    assert record.status == "failed" and "register_agents failed" in record.error
    assert "half-registered" not in host.agents
    assert "noisy" in host.agents


def test_strict_mode_makes_a_failure_fatal():
    with pytest.raises(PluginLoadError, match="halfway"):
        Host(strict=True).load(extra={"halfway": _module(BROKEN_REGISTER)})


def test_allow_list_limits_what_loads(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_PLUGINS", "agents,tiny")
    host = Host().load()
    status = {r.name: r.status for r in host.records}
    assert status["agents"] == "loaded" and status["tiny"] == "loaded"
    assert status["textworld"] == "skipped" and status["harnesses"] == "skipped"
    assert "textworld" not in host.envs


def test_duplicate_names_are_refused_for_the_second_plugin():
    host = Host(strict=False).load(extra={"again": _module(GOOD_PLUGIN), "again2": _module(GOOD_PLUGIN)})
    status = {r.name: r.status for r in host.records}
    assert status["again"] == "loaded" and status["again2"] == "failed"


@pytest.mark.slow
def test_entry_point_plugins_load_and_fail_in_isolation_in_a_real_process(tmp_path):
    root = write_plugin_dist(tmp_path / "site", "demo-plugins", {"good": GOOD_PLUGIN, "broken": BROKEN_IMPORT})
    env = {"PYTHONPATH": str(root)}
    listed = run_cli("plugins", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    records = {r["name"]: r for r in json.loads(listed.stdout)}
    assert records["good"]["status"] == "loaded" and "demo-plugins==0.1" in records["good"]["source"]
    assert records["broken"]["status"] == "failed"
    agents = run_cli("agents", env=env)
    assert "third-party-expert" in agents.stdout
    strict = run_cli("agents", env={**env, "PLAYGROUND_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2 and "broken" in strict.stderr


def test_hook_tracing_switch_prints_hook_calls(monkeypatch, capsys):
    monkeypatch.setenv("PLAYGROUND_TRACE_HOOKS", "1")
    from playground.testing import ScriptedAgent, play, tiny_env

    play(tiny_env(), ScriptedAgent(), task="tiny-1")
    assert "episode_started" in capsys.readouterr().err


def _module(source: str):
    import types

    module = types.ModuleType(f"plugin_{abs(hash(source))}")
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    return module


