"""Plays a run's episodes in one process: `EpisodePlayer` keeps one env and one agent across them (built once,
reset by each episode; an episode that errors leaves them behind) and plays each episode's attempts in turn.

Episodes share nothing else in memory (a playbook is shared only through its store), so an executor
(`playground.run.executors`: this process, worker processes, a Ray cluster) can play them anywhere with the run's
`RunWork`; the parent alone writes the run directory's episode records. A detached work (`RunWork.detach`, what a
Ray worker gets) writes nothing under the run directory either: its players keep each trace in memory
(`traces.TraceBuffer`) and hand it back with the record, and the parent writes it (`RunWork.write_traces`) before it
records the episode, so a recorded episode's trace is always there.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.agents.base import bind_env, bind_judges
from playground.core.events import EndEvent, ErrorEvent
from playground.core.records import EpisodeRecord
from playground.host.manager import Host
from playground.run.attempts import AttemptRecorder, merge_attempts, play_attempt
from playground.run.config import RunConfig, episode_seed, playbook_path
from playground.run.costs import attempt_cost
from playground.run.executors import Job
from playground.run.harnesses import resolve_harness, resolve_intervention
from playground.run.paths import url_scheme
from playground.run.rundir import trace_path
from playground.run.traces import TraceBuffer, TraceSink, TraceWriter


class BuiltAgent:
    """The agent the run's check built in this process (`validation.check_config`; the lock read it), handed to the
    first player on the same host that asks, which resets it every episode as it would one it built; later players
    (other threads, or after an episode that errored) build their own. It never leaves the process: pickled (for a
    worker process or a Ray actor) it arrives empty, so a worker builds its own agent."""

    def __init__(self, agent: Any = None, host: Host | None = None) -> None:
        self._agent, self._host, self._lock = agent, host, threading.Lock()

    def take(self, host: Host) -> Any:
        """The agent, once, to a player on the host that built it; else None."""
        with self._lock:
            if host is not self._host:
                return None
            agent, self._agent, self._host = self._agent, None, None
            return agent

    def __reduce__(self) -> tuple:
        return (BuiltAgent, ())


@dataclass(frozen=True)
class RunWork:
    """What every episode of a run shares (the executors' `Work`): picklable, sent once to each worker."""

    config: RunConfig
    run_id: str
    run_path: str
    header_base: dict
    built: BuiltAgent = field(default_factory=BuiltAgent, compare=False, repr=False)
    detached: bool = False  # played where the run directory must not be written: traces kept in memory, handed back

    @property
    def strict(self) -> bool:
        """The run's --strict."""
        return self.config.strict

    def player(self, host: Host) -> EpisodePlayer:
        """A player of this run's episodes in this process."""
        return EpisodePlayer(host, self)

    def failed(self, job: Job, why: str) -> EpisodeRecord:
        """The error record of `job`, whose worker died while playing it: a trace holding its header, the error and
        the end replaces whatever the worker had written."""
        config = self.config
        seed = episode_seed(config.seed, job.task_id, job.trial)
        path = trace_path(Path(self.run_path), job.harness, job.task_id, 1, job.trial)
        attempt = AttemptRecorder(path, self.header_base, config, self.run_id, job.harness, job.task_id, seed,
                                  job.trial, dict(config.params), (), 1)
        attempt.emit(ErrorEvent(message=why))
        attempt.emit(EndEvent(status="error", won=False, steps=0, error=why))
        return attempt.record("error", False, 0, why, None, None)

    def detach(self) -> RunWork:
        """This work for workers that must not write the run directory (Ray actors, maybe on other machines): their
        players keep each attempt's trace in memory (`EpisodePlayer.take_traces`) and make the interventions'
        scratch folders on their own node."""
        return dataclasses.replace(self, detached=True)

    def write_traces(self, traces: list[TraceBuffer]) -> None:
        """Write the traces a detached player kept (`EpisodePlayer.take_traces`) to their files in the run directory,
        each as `TraceWriter` writes it; done by the run's process before it records their episode."""
        for trace in traces:
            trace.write(Path(self.run_path))

    def playbook_files(self, host: Host) -> dict[str, str]:
        """The harnesses whose interventions may keep lessons in a playbook file (SQLite: a path, not a URL such as
        `postgresql://...`), with that file: only processes on this machine can share it. A harness without
        interventions (`base`) keeps none."""
        found = {}
        for harness in self.config.harnesses:
            location = playbook_path(self.config, harness)
            if url_scheme(location) is None and any(resolve_harness(host, harness).attempts):  # () for base
                found[harness] = location
        return found


class EpisodePlayer:
    """Plays a run's episodes one at a time in one process, keeping one env and one agent across them.

    Building them once (an engine's imports, a model, a server) is what makes long-lived
    workers pay off (in the run's own process the first player takes the agent the run's check
    built, `BuiltAgent`, so the agent factory runs once there); every episode still resets both
    (`env.reset(seed, task)`, `agent.reset(task, seed)`) and gets fresh intervention and observer
    objects, so an episode plays the same whichever episodes came before. An episode that errors leaves
    its env and agent behind (the env is closed): the next one gets new ones, so a fault never
    carries over.
    """

    def __init__(self, host: Host, work: RunWork) -> None:
        self.host, self.work = host, work
        self._env: Any = None
        self._agent: Any = None
        self._traces: list[TraceBuffer] = []  # a detached work's traces, kept until `take_traces`

    def play(self, job: Job) -> EpisodeRecord:
        """Play `job` (every attempt of a cascade) and return its record."""
        work = self.work
        return run_one_episode(self.host, work.config, work.run_id, Path(work.run_path), work.header_base,
                               job.harness, job.task_id, job.trial, player=self)

    def instances(self) -> tuple[Any, Any]:
        """The env and agent, built on first use (and after an episode that errored)."""
        config = self.work.config
        if self._env is None:
            agent_spec = self.host.agents.get(config.agent)
            provider = self.host.envs.get(config.env).provider
            env: Any
            with engine_lock(provider):  # building one may touch the engine's shared state too
                env = provider.make(config.task_set, expert=agent_spec.needs_expert)
            if not getattr(provider, "thread_safe", True):
                env = SerializedEnv(env, engine_lock(provider))
            try:
                agent = self.work.built.take(self.host)
                if agent is None:
                    agent = agent_spec.factory(**config.agent_options)
                bind_env(agent, env)
                bind_judges(agent, self.host.instrument_judges)
            except BaseException:
                _close_env(env)
                raise
            self._env, self._agent = env, agent
        return self._env, self._agent

    def open_trace(self, path: Path, header: Any) -> TraceSink:
        """An attempt's trace: a file at `path`, or, for a detached work, lines kept in memory for `take_traces`."""
        if not self.work.detached:
            return TraceWriter(path, header)
        trace = TraceBuffer(path, header)
        self._traces.append(trace)
        return trace

    def take_traces(self) -> list[TraceBuffer]:
        """The traces kept since the last call (a detached work's: the attempts of the episode just played)."""
        traces, self._traces = self._traces, []
        return traces

    def scratch_root(self) -> str | None:
        """None (the interventions' scratch folders go under the run directory), or for a detached work a folder
        of the run's on this node, outside the run directory."""
        if not self.work.detached:
            return None
        return os.path.join(tempfile.gettempdir(), "playground-scratch", self.work.run_id)

    def discard(self) -> None:
        """Close the env and forget both: the next episode builds new ones."""
        env, self._env, self._agent = self._env, None, None
        if env is not None:
            _close_env(env)

    def close(self) -> None:
        """Release the env (at the end of the run, or of the worker)."""
        self.discard()


_engine_locks: dict[type, threading.RLock] = {}


def engine_lock(provider: Any) -> Any:
    """The lock of an env provider whose engine is not thread-safe (`EnvProvider.thread_safe = False`), one per
    provider class in this process; a context that does nothing for a thread-safe one."""
    if getattr(provider, "thread_safe", True):
        return nullcontext()
    return _engine_locks.setdefault(type(provider), threading.RLock())


class SerializedEnv:
    """An env whose engine is not thread-safe: every method is called under its provider's lock, so episodes in
    flight in threads (`--in-flight`) take turns in the engine while their model calls still overlap."""

    def __init__(self, env: Any, lock: Any) -> None:
        self._env, self._lock = env, lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._env, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)
        return locked


