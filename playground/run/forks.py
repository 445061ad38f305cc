"""Forks: rebuild the exact state before a recorded action and play on from it.

A fork point is a position T on an episode's surviving path: the actions the env kept
(an action undone by a rollback is not on it), in order. Without rollbacks T is the step
number. The state before action T is rebuilt by resetting a fresh env with the trace
header's env, task set, task and seed and sending the recorded prefix of actions; every
rebuilt observation must equal the recorded one, and the admissible actions at T must
equal the env's list recorded there (the ones the agent was shown, or, where a plugin
narrowed the view through `agent_actions`, the whole list the proposal event records as
`env_admissible_actions`); `ForkError` otherwise. Replaying from reset works for
every env (envs are deterministic by task and seed); it is used even where the env can
snapshot, since a snapshot from another process cannot be trusted to hold the same state.

From the rebuilt state a fork plays on under a given agent (with a given seed, and given
options), optionally forcing the action at T, with no interventions, for the rest of the
original step budget, and writes its own trace: a header naming the source trace, the
fork point and the restored-state check, then the usual loop events, numbered from T.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from playground.agents.base import bind_env
from playground.core.actions import kind_of
from playground.core.episode_hooks import EpisodeHooks
from playground.core.errors import PlaygroundError
from playground.core.events import (
    CheckpointEvent,
    DetectionEvent,
    EndEvent,
    Event,
    HeaderEvent,
    InterventionEvent,
    PromptEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    shifted,
)
from playground.core.loop import EpisodeConfig, run_episode
from playground.core.payloads import AgentView, EpisodeIds, Proposal, StepContext, Turn
from playground.core.view_record import resolve_view
from playground.host.manager import Host
from playground.run.files import confined, safe_file_name
from playground.run.rundir import RunDirError, load_records, record_trace
from playground.run.traces import TraceWriter, read_events


class ForkError(PlaygroundError):
    """A fork cannot be made: the trace lacks what is needed, or the rebuilt state differs from the recorded one."""


@dataclass(frozen=True)
class ForkResult:
    """How a fork played (`fork`): its outcome, its trace, where it started and the check that the rebuilt state
    matched the recorded one (`restored`: `observation_equal`, `replayed_actions`)."""

    status: str
    won: bool
    steps: int
    error: str | None
    score: float | None
    trace: str
    fork_point: int
    action: str | None
    finish: bool
    agent: str
    seed: int
    restored: dict[str, Any]
    start_observation: str  # the observation the fork started from (arms of one point must share it)
    seconds: float

    def as_json(self) -> dict[str, Any]:
        """The result as JSON, without the start observation (what `playground fork` prints)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if name != "start_observation"}


@dataclass
class RecordedStep:
    """One action on an episode's surviving path, with the proposals and detections of its step."""

    position: int  # T: actions on the surviving path before this one
    step: int  # the step number the trace gives it
    action: str
    thought: str
    observation_before: str
    observation: str
    valid: bool
    reward: float = 0.0
    score: float | None = None
    kind: str = ""  # the env's kind for the action, where the trace records one
    proposals: list[ProposalEvent] = field(default_factory=list)
    detections: list[DetectionEvent] = field(default_factory=list)
    interventions: list[InterventionEvent] = field(default_factory=list)

    @property
    def admissible(self) -> list[str] | None:
        """The admissible actions the agent was shown before this action (None where not recorded)."""
        for proposal in reversed(self.proposals):
            if proposal.admissible_actions is not None:
                return list(proposal.admissible_actions)
        return None

    @property
    def env_admissible(self) -> list[str] | None:
        """The env's admissible actions before this action: recorded apart where a plugin narrowed the agent's
        view (`agent_actions`), else the ones the agent was shown (None where not recorded)."""
        for proposal in reversed(self.proposals):
            if proposal.env_admissible_actions is not None:
                return list(proposal.env_admissible_actions)
        return self.admissible


@dataclass
class EpisodeTrace:
    """An episode read from its trace: header, reset, the surviving path of actions, and how it ended."""

    path: Path
    header: HeaderEvent
    reset: ResetEvent
    steps: list[RecordedStep]
    end: EndEvent | None  # None where the trace stops before the episode's end
    texts: dict[str, str]  # hash -> text of the `prompt` events
    tail: RecordedStep | None  # proposals after the last action (a finish, a stop), as a step with no action
    events: list[Event]

    @property
    def status(self) -> str:
        """How the episode ended ("error" where the trace has no end)."""
        return self.end.status if self.end is not None else "error"

    def observation_before(self, position: int) -> str:
        """The observation the agent saw before action `position` (position len(steps) is after the last)."""
        if position < 0 or position > len(self.steps):
            raise ForkError(f"{self.path}: no fork point {position}; the surviving path has {len(self.steps)} "
                            f"action(s), so choose 0..{len(self.steps)}")
        if position == 0:
            return self.reset.observation
        return self.steps[position - 1].observation

    def at(self, position: int) -> RecordedStep | None:
        """The recorded step at `position`, or the tail (proposals with no action) at len(steps)."""
        self.observation_before(position)
        return self.steps[position] if position < len(self.steps) else self.tail

    def view(self, proposal: ProposalEvent) -> dict:
        """A proposal's view with its notes and prompt messages resolved to text."""
        return resolve_view(proposal, self.texts)


