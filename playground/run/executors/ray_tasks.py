"""The Ray executor: episodes as Ray actor tasks, on a private local Ray or an existing cluster (the `ray` extra).

Each worker is a Ray actor (one CPU) that loads the plugins once, with this process's
PLAYGROUND_* variables, and keeps one player, so one env and one agent, for every episode it
is given. The executor gives each actor one episode at a time and yields each record as it
comes back; the run alone writes the run directory's records, so a Ray run resumes like a
local one. Before the first episode every actor checks that it sees the run directory
(`Work.problem_here`): on a cluster, traces and playbooks are written by the workers, so
`--out` (and `--playbook`) must be on a filesystem every node mounts at the same path.

Without an address the run starts a private Ray on 127.0.0.1 with `workers` CPUs, no
dashboard, and shuts it down at the end. Its processes carry a mark in their environment
and a `playground.processes.Reaper` kills what is left of them when the run ends, even by
`kill -9` (Ray's own agents otherwise linger for a minute after their raylet is killed).
With an address (`auto`, `HOST:PORT`, `ray://HOST:10001`) the run joins that cluster and
leaves it running; its actors end with the run (Ray ends the actors of a driver that is
gone).
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any, Iterator, Sequence

from playground.host.manager import Host
from playground.processes import Reaper
from playground.run.executors.base import Executor, ExecutorError, Job, JobQueue, Work, plugin_environment
from playground.run.progress import StepListener

INSTALL_HINT = "pip install 'playground[ray]' (or, in a checkout, pip install -e '.[ray]')"
MARK = "PLAYGROUND_RAY_RUN"  # in the environment of every process of a private local Ray
LOCAL_OBJECT_STORE = 256 * 1024**2  # bytes: records are small; the default (30% of memory) is far too much
STARTUP_HINT = ("Ray's raylet gives its agents about 15 s to start, which a busy machine may not meet: try again, "
                "or start Ray yourself (`ray start --head`) and pass --address")


class RayExecutor(Executor):
    """Plays episodes as tasks of `workers` Ray actors (None: one per CPU of the cluster)."""

    name = "ray"
    default_workers = None

    def __init__(self, workers: int | None = None, address: str | None = None, in_flight: int = 1) -> None:
        super().__init__(workers, address, in_flight)
        if in_flight != 1:
            raise ExecutorError("--in-flight is not supported with --executor ray yet; each Ray worker plays one "
                                "episode at a time (use --workers)")
        if address is not None and not address.strip():
            raise ExecutorError("--address is empty; name a Ray cluster (auto, HOST:PORT or ray://HOST:10001)")
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ExecutorError(f"--executor ray needs the 'ray' extra ({exc}): {INSTALL_HINT}") from None

    def play(self, host: Host, work: Work, jobs: Sequence[Job], on_step: StepListener | None = None) -> Iterator[dict]:
        """Play `jobs` on Ray actors; yield each record as its episode finishes (progress moves per episode: step
        notes are not passed back from the actors, `on_step` is not called)."""
        if not jobs:
            return
        import ray

        session = _Session(self.address, self.workers or os.cpu_count() or 1)
        try:
            size = min(self.workers or session.cpus(), len(jobs))
            yield from _Actors(ray, work, host.strict, size).play(jobs)
        finally:
            session.close()


class _Session:
    """This run's connection to Ray: a private local Ray (started and shut down here) or an existing cluster."""

    def __init__(self, address: str | None, cpus: int) -> None:
        import ray

        self.ray = ray
        self.reaper: Reaper | None = None
        self.joined = ray.is_initialized()  # a caller's own Ray session is used as it is, and left open
        if self.joined:
            return
        quiet: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                 "configure_logging": False}
        try:
            if address is None:
                os.environ[MARK] = uuid.uuid4().hex
                self.reaper = Reaper(MARK, os.environ[MARK])
                ray.init(address="local", num_cpus=cpus, _node_ip_address="127.0.0.1",
                         object_store_memory=LOCAL_OBJECT_STORE, **quiet)
            else:
                ray.init(address=address, **quiet)
        except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
            self.close()
            where = f"join the Ray cluster at {address}" if address else "start a local Ray"
            hint = "" if address else f" ({STARTUP_HINT})"
            raise ExecutorError(f"cannot {where}: {type(exc).__name__}: {exc}{hint}") from None

    def cpus(self) -> int:
        """The cluster's CPUs (at least 1)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        """Leave Ray (shutting down a private local one) and sweep what is left of a private one."""
        if not self.joined and self.ray.is_initialized():
            self.ray.shutdown()
        if self.reaper is not None:
            self.reaper.stop()
            os.environ.pop(MARK, None)


class EpisodeActor:
    """A Ray worker: the run's plugins loaded once, one player kept across episodes."""

    def __init__(self, work: Work, strict: bool, environment: dict[str, str]) -> None:
        os.environ.update(environment)  # on a cluster the worker does not inherit the run's PLAYGROUND_* variables
        self.work, self.strict = work, strict
        self.player: Any = None

    def ready(self) -> str | None:
        """Load the plugins and build the player; None, or why this worker cannot play the run (naming the node)."""
        problem = self.work.problem_here()
        if problem is not None:
            import ray

            return f"Ray worker on node {ray.util.get_node_ip_address()}: {problem}"
        self.player = self.work.player(Host(strict=self.strict).load())
        return None

    def play(self, job: Job) -> dict:
        """Play one episode and return its record."""
        return self.player.play(job)

    def close(self) -> None:
        """Release the player's env."""
        if self.player is not None:
            self.player.close()
            self.player = None


