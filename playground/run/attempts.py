"""Plays one attempt of an episode (a cascade's episode has several) into its trace and record: the attempt's
intervention plugins, the deployment verifier's verdict on what the agent saw, and one record merged from a
cascade's attempts."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Protocol

from playground.agents.judge_calls import judge_calls_reported
from playground.agents.response_cache import cache_use_counted
from playground.agents.structured import agent_model_shared
from playground.core.episode_hooks import EpisodeHooks
from playground.core.errors import MissingExtra, format_exception, traceback_text
from playground.core.events import (
    AttemptVerdictEvent,
    EndEvent,
    ErrorEvent,
    Event,
    HeaderEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    map_strings,
)
from playground.core.loop import EpisodeConfig, run_episode
from playground.core.payloads import AttemptStep, AttemptVerdict, AttemptView, EpisodeIds
from playground.core.records import EpisodeRecord, episode_key, new_record, read_record
from playground.host.manager import Host
from playground.host.registry import GRADE_VERIFIER, HarnessSpec
from playground.run.config import RunConfig, episode_id, episode_seed, playbook_path
from playground.run.harnesses import attempt_verifier, resolve_intervention
from playground.run.judge_quality import merge_judgments
from playground.run.progress import StepCounter
from playground.run.report import EpisodeTally, merge_cache_use, merge_failures, merge_judge_replies
from playground.run.secrets import redact, redact_text
from playground.run.services import build_intervention, episode_services
from playground.run.traces import TraceSink, TraceWriter


class Instances(Protocol):
    """Where an attempt gets its env and agent (`episodes.EpisodePlayer`)."""

    def instances(self) -> tuple[Any, Any]:
        """The env and agent, built on first use."""

    def discard(self) -> None:
        """Close the env and forget both."""

    def open_trace(self, path: Path, header: HeaderEvent) -> TraceSink:
        """Where the attempt's trace goes: a `TraceWriter` at `path`, or a `TraceBuffer` a worker hands back."""

    def scratch_root(self) -> str | None:
        """The folder the interventions' scratch folders go under: None for the run directory, else a folder on the
        worker's node (a worker that must not write the run directory)."""


def merge_attempts(attempts: list[EpisodeRecord], spec: HarnessSpec) -> EpisodeRecord:
    """One record for a cascade: the last attempt's outcome, summed counts and costs, and each attempt."""
    last = attempts[-1].as_json()
    counters = [key for key, value in EpisodeTally().as_record().items() if isinstance(value, int)]
    counters += [key for key in EpisodeTally.OPTIONAL_COUNTERS if any(not a.lacks(key) for a in attempts)]
    merged: dict[str, Any] = {**last}
    for key in ["steps", "seconds", "cost", *counters]:  # every tally counter, so new ones add up too
        merged[key] = sum(getattr(a, key) or 0 for a in attempts)
    merged["interventions"] = dict(sum((Counter(a.interventions) for a in attempts), Counter()))
    merged["failures"] = merge_failures(attempts)
    if any(a.judge_replies is not None for a in attempts):
        merged["judge_replies"] = merge_judge_replies(attempts)
    if any(a.judgments is not None for a in attempts):
        merged["judgments"] = merge_judgments(attempts)
    if (cache := merge_cache_use(attempts)) is not None:
        merged["response_cache"] = cache
    merged["trace"] = attempts[0].trace
    merged["verifier"] = spec.verifier
    merged["cascade_length"] = len(spec.attempts)
    merged["attempts"] = [{"interventions": list(names), "won": a.won, "status": a.status, "steps": a.steps,
                           "cost": a.cost, "trace": a.trace, **({"verified": a.verified} if a.verified is not None
                                                                   else {})}
                          for names, a in zip(spec.attempts, attempts)]
    merged.pop("verified", None)  # per attempt only: the merged record's outcome is the last attempt's grade
    return read_record(merged)


