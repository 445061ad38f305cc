"""The agent protocol and the simple built-in agents (no model needed).

An agent is any object with `reset(task_id, seed)` and `propose(view) -> Proposal`.
Built-ins: `random` (a random admissible action), `expert` (the env's expert plan) and
`noisy` (the expert with injected failures; see `playground.agents.noisy`). They exercise the
machinery; numbers they produce are never evidence about LLM agents.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from playground.core.errors import PlaygroundError
from playground.core.payloads import AgentView, Proposal


class Agent(Protocol):
    """What the loop needs from an agent.

    An agent may also define `bind_env(env)`: whoever runs the episode (the runner,
    `playground.testing.play`) calls it with the episode's env before the episode, through
    `bind_env()` below. It is for instruments such as `noisy`, which ask the env how a
    failure looks there (`TextEnv.failure_variants`); an agent under study must not use it.
    """

    def reset(self, task_id: str, seed: int) -> None:
        """Forget the previous episode; `seed` makes any randomness repeatable."""

    def propose(self, view: AgentView) -> Proposal:
        """Return the next (thought, action), or `Proposal(finish=True)` to stop."""


def bind_env(agent: Any, env: Any) -> None:
    """Hand `env` to `agent` when the agent asks for it (an optional `bind_env(env)` method)."""
    bind = getattr(agent, "bind_env", None)
    if callable(bind):
        bind(env)


def bind_judges(agent: Any, judges: Any) -> None:
    """Hand the registered instrument judges (`Host.instrument_judges`: role -> answerer) to `agent` when it asks
    for them (an optional `bind_judges(mapping)` method: a failure-injection instrument playing the judges' model)."""
    bind = getattr(agent, "bind_judges", None)
    if callable(bind):
        bind({spec.role: spec for spec in judges})


class AgentConfigError(PlaygroundError, ValueError):
    """An agent option is unknown or has a bad value."""


def parse_options(defaults: dict[str, Any], options: dict[str, Any], agent: str) -> dict[str, Any]:
    """Merge `options` (strings from the CLI, or typed values) into `defaults`, checking names and types."""
    merged = dict(defaults)
    for key, value in options.items():
        if key not in defaults:
            raise AgentConfigError(f"agent {agent!r} has no option {key!r}; options: "
                                   f"{', '.join(sorted(defaults)) or '(none)'}")
        kind = type(defaults[key])
        if kind is bool and not isinstance(value, bool):  # bool("false") is True: take the words, refuse the rest
            words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
            if str(value).strip().lower() not in words:
                raise AgentConfigError(f"agent {agent!r} option {key!r} expects true or false, got {value!r}")
            merged[key] = words[str(value).strip().lower()]
            continue
        try:
            merged[key] = kind(value) if not isinstance(value, kind) else value
        except (TypeError, ValueError):
            raise AgentConfigError(f"agent {agent!r} option {key!r} expects {kind.__name__}, got {value!r}") from None
    return merged


def expert_action(view: AgentView, agent: str) -> str | None:
    """Return the expert's next action from the view, or None when the plan is done."""
    if "expert_plan" not in view.extras:
        raise RuntimeError(f"agent {agent!r} needs an env that provides an expert plan (info['expert_plan'])")
    plan = view.extras["expert_plan"]
    return plan[0] if plan else None


class RandomAgent:
    """Chooses uniformly among the admissible actions."""

    def __init__(self, **options: Any) -> None:
        parse_options({}, options, "random")
        self.rng = random.Random(0)

    def reset(self, task_id: str, seed: int) -> None:
        self.rng = random.Random(f"random:{seed}:{task_id}")

    def propose(self, view: AgentView) -> Proposal:
        if not view.admissible_actions:
            raise RuntimeError("agent 'random' needs an env that lists admissible actions")
        action = self.rng.choice(sorted(view.admissible_actions))
        return Proposal(thought="I pick an action at random.", action=action)


class ExpertAgent:
    """Follows the env's expert plan (the walkthrough, replanned by the env each step)."""

    def __init__(self, **options: Any) -> None:
        parse_options({}, options, "expert")

    def reset(self, task_id: str, seed: int) -> None:
        pass

    def propose(self, view: AgentView) -> Proposal:
        action = expert_action(view, "expert")
        if action is None:
            return Proposal(thought="The plan is complete.", action="", finish=True)
        return Proposal(thought=f"The plan says: {action}.", action=action)
