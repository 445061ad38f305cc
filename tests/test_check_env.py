"""`playground.testing.check_env`: the tiny env passes; envs that break a promise fail with a clear message."""

from __future__ import annotations

import random

import pytest

from playground.testing import check_env
from playground.testing.tiny import TinyEnv, TinyProvider


class Broken(TinyProvider):
    """The tiny provider with an env class that breaks one promise."""

    def __init__(self, env_class) -> None:
        self.env_class = env_class

    def make(self, task_set, *, expert=False, **options):
        return self.env_class(expert=expert)


class Unsorted(TinyEnv):
    def _info(self, valid):
        info = super()._info(valid)
        info["admissible_actions"] = sorted(info["admissible_actions"], reverse=True)
        return info


class RandomStart(TinyEnv):
    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return observation + f" ({random.random()})", info


class InvalidMoves(TinyEnv):
    def step(self, action):
        if action not in self._admissible():
            self.state["where"] = min(self.state["where"] + 1, len(self.state["rooms"]) - 1)
        return super().step(action)


class StrayKind(TinyEnv):
    def _info(self, valid):
        info = super()._info(valid)
        info["action_kinds"] = {**info["action_kinds"], "fly away": "move"}
        return info


class NoKinds(TinyEnv):
    def _info(self, valid):
        info = super()._info(valid)
        del info["action_kinds"]
        return info


class ShallowSnapshot(TinyEnv):
    def snapshot(self):
        return self.state  # later steps change it

    def restore(self, snapshot):
        self.state = snapshot


class RemembersMoves(TinyEnv):
    """Counts every move it has played, across resets: a reused env's first observation changes."""

    played = 0

    def step(self, action):
        self.played += 1
        return super().step(action)

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return observation + ("" if not self.played else f" You have moved {self.played} times."), info


def test_the_tiny_env_meets_the_contract():
    check_env(TinyProvider(), tasks=5, steps=10)


@pytest.mark.parametrize("env_class, check", [
    (Unsorted, "admissible actions are sorted"),
    (RandomStart, "determinism"),
    (InvalidMoves, "an invalid action changes nothing"),
    (StrayKind, "action_kinds keys are admissible actions"),
    (NoKinds, "info has required key 'action_kinds'"),
    (ShallowSnapshot, "snapshot/restore round trip"),
    (RemembersMoves, "reuse: after it has played, resetting the env to the task gives its initial state"),
])
def test_a_broken_promise_names_the_env_and_the_check(env_class, check):
    with pytest.raises(AssertionError) as raised:
        check_env(Broken(env_class), tasks=3, steps=6)
    assert str(raised.value).startswith("check_env(tiny:default, task 'tiny-20000')") and check in str(raised.value)
