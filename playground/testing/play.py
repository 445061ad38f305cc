"""Playing one episode in a test: the tiny env, a scripted agent, `play()` and its typed result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, TypeVar

from playground.agents.base import bind_env, bind_judges
from playground.agents.judge_calls import judge_calls_reported
from playground.agents.structured import agent_model_shared
from playground.core.episode_hooks import EpisodeHooks
from playground.core.events import Event, event_class, fields_of
from playground.core.loop import EpisodeConfig, EpisodeResult, run_episode
from playground.core.payloads import AgentView, Proposal
from playground.testing.tiny import TinyEnv

E = TypeVar("E", bound=Event)


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
    """An episode played by `play()`: how it ended and every event it emitted (`trace`, typed)."""

    result: EpisodeResult
    trace: list[Event] = field(default_factory=list)

    @property
    def events(self) -> list[tuple[str, dict]]:
        """Every event as (type name, its fields as written to a trace), in order."""
        return [(event.TYPE, fields_of(event)) for event in self.trace]

    def events_of(self, kind: type[E]) -> list[E]:
        """Every event of class `kind` (`StepEvent`, ...), in order."""
        return [event for event in self.trace if isinstance(event, kind)]

    def of(self, kind: str | type[Event]) -> list[dict]:
        """The fields of every event of `kind` (a class, or its type name: "step"), in order, as written to a
        trace."""
        cls = event_class(kind) if isinstance(kind, str) else kind
        return [fields_of(event) for event in self.events_of(cls)]

    def count(self, kind: str | type[Event]) -> int:
        """Return how many events of `kind` (a class, or its type name) were emitted."""
        cls = event_class(kind) if isinstance(kind, str) else kind
        return len(self.events_of(cls))


def play(env, agent, plugins: Iterable[Any] = (), *, task: str = "tiny-0", max_steps: int = 20,
         params: dict | None = None, harness: str = "test", strict: bool = True, seed: int = 0,
         playbook: str | None = None, attempt: int = 1, judges: Iterable[Any] | None = None) -> PlayResult:
    """Play one episode of `task` with `plugins` as the harness; return what happened.

    `strict=True` (the default here) lets a plugin's exception reach the test;
    `playbook` is the playbook path handed to plugins that use one; `attempt` is the
    attempt number the payloads' `ids.attempt` carry (as a cascade harness's later attempts do);
    `judges` the instrument judges an instrument agent answers roles with (default: the loaded host's).
    """
    played = PlayResult(EpisodeResult("truncated", False, 0))
    hooks = EpisodeHooks([(f"plugin{i}", p) for i, p in enumerate(plugins)])
    config = EpisodeConfig("test-run", f"test:{task}", "test-env", task, harness, type(agent).__name__, seed,
                           max_steps, playbook=playbook, params=dict(params or {}), strict=strict,
                           attempt=attempt)
    bind_env(agent, env)
    if judges is None and callable(getattr(agent, "bind_judges", None)):
        from playground.host.manager import get_host

        judges = get_host().instrument_judges
    bind_judges(agent, judges or ())
    emit = played.trace.append
    with agent_model_shared(getattr(agent, "model", None)), judge_calls_reported(emit):
        played.result = run_episode(env, agent, hooks, config, emit)
    return played