class _Actors:
    """`size` actors playing a queue of jobs, one at a time each; a dead actor's episode is recorded as an error and
    another actor takes its place (a strict run stops instead)."""

    def __init__(self, ray: Any, work: Work, strict: bool, size: int) -> None:
        self.ray, self.work, self.strict, self.size = ray, work, strict, size
        self.remote_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(EpisodeActor)

    def _start(self) -> Any:
        return self.remote_class.remote(self.work, self.strict, plugin_environment())

    def play(self, jobs: Sequence[Job]) -> Iterator[dict]:
        ray = self.ray
        queue = JobQueue(jobs)
        actors = [self._start() for _ in range(self.size)]
        running: dict[Any, tuple[Any, Job]] = {}
        try:
            self._check(actors)
            for actor in actors:
                self._give(running, actor, queue.next_for(actor))
            while running:
                [ready], _ = ray.wait(list(running), num_returns=1)
                actor, job = running.pop(ready)
                record, died = self._answer(ready, job)
                if died:
                    actors.remove(actor)
                    queue.give_back(actor)
                    ray.kill(actor)
                    if queue:  # another actor takes its place
                        actor = self._start()
                        actors.append(actor)
                        self._check([actor])
                if queue:  # the next job first: the actor plays while the run writes the record
                    self._give(running, actor, queue.next_for(actor))
                yield record
            ray.get([actor.close.remote() for actor in actors])
        finally:
            for actor in actors:
                ray.kill(actor)

    @staticmethod
    def _give(running: dict[Any, tuple[Any, Job]], actor: Any, job: Job) -> None:
        running[actor.play.remote(job)] = (actor, job)

    def _check(self, actors: list[Any]) -> None:
        """Every actor starts, loads the plugins and sees the run directory; else ExecutorError naming the problems
        (nothing is recorded)."""
        try:
            problems = self.ray.get([actor.ready.remote() for actor in actors])
        except self.ray.exceptions.RayTaskError as exc:  # loading the plugins raised
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except self.ray.exceptions.RayError as exc:
            raise ExecutorError(f"a Ray worker died while starting: {exc}") from None
        problems = sorted({problem for problem in problems if problem})
        if problems:
            raise ExecutorError("; ".join(problems))

    def _answer(self, ref: Any, job: Job) -> tuple[dict, bool]:
        """The record of `job`, and False; or, when its actor died, its error record and True. A strict run's
        error, and a dead actor in a strict run, raise."""
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref), False
        except exceptions.RayTaskError as exc:  # the episode raised: a strict run's error, or a bug
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except exceptions.RayActorError as exc:
            why = f"the Ray worker died while playing this episode ({type(exc).__name__})"
            if self.work.strict:
                raise ExecutorError(f"{job.harness}/{job.task_id} (trial {job.trial}): {why}: {exc}") from None
            return self.work.failed(job, why), True
