"""Helpers for plugin authors: a tiny in-memory env, a scripted agent, `play()` and `check_env()`.

    from playground.testing import ScriptedAgent, play, tiny_env

    result = play(tiny_env(), ScriptedAgent(["look", "go east"]), plugins=[MyGuard()])
    assert result.count("intervention") == 1

`check_env(provider)` checks an env plugin against the env contract (see its module).

The same objects are pytest fixtures (`tiny_env`, `scripted_agent`, `play_episode`)
as soon as playground is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from playground.agents.base import bind_env
from playground.agents.judge_calls import judge_calls_reported
from playground.agents.structured import agent_model_shared
from playground.core.episode_hooks import EpisodeHooks
from playground.core.loop import EpisodeConfig, EpisodeResult, run_episode
from playground.core.payloads import AgentView, Proposal
from playground.testing.check_env import check_env as check_env  # re-exported
from playground.testing.tiny import TinyEnv


def tiny_env(expert: bool = True) -> TinyEnv:
    """Return a fresh `tiny` env (with the expert plan in `info` by default)."""
    return TinyEnv(expert=expert)


class ScriptedAgent:
    """Plays a fixed list of actions; then follows the expert plan if there is one, else finishes.

    Every view it was shown is kept in `views`, so tests can check what an intervention
    told the agent. An item of the script may also be a `Proposal`.
    """

    def __init__(self, script: Iterable[str | Proposal] = ()) -> None:
        self.script = list(script)
        self.views: list[AgentView] = []
        self._next = 0

    def reset(self, task_id: str, seed: int) -> None:
        self.views.clear()
        self._next = 0

    def propose(self, view: AgentView) -> Proposal:
        self.views.append(view)
        if self._next < len(self.script):
            item = self.script[self._next]
            self._next += 1
            return item if isinstance(item, Proposal) else Proposal(thought=f"scripted: {item}", action=item)
        plan = view.extras.get("expert_plan")
        if plan:
            return Proposal(thought="following the expert plan", action=plan[0])
        return Proposal(thought="script finished", action="", finish=True)


@dataclass
class PlayResult:
    """An episode played by `play()`: how it ended and every event it emitted."""

    result: EpisodeResult
    events: list[tuple[str, dict]] = field(default_factory=list)

    def of(self, event_type: str) -> list[dict]:
        """Return the data of every event of `event_type`, in order."""
        return [data for kind, data in self.events if kind == event_type]

    def count(self, event_type: str) -> int:
        """Return how many events of `event_type` were emitted."""
        return len(self.of(event_type))


def play(env, agent, plugins: Iterable[Any] = (), *, task: str = "tiny-0", max_steps: int = 20,
         params: dict | None = None, harness: str = "test", strict: bool = True, seed: int = 0,
         playbook: str | None = None, attempt: int = 1) -> PlayResult:
    """Play one episode of `task` with `plugins` as the harness; return what happened.

    `strict=True` (the default here) lets a plugin's exception reach the test;
    `playbook` is the playbook path handed to plugins that use one; `attempt` is the
    attempt number the payloads' `ids.attempt` carry (as a cascade harness's later attempts do).
    """
    played = PlayResult(EpisodeResult("truncated", False, 0))
    hooks = EpisodeHooks([(f"plugin{i}", p) for i, p in enumerate(plugins)])
    config = EpisodeConfig("test-run", f"test:{task}", "test-env", task, harness, type(agent).__name__, seed,
                           max_steps, playbook=playbook, params=dict(params or {}), strict=strict,
                           attempt=attempt)
    bind_env(agent, env)
    emit = lambda kind, data: played.events.append((kind, data))  # noqa: E731
    with agent_model_shared(getattr(agent, "model", None)), judge_calls_reported(emit):
        played.result = run_episode(env, agent, hooks, config, emit)
    return played