def _close_env(env: Any) -> None:
    """Close `env`, ignoring its errors."""
    try:
        env.close()
    except Exception:  # noqa: BLE001 - closing a broken env must not hide the result
        pass


def run_one_episode(host: Host, config: RunConfig, run_id: str, run_path: Path, header_base: dict,
                    harness: str, task_id: str, trial: int = 1, player: EpisodePlayer | None = None) -> EpisodeRecord:
    """Play one trial of a task under a harness (each attempt of a cascade in turn) and return its record.

    The env and agent come from `player` (kept for its next episode); without one, they are built for this
    episode alone and closed after it.
    """
    own = player is None
    if player is None:
        player = EpisodePlayer(host, RunWork(config, run_id, str(run_path), header_base))
    try:
        spec = resolve_harness(host, harness)
        attempts = []
        for number, names in enumerate(spec.attempts, start=1):
            record = play_attempt(host, config, run_id, trace_path(run_path, harness, task_id, number, trial),
                                   header_base, harness, spec, names, task_id, number, trial, player)
            if spec.cascade:
                record = record.model_copy(update={
                    "cost": attempt_cost([resolve_intervention(host, n) for n in names], record)})
            attempts.append(record)
            if record.won if record.verified is None else record.verified:  # the verifier's verdict, else the grade
                break
    finally:
        if own:
            player.close()
    return merge_attempts(attempts, spec) if spec.cascade else attempts[0]