class AttemptRecorder:
    """One attempt's trace and tally: its header written on opening, each event counted as it is written."""

    def __init__(self, path: Path, header_base: dict, config: RunConfig, run_id: str, harness: str, task_id: str,
                 seed: int, trial: int, params: dict, names: tuple[str, ...], number: int,
                 open_trace: Callable[[Path, HeaderEvent], TraceSink] = TraceWriter) -> None:
        self.path, self.harness, self.task_id, self.seed, self.trial = path, harness, task_id, seed, trial
        self.episode = episode_id(run_id, harness, task_id, trial)
        self.tally = EpisodeTally()
        self.steps = StepCounter(episode_key(harness, task_id, trial))  # reports each step to the run's display
        self.cache_use: Counter[str] = Counter()  # response-cache hits and misses of the episode's model calls
        self.seen = SeenByAgent()  # what a deployment verifier may see of the attempt
        self.started = time.perf_counter()
        self.trace = open_trace(path, HeaderEvent.from_fields(
            header_base, task_id=task_id, harness=harness, seed=seed, episode_id=self.episode, params=params,
            interventions=list(names), agent_options=redact(dict(config.agent_options)), max_steps=config.max_steps,
            attempt=number, trial=trial))

    def emit(self, event: Event) -> None:
        """Write one event to the trace and count it (credentials in URLs of its texts masked: an error message
        quotes the endpoint's URL)."""
        if "://" in repr(vars(event)):  # a URL anywhere in it, nested ones too (a lesson event's playbook URL)
            event = map_strings(event, redact_text)
        self.trace.emit(event)
        self.tally.add(event)
        self.seen.add(event)
        self.steps.add(event)

    def record(self, status: str, won: bool, steps: int, error: str | None, score: Any, max_score: Any,
               verified: bool | None = None) -> EpisodeRecord:
        """Close the trace; return the attempt's record (`verified`: a deployment verifier's verdict on it)."""
        self.trace.close()
        return new_record(**{
            "harness": self.harness, "task_id": self.task_id, "episode_id": self.episode, "trial": self.trial,
            "seed": self.seed, "status": status, "won": won, "steps": steps,
            "error": redact_text(error) if error else error,
            "score": score, "max_score": max_score,
            "seconds": round(time.perf_counter() - self.started, 3),
            "trace": str(self.path.relative_to(rundir_root(self.path))),
            **self.tally.as_record(),
            **({"response_cache": {"hits": self.cache_use["hits"], "misses": self.cache_use["misses"]}}
               if self.cache_use else {}),
            "verified": verified,
        })


def play_attempt(host: Host, config: RunConfig, run_id: str, trace_path: Path, header_base: dict, harness: str,
                  spec: HarnessSpec, names: tuple[str, ...], task_id: str, attempt: int, trial: int,
                  player: Instances) -> EpisodeRecord:
    """Play one attempt with the player's env and agent and fresh intervention plugins; return its record."""
    seed = episode_seed(config.seed, task_id, trial)
    params = {**spec.params, **config.params}
    play = AttemptRecorder(trace_path, header_base, config, run_id, harness, task_id, seed, trial, params, names,
                           attempt, player.open_trace)
    playbook = playbook_path(config, harness)
    try:
        try:
            env, agent = player.instances()
            # the plugins' model roles may use the agent's own model (`shared_agent_model`), and the tokens
            # they spend count in the episode's record, apart from the agent's
            with agent_model_shared(getattr(agent, "model", None)), judge_calls_reported(play.emit), \
                    cache_use_counted() as play.cache_use:
                interventions = [(name, build_intervention(
                    resolve_intervention(host, name), {**spec.params_for(name), **config.params},
                    episode_services(run_id, config.env, harness, seed, playbook, str(config.out), name,
                                     scratch_root=player.scratch_root())))
                                 for name in names]
                observers = [(o.name, o.factory()) for o in host.observers]
                hooks = EpisodeHooks(interventions, observers, hook_deadline=config.hook_deadline or None,
                                     labels=host.labels)
                episode_config = EpisodeConfig(run_id, play.episode, config.env, task_id, harness, config.agent,
                                               seed, config.max_steps, playbook, params,
                                               config.strict, config.task_set, attempt,
                                               deadline=config.episode_deadline or None)
                result = run_episode(env, agent, hooks, episode_config, play.emit)
                verdict = (verify_attempt(host, config, spec, params, play, run_id, task_id, attempt)
                           if spec.cascade and spec.verifier != GRADE_VERIFIER and attempt < len(spec.attempts)
                           and result.status != "error"
                           else None)
            status, won, steps, error = result.status, result.won, result.steps, result.error
            score, max_score = result.score, result.max_score
        except Exception as exc:  # building the episode failed: record it, keep the run going
            if config.strict or isinstance(exc, MissingExtra):  # a missing install fails every episode alike
                raise
            player.discard()
            status, won, steps, error = "error", False, 0, f"episode setup failed: {format_exception(exc)}"
            score = max_score = None
            play.emit(ErrorEvent(message=error, traceback=traceback_text(exc)))
            play.emit(EndEvent(status=status, won=won, steps=steps, error=error))
    except BaseException:  # a strict run's error, or an interrupt: the run stops here
        play.trace.close()
        player.discard()
        raise
    if status == "error":
        player.discard()  # whatever failed may have left the env or the agent broken
        verdict = None
    return play.record(status, won, steps, error, score, max_score,
                       verified=verdict.passed if verdict is not None else None)


