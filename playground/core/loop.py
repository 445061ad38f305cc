"""The episode loop: reset, then propose → decide → step → observe, until the episode ends.

The loop holds no policy. Detection, repair, rollback and verification all come from the
episode's plugins through the runtime hooks; the loop only calls them in order and
reports what happened as typed events (`playground.core.events`) through `emit(event)`.

Steps, budget and rollback. `context.step` is the position on the current branch: a
rollback rewinds it (and the history) to the restored checkpoint's step. The step budget
(`max_steps`) counts env steps actually taken, which no rollback gives back, so an episode
that rolls back still ends; `EpisodeResult.steps` is that count. Rollbacks are bounded
too (`max_rollbacks`, default `max_steps`).

Checkpoints form a tree. Each has an id (`c0`, `c1`, ...), the branch it was taken on and
its parent (the checkpoint before it on that branch's lineage). A rollback restores a
checkpoint of the current lineage and forks a new branch from it: checkpoints taken after
it go on the new branch, and nothing on the old one is overwritten. The restored
checkpoint stands for its step on the new branch, so `want_checkpoint` is not asked again
right after a restore. Retention: at most `max_checkpoints_per_branch` (default 64)
checkpoints per branch; the oldest of the branch goes first, never the episode's first one.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from pydantic import BaseModel, Field

from playground.core.actions import kind_of
from playground.core.checkpoint_tree import Checkpoint, CheckpointTree
from playground.core.deadlines import EpisodeDeadlineExceeded, watch
from playground.core.env import ObservableFailure
from playground.core.episode_hooks import EpisodeHooks, PluginError
from playground.core.errors import PlaygroundError, format_exception, traceback_text
from playground.core.events import (
    CheckpointEvent,
    DetectionEvent,
    EndEvent,
    ErrorEvent,
    Event,
    InterventionEvent,
    LessonEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    VerificationEvent,
)
from playground.core.payloads import (
    AgentView,
    EpisodeEnd,
    EpisodeIds,
    EpisodeStart,
    Proposal,
    SchemaProblem,
    StepContext,
    StepOutcome,
    Turn,
    keep_text,
    to_dict,
)
from playground.core.view_record import ViewRecorder

Emit = Callable[[Event], None]
MAX_REASKS_LIMIT = 100


class LoopParams(BaseModel):
    """The harness parameters the episode loop itself reads, under every harness (`EpisodeConfig`)."""

    max_reasks_per_step: int = Field(default=2, ge=0, le=MAX_REASKS_LIMIT,
                                     description="times an intervention may ask the agent again within one step")
    max_rollbacks: int | None = Field(default=None, ge=0,
                                      description="rollbacks per episode at most (null: --max-steps)")
    max_checkpoints_per_branch: int = Field(default=64, ge=1, description="checkpoints each branch keeps at most")


LOOP_PARAMS = tuple(LoopParams.model_fields)


@dataclass(frozen=True)
class EpisodeConfig:
    """Who and what one episode runs: ids, seed, budget and harness parameters."""

    run_id: str
    episode_id: str
    env: str
    task_id: str
    harness: str
    agent: str
    seed: int
    max_steps: int
    playbook: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    strict: bool = False
    task_set: str = ""
    attempt: int = 1  # the attempt of a cascade harness (1 without a cascade)
    deadline: float | None = None  # seconds of wall time the whole episode may take (None: no limit)

    @property
    def ids(self) -> EpisodeIds:
        """The id record every runtime-hook payload of this episode carries."""
        return EpisodeIds(self.run_id, self.episode_id, self.env, self.task_id, self.harness, self.task_set,
                          self.attempt)

    @property
    def max_reasks(self) -> int:
        """How many times per step an intervention may ask the agent again."""
        return int(self.params.get("max_reasks_per_step", 2))

    @property
    def max_rollbacks(self) -> int:
        """How many rollbacks an episode may make (default: `max_steps`)."""
        return int(self.params.get("max_rollbacks", self.max_steps))

    @property
    def max_checkpoints_per_branch(self) -> int:
        """Retention: how many checkpoints each branch keeps at most (the oldest go first)."""
        return max(1, int(self.params.get("max_checkpoints_per_branch", 64)))


@dataclass
class EpisodeResult:
    """How an episode ended."""

    status: str
    won: bool
    steps: int
    error: str | None = None
    score: float | None = None
    max_score: float | None = None


class EpisodeError(PlaygroundError):
    """The env or the agent failed; the message says which and how (`traceback`: the failure's, where it has one)."""

    traceback: str | None = None


def _call(what: str, fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except PluginError:
        raise
    except Exception as exc:
        failed = EpisodeError(f"{what} failed: {format_exception(exc)}")
        failed.traceback = traceback_text(exc)
        raise failed from exc


def _error_event(exc: PluginError | EpisodeError) -> ErrorEvent:
    """The `error` event of an episode's error: its message, the plugin and hook, and its traceback where it has one."""
    return ErrorEvent(message=str(exc), plugin=getattr(exc, "plugin", None), hook=getattr(exc, "hook", None),
                      traceback=getattr(exc, "traceback", None))


def run_episode(env, agent, hooks: EpisodeHooks, config: EpisodeConfig, emit: Emit) -> EpisodeResult:
    """Play one episode of `config.task_id` with `agent` in `env` under the episode's hooks."""
    state = _EpisodeState()
    try:
        try:
            with watch(config.deadline, EpisodeDeadlineExceeded):
                _play(env, agent, hooks, config, emit, state)
        except EpisodeDeadlineExceeded:
            raise EpisodeError(f"the episode ran past its deadline of {config.deadline:g} s (--episode-deadline)"
                               ) from None
    except (PluginError, EpisodeError) as exc:
        state.status, state.error = "error", str(exc)
        emit(_error_event(exc))
        if config.strict:
            _finish(hooks, config, emit, state)
            raise
    _finish(hooks, config, emit, state)
    return EpisodeResult(state.status, state.won, state.steps, state.error, state.score, state.max_score)


@dataclass
class _EpisodeState:
    status: str = "truncated"
    won: bool = False
    steps: int = 0
    error: str | None = None
    score: float | None = None
    max_score: float | None = None
    started: bool = False
    rollbacks: int = 0
    position: int = 0  # the step on the current branch (rewound by a rollback); `steps` counts env steps taken


def _finish(hooks: EpisodeHooks, config: EpisodeConfig, emit: Emit, state: _EpisodeState) -> None:
    failed: PluginError | None = None
    if state.started and state.status != "error":
        try:
            end = EpisodeEnd(config.ids, state.status, state.steps, state.won, state.error)
            _verdicts(hooks.collect("verify_at_end", end=end), emit)
        except PluginError as exc:
            failed, state.status, state.error = exc, "error", str(exc)
            emit(_error_event(exc))
    if state.started:
        try:
            hooks.call("episode_finished",
                       end=EpisodeEnd(config.ids, state.status, state.steps, state.won, state.error))
        except PluginError as exc:  # the episode's record must not hide it: it ends as an error
            emit(_error_event(exc))
            failed = failed or exc
            state.status, state.error = "error", state.error or str(exc)
    emit(EndEvent(status=state.status, won=state.won, steps=state.steps, error=state.error, score=state.score,
                  max_score=state.max_score))
    if failed is not None and config.strict:
        raise failed


def _play(env, agent, hooks: EpisodeHooks, config: EpisodeConfig, emit: Emit, state: _EpisodeState) -> None:
    observation, info = _call("env reset", env.reset, seed=config.seed, options={"task": config.task_id})
    _call("agent reset", agent.reset, task_id=config.task_id, seed=config.seed)
    goal = str(info.get("goal", ""))
    state.score, state.max_score = info.get("score"), info.get("max_score")
    offered = _admissible(info)
    emit(ResetEvent(goal=goal, observation=observation, max_score=info.get("max_score"),
                    admissible_actions=list(offered) if offered is not None else None))
    state.started = True
    hooks.call("episode_started", start=EpisodeStart(
        config.ids, config.agent, config.seed, goal, observation, config.max_steps, config.playbook, config.params,
        info, _grade_text_remover(env, config, emit)))

    history: list[Turn] = []
    tree = CheckpointTree(config.max_checkpoints_per_branch)
    can_checkpoint = getattr(env, "can_snapshot", False) and hooks.has_checkpoint_hook
    restored = False
    recorder = ViewRecorder(emit)  # what each proposal saw; each long text stored once per episode
    while state.steps < config.max_steps:
        context = StepContext(config.ids, state.position, goal, observation, _admissible(info), tuple(history),
                              info.get("score"), info.get("max_score"),
                              action_kinds=dict(info.get("action_kinds") or {}),
                              open_choices=tuple(info.get("open_choices") or ()),
                              action_format=str(info.get("action_format") or "command"),
                              checkpoints=tree.steps(),
                              admissible_complete=bool(info.get("admissible_complete", True)))
        if can_checkpoint and not restored and hooks.call("want_checkpoint", context=context):
            point, dropped = tree.add(state.position, _call("env snapshot", env.snapshot), len(history), observation,
                                      dict(info))
            emit(CheckpointEvent(step=state.position, id=point.id, branch=point.branch, parent=point.parent,
                                 dropped=dropped or None))
            context = replace(context, checkpoints=tree.steps())
        restored = False

        proposal, decision = _decide(env, agent, hooks, config, emit, context, info, recorder)
        if decision is not None and decision.stop:
            state.status = "stopped"
            return
        if decision is not None and decision.rollback_to is not None:
            point = _rollback(env, decision, tree, config, emit, state)
            del history[point.history_len:]
            observation, info = point.observation, point.info
            state.position, restored = point.step, True
            continue
        if proposal.finish:
            state.status = "stopped"
            return

        observation, reward, terminated, truncated, info = _env_step(env, proposal.action, info)
        state.won = bool(info.get("won", False))
        state.score, state.max_score = info.get("score", state.score), info.get("max_score", state.max_score)
        valid = bool(info.get("valid_action", True))
        failure = info.get("failure")
        kind = kind_of(proposal.action, context.action_kinds)
        history.append(Turn(context.step, proposal.thought, proposal.action, observation, valid, float(reward),
                            info.get("score"), kind, failure))
        state.steps += 1
        state.position += 1
        structure = info.get("structure")
        outcome = StepOutcome(context, proposal, observation, float(reward), bool(terminated), bool(truncated),
                              valid, state.won, info.get("score"), _admissible(info), failure, structure)
        emit(StepEvent(step=context.step, action=proposal.action, observation=observation, reward=float(reward),
                       score=info.get("score"), valid_action=valid, won=state.won, terminated=bool(terminated),
                       truncated=bool(truncated), kind=kind or None, failure=to_dict(failure) if failure else None,
                       structure=to_dict(structure) if structure else None, truth=_ground_truth(env)))
        hooks.call("step_completed", outcome=outcome)
        _verdicts(hooks.collect("verify_recovery", outcome=outcome), emit)
        if terminated:
            state.status = "won" if state.won else "lost"
            return
        if truncated:
            state.status = "truncated"
            return
    state.status = "truncated"


def _env_step(env, action: str, info: dict) -> tuple[str, float, bool, bool, dict]:
    """`env.step(action)`; an `ObservableFailure` becomes an invalid step carrying its failure record."""
    try:
        return _call("env step", env.step, action)
    except EpisodeError as exc:
        failure = exc.__cause__
        if not isinstance(failure, ObservableFailure):
            raise
        before = {key: value for key, value in info.items() if key != "structure"}  # the last step's, not this one's
        after = {**before, **failure.info, "valid_action": False, "failure": failure.failure()}
        return f"{failure.kind}: {failure.message}", 0.0, False, False, after


def _ground_truth(env) -> dict | None:
    """The env's `ground_truth()` for the trace only (never shown to an agent or a plugin); None where it has none."""
    truth = _call("env ground_truth", env.ground_truth) if hasattr(env, "ground_truth") else None
    return to_dict(truth) if truth else None


def _grade_text_remover(env, config: EpisodeConfig, emit: Emit) -> Callable[[str], str]:
    """The env's `remove_grade_text` as plugins get it (`EpisodeStart.remove_grade_text`; `keep_text` for an env
    without one), guarded: where the env's method raises or returns no text, the observation is withheld (""),
    never shown with its grade text, and an `error` event says so (once per episode); with `strict` the fault
    is the episode's error (the plugin that asked ends it, as `_call` ends it for the env's other methods)."""
    method = getattr(env, "remove_grade_text", None)
    if not callable(method):
        return keep_text
    reported: list[bool] = []

    @functools.wraps(method)
    def remove_grade_text(text: str) -> str:
        try:
            cleaned = method(text)
            if not isinstance(cleaned, str):
                raise TypeError(f"returned {type(cleaned).__name__}, not text")
            return cleaned
        except Exception as exc:
            message = f"env remove_grade_text failed: {format_exception(exc)}"
            if config.strict:
                raise EpisodeError(message) from exc
            if not reported:
                reported.append(True)
                emit(ErrorEvent(message=message + " (the observation was withheld from the plugin that asked; "
                                                  "the episode goes on)", fatal=False))
            return ""

    return remove_grade_text


def _verdicts(verdicts: list, emit: Emit) -> None:
    """Record verifiers' verdicts (event `verification`) and the lesson each stored (event `lesson`)."""
    for verdict in verdicts:
        emit(VerificationEvent.from_fields(to_dict(verdict)))
        if verdict.lesson:
            emit(LessonEvent.from_fields(to_dict(verdict.lesson)))


def _rollback(env, decision, tree: CheckpointTree, config: EpisodeConfig, emit: Emit,
              state: _EpisodeState) -> Checkpoint:
    """Restore the checkpoint a decision asks for, fork a branch from it and return it.

    A missing checkpoint (never taken, dropped by retention, or not on the current branch's
    lineage) is the plugin's error.
    """
    state.rollbacks += 1
    if state.rollbacks > config.max_rollbacks:  # a plugin that rolls back forever
        raise PluginError(decision.plugin, "decide_intervention", RuntimeError("too many rollbacks"))
    point = tree.at(decision.rollback_to)
    if point is None:
        raise PluginError(decision.plugin, "decide_intervention", LookupError(
            f"rollback to step {decision.rollback_to}, which has no checkpoint (checkpoints: {list(tree.steps())})"))
    _call("env restore", env.restore, point.snapshot)
    branch = tree.fork(point)
    emit(RollbackEvent(to_step=decision.rollback_to, restored=True, checkpoint=point.id, branch=branch,
                       from_step=state.position, truth=_ground_truth(env)))
    return point


def _decide(env, agent, hooks: EpisodeHooks, config: EpisodeConfig, emit: Emit, context: StepContext, info: dict,
            recorder: ViewRecorder):
    """Ask the agent, check its action against the env's schema, run detectors and the decision hook,
    re-asking while plugins say so."""
    message = None
    extras = {key: info[key] for key in ("expert_plan", "action_kinds", "action_format") if key in info}
    notes = tuple(str(n) for n in hooks.collect("agent_notes", context=context))
    shown = _shown_actions(hooks, context)
    # a view narrowed by `agent_actions` also records the env's whole list (what rebuilds and checks the state);
    # a list that is a cut of what the env accepts is recorded as such (only then)
    listed: dict[str, Any] = ({"env_admissible_actions": list(context.admissible_actions)}
                              if context.admissible_actions is not None and shown != context.admissible_actions else {})
    if not context.admissible_complete:
        listed["admissible_complete"] = False
    attempt = 0
    while True:
        view = AgentView(context.goal, context.observation, context.history, shown,
                         context.step, message, notes, extras)
        started = time.perf_counter()
        proposal: Proposal = _call("agent propose", agent.propose, view)
        seconds = round(time.perf_counter() - started, 6)
        problems = _schema_problems(env, proposal)
        emit(ProposalEvent(step=context.step, attempt=attempt, thought=proposal.thought, action=proposal.action,
                           finish=proposal.finish, prompt_tokens=proposal.prompt_tokens,
                           completion_tokens=proposal.completion_tokens,
                           intervention_chars=sum(map(len, notes)) + (len(message.text) if message else 0),
                           seconds=seconds, **recorder.fields(view, proposal), **listed,
                           schema_problems=[to_dict(p) for p in problems] if problems is not None else None,
                           injected=to_dict(proposal.injected) if proposal.injected is not None else None))
        proposal = replace(proposal, injected=None)  # ground truth for measurement only: never shown to a plugin
        context = replace(context, attempt=attempt, schema_problems=problems)
        detections = hooks.collect("detect_failures", context=context, proposal=proposal)
        for detection in detections:
            emit(DetectionEvent.from_fields(to_dict(detection), step=context.step, attempt=attempt))
        decision = hooks.call("decide_intervention", context=context, proposal=proposal, detections=detections)
        if decision is None:
            return proposal, None
        emit(InterventionEvent.from_fields(to_dict(decision), step=context.step, attempt=attempt))
        if decision.stop or decision.rollback_to is not None:
            return proposal, decision
        if decision.action is not None:
            return replace(proposal, action=decision.action, finish=False), decision
        if decision.message is None or attempt >= config.max_reasks:
            return proposal, decision
        message = decision.message
        attempt += 1


def _schema_problems(env, proposal: Proposal) -> tuple[SchemaProblem, ...] | None:
    """The env's schema check of the proposed action (`TextEnv.check_action`); None without one or on a finish."""
    check = getattr(env, "check_action", None)
    if proposal.finish or not callable(check):
        return None
    problems = _call("env check_action", check, proposal.action)
    if problems is None:
        return None
    if not isinstance(problems, (list, tuple)) or not all(isinstance(p, SchemaProblem) for p in problems):
        raise EpisodeError(f"env check_action returned {problems!r:.200}; expected a list of SchemaProblem or None")
    return tuple(problems)


def _shown_actions(hooks: EpisodeHooks, context: StepContext) -> tuple[str, ...] | None:
    """The admissible actions the agent is shown: the env's list, or the admissible part of `agent_actions`'s."""
    if context.admissible_actions is None or not hooks.has_actions_hook:
        return context.admissible_actions
    chosen = hooks.call("agent_actions", context=context)
    if chosen is None:
        return context.admissible_actions
    if isinstance(chosen, str):
        chosen = (chosen,)
    admissible = set(context.admissible_actions)
    shown = tuple(dict.fromkeys(str(a) for a in chosen if a in admissible))
    if not shown:
        raise PluginError(hooks.first_impl("agent_actions"), "agent_actions",
                          ValueError(f"none of the {len(tuple(chosen))} actions returned is admissible"))
    return shown


def _admissible(info: Mapping[str, Any]) -> tuple[str, ...] | None:
    actions = info.get("admissible_actions")
    return tuple(actions) if actions is not None else None
