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


def test_a_failed_import_does_not_create_the_playbook(capsys, tmp_path):
    source = tmp_path / "far.jsonl"
    source.write_text('{"failure_type": "progress", "labels": ["planning_stall"], "trigger": "t", "principle": "p", '
                      '"created_at": 1e300}\n')
    code, _, err = cli(capsys, "playbook", "import", str(tmp_path / "new.sqlite"), str(source))
    assert code == 2 and "far.jsonl" in err and "line 1" in err and "created_at" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["far.jsonl"]