class SeenByAgent:
    """Collects, from an attempt's trace events, what the agent saw: the goal, each step's action, observation and
    validity (rolled-back steps dropped), and whether its last proposal declared the task done. Never a grade."""

    def __init__(self) -> None:
        self.goal = ""
        self.steps: list[tuple[int, str, str, bool]] = []
        self.finished = False

    def add(self, event: Event) -> None:
        """Take what an event shows the agent."""
        if isinstance(event, ResetEvent):
            self.goal = event.goal
        elif isinstance(event, ProposalEvent):
            self.finished = event.finish
        elif isinstance(event, StepEvent):
            self.steps.append((event.step, event.action, event.observation, event.valid_action))
            self.finished = False
        elif isinstance(event, RollbackEvent):
            self.steps = [s for s in self.steps if s[0] < event.to_step]

    def view(self, ids: EpisodeIds, max_steps: int, remove_grade_text: Callable[[str], str]) -> AttemptView:
        """The frozen view a deployment verifier gets, every text through the env's `remove_grade_text`."""
        return AttemptView(ids, remove_grade_text(self.goal),
                           tuple(AttemptStep(action, remove_grade_text(observation), valid)
                                 for _, action, observation, valid in self.steps),
                           self.finished, max_steps)


def verify_attempt(host: Host, config: RunConfig, spec: HarnessSpec, params: dict, play: AttemptRecorder, run_id: str,
                   task_id: str, attempt: int) -> AttemptVerdict:
    """Ask the cascade's deployment verifier whether the attempt just played passed; write its verdict to the
    trace. A verifier that fails is a failed verification (strict mode: the run stops)."""
    ids = EpisodeIds(run_id, play.episode, config.env, task_id, play.harness, config.task_set, attempt)
    try:
        view = play.seen.view(ids, config.max_steps, host.grade_text_remover(config.env))
        said = attempt_verifier(host, spec, params)(view)
        verdict = said if isinstance(said, AttemptVerdict) else AttemptVerdict(bool(said))
    except Exception as exc:  # noqa: BLE001 - a verifier's fault is a failed verification, not a lost run
        if config.strict:
            raise
        verdict = AttemptVerdict(False, f"the verifier failed: {format_exception(exc)}")
    play.emit(AttemptVerdictEvent(verifier=spec.verifier, passed=verdict.passed, why=verdict.why))
    return verdict


def rundir_root(trace_path: Path) -> Path:
    """The run directory a trace file belongs to (DIR/traces/<harness>/<file>)."""
    return trace_path.parents[2]