def load_episode(path: str | Path) -> EpisodeTrace:
    """Read an episode's trace into its surviving path (rollbacks applied); ForkError when it is not an episode."""
    path = Path(path)
    events = read_events(path)
    header = events[0] if events else None
    if not isinstance(header, HeaderEvent):
        raise ForkError(f"{path}: not an episode trace (no header)")
    reset = next((e for e in events if isinstance(e, ResetEvent)), None)
    if reset is None:
        raise ForkError(f"{path}: the episode never started (no reset event)")
    texts = {e.hash: e.text for e in events if isinstance(e, PromptEvent)}
    steps: list[RecordedStep] = []
    checkpoints: dict[int, int] = {}
    pending = _Pending()
    end: EndEvent | None = None
    for event in events:
        if isinstance(event, ProposalEvent):
            pending.proposals.append(event)
        elif isinstance(event, DetectionEvent):
            pending.detections.append(event)
        elif isinstance(event, InterventionEvent):
            pending.interventions.append(event)
        elif isinstance(event, CheckpointEvent):
            checkpoints[event.step] = len(steps)
        elif isinstance(event, RollbackEvent):
            del steps[checkpoints.get(event.to_step, len(steps)):]
            pending = _Pending()
        elif isinstance(event, StepEvent):
            before = steps[-1].observation if steps else reset.observation
            proposals = pending.proposals
            steps.append(RecordedStep(len(steps), event.step, event.action, proposals[-1].thought if proposals else "",
                                      before, event.observation, event.valid_action, event.reward, event.score,
                                      event.kind or "", proposals, pending.detections, pending.interventions))
            pending = _Pending()
        elif isinstance(event, EndEvent):
            end = event
    tail = None
    if pending.proposals:
        before = steps[-1].observation if steps else reset.observation
        last = pending.proposals[-1]
        tail = RecordedStep(len(steps), last.step, "", last.thought, before, "", True, proposals=pending.proposals,
                            detections=pending.detections, interventions=pending.interventions)
    return EpisodeTrace(path, header, reset, steps, end, texts, tail, events)


@dataclass
class _Pending:
    """The proposals, detections and interventions read since the last action."""

    proposals: list[ProposalEvent] = field(default_factory=list)
    detections: list[DetectionEvent] = field(default_factory=list)
    interventions: list[InterventionEvent] = field(default_factory=list)


def find_episode(run_dir: str | Path, episode: str) -> Path:
    """The trace of `episode` in a run directory: an episode key (`HARNESS/TASK`) or a trace path inside it."""
    run_dir = Path(run_dir)
    try:
        records = load_records(run_dir)
    except (RunDirError, OSError):
        records = []
    for record in records:
        if record.key == episode:
            return record_trace(run_dir, record)
    candidate = confined(run_dir, episode, what=f"episode {episode!r}")
    if candidate.is_file():
        return candidate
    keys = ", ".join(sorted(record.key for record in records)[:10])
    raise ForkError(f"{run_dir}: no episode {episode!r} (an episode key such as {keys or 'HARNESS/TASK'}, "
                    "or a trace path inside the run directory)")


def _require(header: HeaderEvent, path: Path, *keys: str) -> None:
    missing = [key for key in keys if getattr(header, key) in (None, "")]
    if missing:
        raise ForkError(f"{path}: the trace header lacks {', '.join(missing)}, needed to rebuild the episode")


