"""Helpers for plugin authors: a tiny in-memory env, a scripted agent, `play()` and `check_env()`.

    from playground.testing import ScriptedAgent, play, tiny_env

    result = play(tiny_env(), ScriptedAgent(["look", "go east"]), plugins=[MyGuard()])
    assert result.count("intervention") == 1
    steps = result.events_of(StepEvent)  # the typed events (playground.core.events)

`check_env(provider)` checks an env plugin against the env contract (see its module).

The same objects are pytest fixtures (`tiny_env`, `scripted_agent`, `play_episode`)
as soon as playground is installed.
"""

from __future__ import annotations

from playground.testing.check_env import check_env as check_env  # re-exported: the package's public face
from playground.testing.play import PlayResult as PlayResult
from playground.testing.play import ScriptedAgent as ScriptedAgent
from playground.testing.play import play as play
from playground.testing.play import tiny_env as tiny_env
