"""Input that used to be accepted without a word: an allow-list naming no plugin, a plugin failing at episode end."""

from __future__ import annotations

import pytest

from playground.core.episode_hooks import PluginError
from playground.core.hookspecs import hookimpl
from playground.host.manager import Host, PluginLoadError
from playground.testing import ScriptedAgent, play, tiny_env


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