def rebuild(host: Host, episode: EpisodeTrace, position: int, *, expert: bool = False):
    """Return (env, observation, info): a fresh env in the state just before action `position`.

    Every observation on the way must equal the recorded one, and the admissible actions at
    `position` the env's list recorded there (the one the agent was shown, or the whole list
    where a plugin narrowed the view); ForkError names the first difference.
    """
    header = episode.header
    _require(header, episode.path, "env", "task_set", "task_id", "seed")
    expected = episode.observation_before(position)
    try:
        provider = host.envs.get(header.env).provider
    except KeyError as exc:
        raise ForkError(f"{episode.path}: {exc.args[0]}") from None
    env = provider.make(header.task_set, expert=expert)
    try:
        observation, info = env.reset(seed=header.seed, options={"task": header.task_id})
        if observation != episode.reset.observation:
            raise ForkError(_differs(episode.path, "reset", episode.reset.observation, observation))
        for recorded in episode.steps[:position]:
            observation, _, _, _, info = env.step(recorded.action)
            if observation != recorded.observation:
                raise ForkError(_differs(episode.path, f"action {recorded.position} ({recorded.action!r})",
                                         recorded.observation, observation))
        if observation != expected:
            raise ForkError(_differs(episode.path, f"fork point {position}", expected, observation))
        at = episode.at(position)
        shown = at.env_admissible if at is not None else None
        actions = info.get("admissible_actions")
        if shown is not None and actions is not None and list(actions) != shown:
            raise ForkError(f"{episode.path}: fork point {position}: the rebuilt admissible actions differ from the "
                            f"recorded ones ({len(actions)} vs {len(shown)})")
    except BaseException:
        env.close()
        raise
    return env, observation, info


def replay_contexts(host: Host, episode: EpisodeTrace, *, expert: bool = False) -> list[StepContext]:
    """The `StepContext` the loop built before each action on the surviving path, and before the tail
    (proposals with no action, e.g. a stop) where there is one, rebuilt in one replay from reset.

    Each context carries what the loop handed the plugins: the env's admissible actions (and whether they
    are complete), action kinds, open choices and action format, and the history so far (not the env's
    check of the recorded proposals, `schema_problems`: it is None). Every rebuilt observation must equal the
    recorded one (`ForkError` otherwise, as in `rebuild`).
    """
    header = episode.header
    _require(header, episode.path, "env", "task_set", "task_id", "seed")
    try:
        provider = host.envs.get(header.env).provider
    except KeyError as exc:
        raise ForkError(f"{episode.path}: {exc.args[0]}") from None
    ids = EpisodeIds(header.run_id or "", header.episode_id or "", header.env, header.task_id, header.harness,
                     header.task_set)
    env = provider.make(header.task_set, expert=expert)
    contexts: list[StepContext] = []
    try:
        observation, info = env.reset(seed=header.seed, options={"task": header.task_id})
        if observation != episode.reset.observation:
            raise ForkError(_differs(episode.path, "reset", episode.reset.observation, observation))
        goal = str(info.get("goal", ""))
        history: list[Turn] = []
        for recorded in [*episode.steps, *([episode.tail] if episode.tail is not None else [])]:
            listed = info.get("admissible_actions")
            admissible = tuple(listed) if listed is not None else None
            context = StepContext(ids, recorded.step, goal, observation, admissible,
                                  tuple(history), info.get("score"), info.get("max_score"),
                                  action_kinds=dict(info.get("action_kinds") or {}),
                                  open_choices=tuple(info.get("open_choices") or ()),
                                  action_format=str(info.get("action_format") or "command"),
                                  admissible_complete=bool(info.get("admissible_complete", True)))
            contexts.append(context)
            if recorded is episode.tail:
                break
            observation, reward, _, _, info = env.step(recorded.action)
            if observation != recorded.observation:
                raise ForkError(_differs(episode.path, f"action {recorded.position} ({recorded.action!r})",
                                         recorded.observation, observation))
            history.append(Turn(recorded.step, recorded.thought, recorded.action, observation, recorded.valid,
                                float(reward), info.get("score"), kind_of(recorded.action, context.action_kinds),
                                info.get("failure")))
    finally:
        env.close()
    return contexts


def _differs(path: Path, where: str, recorded: Any, rebuilt: Any) -> str:
    return (f"{path}: {where}: the rebuilt observation differs from the recorded one "
            f"(recorded {str(recorded)[:120]!r}, rebuilt {str(rebuilt)[:120]!r}); the env is not deterministic "
            "for this task and seed, or its version changed")


