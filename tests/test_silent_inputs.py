"""Input that used to be accepted without a word (an allow-list naming no plugin, a plugin failing at episode end, a
read-only playbook that is not there, more episodes than tasks, ...) or answered with a traceback."""

from __future__ import annotations

import pytest

from playground.core.episode_hooks import PluginError
from playground.core.hookspecs import hookimpl
from playground.host.manager import Host, PluginLoadError
from playground.testing import ScriptedAgent, play, tiny_env
from tests.conftest import cli


def test_an_allow_list_naming_no_plugin_says_so(capsys):
    host = Host(allow=["tiny", "nope"]).load()
    failed = [r for r in host.records if r.status == "failed"]
    assert [(r.name, r.source) for r in failed] == [("nope", "PLAYGROUND_PLUGINS")]
    assert "no such plugin; choose from:" in failed[0].error and "tiny" in failed[0].error
    assert "plugin 'nope' skipped" in capsys.readouterr().err
    assert "tiny" in host.envs  # what exists still loads
    with pytest.raises(PluginLoadError, match="'nope'.*no such plugin"):
        Host(strict=True, allow=["nope"]).load()


class FailsAtTheEnd:
    @hookimpl
    def episode_finished(self, end):
        raise RuntimeError("could not save")


def test_a_plugin_failing_in_episode_finished_makes_the_episode_an_error():
    result = play(tiny_env(), ScriptedAgent(), plugins=[FailsAtTheEnd()], task="tiny-20003", strict=False)
    assert result.result.status == "error" and "could not save" in result.result.error
    end = result.of("end")[0]
    assert end["status"] == "error" and end["won"] is True  # the env's grade is kept, the fault is not hidden
    assert [kind for kind, _ in result.events][-2:] == ["error", "end"]
    with pytest.raises(PluginError, match="episode_finished"):
        play(tiny_env(), ScriptedAgent(), plugins=[FailsAtTheEnd()], task="tiny-20003", strict=True)


# -- Issue 16, the rest: input that ran silently, and the by-hand list ----------------------------------------------

RUN = ["run", "--env", "tiny", "--agent", "noisy", "--episodes", "2", "--quiet"]


def test_a_read_only_playbook_that_does_not_exist_is_refused_before_any_episode(capsys, tmp_path):
    missing = tmp_path / "shipped.sqlite"
    code, _, err = cli(capsys, *RUN, "--harness", "sentry", "--out", str(tmp_path / "run"), "--playbook",
                       str(missing), "--param", "playbook_read_only=true")
    assert code == 2 and str(missing) in err and "playbook_read_only" in err and "Traceback" not in err, err
    assert not (tmp_path / "run" / "episodes.jsonl").exists() and not missing.exists()
    # without --playbook, each harness's own playbook is the one that must exist
    code, _, err = cli(capsys, *RUN, "--harness", "base", "--harness", "sentry", "--out", str(tmp_path / "run2"),
                       "--param", "playbook_read_only=true")
    assert code == 2 and "harness 'sentry'" in err and "harness 'base'" not in err, err
    # the guard alone retrieves nothing, so it needs no playbook
    code, _, err = cli(capsys, *RUN, "--harness", "guard-only", "--out", str(tmp_path / "run3"), "--playbook",
                       str(missing), "--param", "playbook_read_only=true")
    assert code == 0, err


class CountedEnv:
    """A plugin with an env whose splits are listed, generated with a cap, or generated with no cap."""

    def __init__(self):
        self.generated: list[int] = []

    def _generate(self, count):
        self.generated.append(count)
        return [f"g-{i}" for i in range(min(count, 3))]  # only three could be made

    @hookimpl
    def register_envs(self, register):
        from playground.core.env import EnvProvider
        from playground.core.task_sets import TaskSet

        plugin = self

        class Provider(EnvProvider):
            name = "counted"
            default_task_set = "default"

            def task_sets(self):
                return {"default": TaskSet("default", "", {"listed": ("a", "b", "c"), "capped": plugin._generate,
                                                           "open": plugin._generate},
                                           default_split="listed", max_counts={"capped": 5})}

        register(Provider())


def test_more_episodes_than_a_task_set_has_is_one_clear_error_before_anything_is_generated():
    from playground.run.config import RunConfigError
    from playground.run.validation import resolve_tasks

    plugin = CountedEnv()
    host = Host().load(extra={"counted": plugin})
    assert resolve_tasks(host, "counted", None, "listed", 3)[2] == ["a", "b", "c"]
    with pytest.raises(RunConfigError, match="^counted:default split listed has 3 tasks; --episodes 4 asks for more$"):
        resolve_tasks(host, "counted", None, "listed", 4)
    with pytest.raises(RunConfigError, match="split capped has at most 5 tasks; --episodes 6 asks for more"):
        resolve_tasks(host, "counted", None, "capped", 6)
    assert plugin.generated == []  # refused by the declared cap, before generating
    with pytest.raises(RunConfigError, match="split open has 3 tasks; --episodes 4 asks for more"):
        resolve_tasks(host, "counted", None, "open", 4)  # no cap: known once listed


@pytest.mark.parametrize("env, split, has", [("workflow", "test", "has 15 tasks"),
                                             ("tiny", "test", "has 10000 tasks"),
                                             ("alfworld:generated", "train", "has at most 10000 tasks")])
def test_episodes_beyond_an_env_s_tasks_are_refused_the_same_way_by_every_env(capsys, tmp_path, monkeypatch, env,
                                                                            split, has):
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "cache"))
    code, _, err = cli(capsys, "run", "--env", env, "--split", split, "--episodes", "100000", "--quiet", "--out",
                       str(tmp_path / "run"))
    assert code == 2 and f"split {split} {has}; --episodes 100000 asks for more" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()  # nothing generated or written


def test_a_non_program_as_the_appworld_python_is_a_named_error(tmp_path, monkeypatch):
    from playground.envs.appworld import setup as appworld_setup
    from playground.envs.appworld.server import AppWorldError, AppWorldServer

    garbage = tmp_path / "python"
    garbage.write_text("not a program\n")
    with pytest.raises(AppWorldError, match=f"cannot start the AppWorld server with {garbage}"):
        AppWorldServer(garbage, tmp_path, pid_dir=tmp_path / "pids").start()
    monkeypatch.setenv("APPWORLD_PYTHON", str(garbage))
    assert not appworld_setup.is_set_up()
    assert f"APPWORLD_PYTHON={garbage} is not an executable file" in appworld_setup.not_set_up_message()
    with pytest.raises(RuntimeError, match="is not an executable file"):
        appworld_setup.setup(lambda message: None)


def test_aed_export_to_a_folder_or_nowhere_is_a_named_error(capsys, tmp_path):
    (tmp_path / "folder").mkdir()
    for out, why in ((str(tmp_path / "folder"), "is a folder"), ("", "path is empty")):
        code, _, err = cli(capsys, "aed", "export", str(tmp_path), "--view", "diagnosis", "--out", out)
        assert code == 2 and why in err and "Traceback" not in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["folder"] and not any((tmp_path / "folder").iterdir())


def test_a_failed_import_does_not_create_the_playbook(capsys, tmp_path):
    source = tmp_path / "far.jsonl"
    source.write_text('{"failure_type": "progress", "labels": ["planning_stall"], "trigger": "t", "principle": "p", '
                      '"created_at": 1e300}\n')
    code, _, err = cli(capsys, "playbook", "import", str(tmp_path / "new.sqlite"), str(source))
    assert code == 2 and "far.jsonl" in err and "line 1" in err and "created_at" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["far.jsonl"]
