"""pytest fixtures for plugin authors (registered through the `pytest11` entry point)."""

from __future__ import annotations

import pytest

from playground.testing.play import ScriptedAgent, play
from playground.testing.play import tiny_env as make_tiny_env


@pytest.fixture
def tiny_env():
    """A fresh in-memory `tiny` env with the expert plan in `info`."""
    return make_tiny_env()


@pytest.fixture
def scripted_agent():
    """A factory: `scripted_agent(["look", "go east"])` returns a ScriptedAgent."""
    return ScriptedAgent


@pytest.fixture
def play_episode():
    """The `playground.testing.play` function: play one episode with given plugins."""
    return play
