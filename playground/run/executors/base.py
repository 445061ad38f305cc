"""The executor interface: where a run's episodes are played.

The runner hands an executor the run's `Work` (what every episode shares, picklable) and
the `Job`s still to play; the executor plays them wherever it plays (this process, worker
processes, a Ray cluster) and yields each episode's record as it finishes. The runner
alone writes records to the run directory, so resuming is the same whatever played them.

A worker loads the plugins once (`Host(strict).load()`, as the CLI does), asks the work
for a `Player` and keeps it for every episode it is given: the player keeps one env and
one agent across episodes (see `playground.run.episodes.EpisodePlayer`). A worker that
must not write the run directory (a Ray actor) gets the detached work (`Work.detach`): its
player hands each episode's traces back with the record, and the run writes them. A worker that dies
mid-episode (a crash in an engine, the kernel's OOM killer) costs only that episode: the
executor asks the work for its error record (`Work.failed`) and starts another worker,
unless the run is strict.
"""

from __future__ import annotations

import itertools
import os
import threading
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, Hashable, Iterator, Protocol, Sequence

from playground.core.errors import PlaygroundError
from playground.core.records import EpisodeRecord
from playground.host.manager import Host
from playground.run.progress import StepListener


class ExecutorError(PlaygroundError, ValueError):
    """An executor cannot be used as asked (unknown name, a missing extra, a bad option, an unreachable cluster)."""


@dataclass(frozen=True)
class Job:
    """One episode to play: a task's trial under a harness."""

    harness: str
    task_id: str
    trial: int = 1


class JobQueue:
    """The jobs still to give out, a task's consecutive jobs (its harnesses) kept for one worker.

    A worker's env may keep the task it last loaded (a game file, say), so the runner's
    jobs, which list each task's harnesses one after the other, are handed out by task: a
    worker that took a task's first job gets its other jobs next. Once no task is left, a
    free worker takes over a job another worker was keeping, so no worker waits.
    """

    def __init__(self, jobs: Sequence[Job], halt: threading.Event | None = None) -> None:
        self._tasks: deque[deque[Job]] = deque(
            deque(group) for _, group in itertools.groupby(jobs, key=lambda job: (job.task_id, job.trial)))
        self._kept: dict[Hashable, deque[Job]] = {}
        self._halt = halt  # once set, no job is given out (the queue reads as empty)

    def __bool__(self) -> bool:
        if self._halt is not None and self._halt.is_set():
            return False
        return bool(self._tasks) or any(self._kept.values())

    def next_for(self, worker: Hashable) -> Job:
        """The next job for `worker`: the rest of its task, else a new task, else another worker's kept job."""
        kept = self._kept.get(worker)
        if not kept:
            if self._tasks:
                kept = self._kept[worker] = self._tasks.popleft()
            else:
                kept = max(self._kept.values(), key=len)
        return kept.popleft()

    def give_back(self, worker: Hashable, job: Job | None = None) -> None:
        """Return what `worker` kept (and `job`, when it was never played) to the front, for the next worker."""
        kept = self._kept.pop(worker, deque())
        if job is not None:
            kept.appendleft(job)
        if kept:
            self._tasks.appendleft(kept)


class Player(Protocol):
    """Plays episodes one at a time in one process."""

    def play(self, job: Job) -> EpisodeRecord:
        """Play `job` and return its episode record."""

    def close(self) -> None:
        """Release what the player kept (its env)."""

    def take_traces(self) -> list[Any]:
        """The traces a detached work's player kept in memory since the last call (`Work.detach`), for the run's
        process to write (`Work.write_traces`); empty for a player that writes its traces itself."""


class Work(Protocol):
    """What every episode of a run shares; sent once to each worker."""

    @property
    def strict(self) -> bool:
        """Stop at the first error (the run's --strict): a worker's death stops the run too."""

    def player(self, host: Host) -> Player:
        """A player for this run's episodes, using `host`'s registries."""

    def failed(self, job: Job, why: str) -> EpisodeRecord:
        """The error record (and trace) of `job`, whose worker died while playing it."""

    def detach(self) -> Work:
        """This work for workers that must not write the run directory (on other machines): their players keep each
        episode's traces in memory (`Player.take_traces`) instead of writing them."""

    def write_traces(self, traces: list[Any]) -> None:
        """Write, in the run's process, the traces a detached player handed back, before their episode is recorded."""

    def playbook_files(self, host: Host) -> dict[str, str]:
        """The harnesses that may keep lessons in a playbook file (not a URL), with its path: only workers on this
        machine can share it."""


class Executor(ABC):
    """Plays a run's episodes; `play` yields their records as they finish.

    `workers` is how many worker processes play episodes at once (None: the executor's default); `in_flight` how
    many episodes each keeps playing at once, in threads (their model calls wait on the network together);
    `address` names a cluster for executors that use one.
    """

    name: ClassVar[str]
    default_workers: ClassVar[int | None] = 1

    def __init__(self, workers: int | None = None, address: str | None = None, in_flight: int = 1) -> None:
        for name, value in (("workers", workers), ("in_flight", in_flight)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ExecutorError(f"{name} must be a whole number of at least 1, got {value!r}")
        self.workers = workers if workers is not None else self.default_workers
        self.address = address
        self.in_flight = in_flight
        self.halted = threading.Event()  # set by `stop_handing_out`

    def stop_handing_out(self) -> None:
        """Give out no new job from now on (a run's token budget is spent): the episodes playing finish and their
        records still come out of `play`, which then ends; the jobs not started are not played."""
        self.halted.set()

    @abstractmethod
    def play(self, host: Host, work: Work, jobs: Sequence[Job],
             on_step: StepListener | None = None) -> Iterator[EpisodeRecord]:
        """Play every job and yield each episode's record as it finishes, in any order.

        `on_step` is called, in the thread that iterates, with each step note the episodes report
        (`playground.run.progress`), where the executor can pass them on cheaply; it may be ignored.
        An exception a strict episode raises stops the run: it comes out of this iterator.
        Closing the iterator early stops the workers.
        """

    def describe(self) -> dict[str, Any]:
        """What this executor is, for messages: name, workers, address."""
        return {"executor": self.name, "workers": self.workers, "address": self.address, "in_flight": self.in_flight}


def plugin_environment() -> dict[str, str]:
    """The PLAYGROUND_* variables of this process: a worker that does not inherit them (on a cluster) gets them, so
    it loads the same plugins."""
    return {name: value for name, value in os.environ.items() if name.startswith("PLAYGROUND_")}