class _ForkEnv:
    """The env of a fork: `reset()` hands back the rebuilt state; everything else goes to the real env."""

    def __init__(self, env: Any, observation: str, info: dict) -> None:
        self.env, self.start = env, (observation, info)
        self.can_snapshot = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        return self.start

    def step(self, action: str):
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class _ForkAgent:
    """Wraps the continuation agent: sees the recorded prefix as history, proposes `action` first if given."""

    def __init__(self, agent: Any, prefix: tuple[Turn, ...], action: str | None, seed: int,
                 finish: bool = False) -> None:
        self.agent, self.prefix, self.action, self.seed, self.finish = agent, prefix, action, seed, finish
        self.forced = action is not None or finish

    def bind_env(self, env: Any) -> None:
        bind_env(self.agent, getattr(env, "env", env))

    def reset(self, task_id: str, seed: int) -> None:
        self.agent.reset(task_id, self.seed)
        self.forced = self.action is not None or self.finish

    def propose(self, view: AgentView) -> Proposal:
        shifted = AgentView(view.goal, view.observation, self.prefix + view.history, view.admissible_actions,
                            view.step + len(self.prefix), view.message, view.notes, view.extras)
        if self.forced:
            self.forced = False
            if self.finish:
                return Proposal(thought="fork: the given finish", action="", finish=True)
            return Proposal(thought="fork: the given action", action=str(self.action))
        return self.agent.propose(shifted)


def prefix_turns(episode: EpisodeTrace, position: int) -> tuple[Turn, ...]:
    """The recorded actions before `position` as the history an agent is shown."""
    return tuple(Turn(s.position, s.thought, s.action, s.observation, s.valid, s.reward, s.score, s.kind)
                 for s in episode.steps[:position])


def fork(host: Host, episode: EpisodeTrace, position: int, out: str | Path, *, agent: str = "expert",
         agent_options: dict | None = None, action: str | None = None, seed: int | None = None,
         max_steps: int | None = None, lineage: dict | None = None, finish: bool = False,
         observers: Sequence[tuple[str, Any]] = ()) -> ForkResult:
    """Rebuild the state before action `position`, play on under `agent` (first `action`, or a finish with
    `finish=True`, if given), write the fork's trace to `out`; return the fork's record (status, won, steps,
    trace, the restored-state check).

    `observers` are (name, object) pairs watching the fork through the observer hooks (`episode_started`,
    `step_completed`, `episode_finished`); they cannot intervene (one implementing a decision hook is a ForkError), so
    the fork still plays with no interventions. Their step numbers start at 0 at the fork point."""
    try:
        spec = host.agents.get(agent)
        hooks = EpisodeHooks(observers=observers)
    except (KeyError, ValueError) as exc:
        raise ForkError(exc.args[0]) from None
    header = episode.header
    seed = (header.seed or 0) if seed is None else int(seed)
    budget = int(max_steps if max_steps is not None else header.max_steps or 40) - position
    if budget < 1:
        raise ForkError(f"{episode.path}: no step budget left after fork point {position}")
    env, observation, info = rebuild(host, episode, position, expert=spec.needs_expert)
    restored = {"observation_equal": True, "observation": observation, "replayed_actions": position}
    out = Path(out)
    fork_header = HeaderEvent(env=header.env, task_set=header.task_set, version=header.version,
                              task_id=header.task_id, split=header.split, run_id=header.run_id,
                              source_trace=str(episode.path), source_episode=header.episode_id, fork_point=position,
                              action=action, finish=finish, agent=agent, agent_options=dict(agent_options or {}),
                              seed=seed, max_steps=budget + position, harness="fork", interventions=[],
                              observers=[name for name, _ in observers], params={}, restored=restored,
                              lineage=dict(lineage or {}))
    trace = TraceWriter(out, fork_header)

    def emit(event: Event) -> None:
        trace.emit(shifted(event, position))

    started = time.perf_counter()
    try:
        inner = spec.factory(**(agent_options or {}))
        wrapped = _ForkAgent(inner, prefix_turns(episode, position), action, seed, finish)
        fork_env = _ForkEnv(env, observation, info)
        bind_env(wrapped, fork_env)
        config = EpisodeConfig(header.run_id or "", f"{header.episode_id or ''}:fork{position}", header.env,
                               header.task_id, "fork", agent, seed, budget, task_set=header.task_set)
        result = run_episode(fork_env, wrapped, hooks, config, emit)
    finally:
        trace.close()
        env.close()
    return ForkResult(result.status, result.won, result.steps, result.error, result.score, str(out), position,
                      action, finish, agent, seed, {k: v for k, v in restored.items() if k != "observation"},
                      observation, round(time.perf_counter() - started, 3))


def fork_path(run_dir: str | Path, episode: EpisodeTrace, position: int, name: str) -> Path:
    """Where a fork's trace goes: RUN_DIR/forks/<harness>/<task>.t<T>.<name>.jsonl (kept inside RUN_DIR)."""
    header = episode.header
    relative = Path("forks") / safe_file_name(header.harness or "episode") / (
        f"{safe_file_name(header.task_id or 'task')}.t{position}.{safe_file_name(name)}.jsonl")
    return confined(run_dir, relative, what="fork trace")
