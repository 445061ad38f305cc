"""The local executor: episodes in this process, or in long-lived worker processes.

With one worker the episodes are played here, one after the other, by one player. With
more, that many worker processes are spawned once for the run (clean interpreters: no
forked threads or model handles). Each loads the plugins once, keeps one player (so one
env and one agent) for all its episodes, and is given one episode at a time over its own
pipe, so the parent always knows which episode a worker holds: a worker that dies costs
that episode alone (recorded as an error, a new worker takes its place), or stops the run
when it is strict. A worker says "ready" once it has loaded the plugins; one that dies
before that stops the run and records nothing (the fault is not an episode's).

Nothing a run starts outlives it, even after `kill -9`: a worker's first act is
`die_with_parent()`, and it ignores SIGINT (an interrupt stops the parent, which stops its
workers).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import traceback
from typing import Any, Iterator, Sequence

from playground.core.deadlines import STUCK_EXIT, exit_when_stuck
from playground.core.records import EpisodeRecord
from playground.host.manager import Host
from playground.processes import RUN_PROCESSES_ENV, die_with_parent
from playground.run.executors.base import Executor, ExecutorError, Job, JobQueue, Work
from playground.run.progress import StepListener, StepNote, steps_reported

STOP_GRACE = 10.0  # seconds a worker gets to close its env after the last episode
STUCK_GRACE = 5.0  # seconds past a hook's or an episode's deadline a worker blocked in one C call is given


class LocalExecutor(Executor):
    """Plays episodes on this machine: here with one worker, else in `workers` long-lived processes."""

    name = "local"

    def __init__(self, workers: int | None = None, address: str | None = None, in_flight: int = 1) -> None:
        if address is not None:
            raise ExecutorError(f"--address {address!r} names a Ray cluster; it needs --executor ray")
        super().__init__(workers, None, in_flight)
        if in_flight > 1 and (self.workers or 1) > 1:
            raise ExecutorError("--in-flight with --workers > 1 is not supported yet: choose episodes in flight in "
                                "this process (--in-flight N) or worker processes (--workers N)")

    def play(self, host: Host, work: Work, jobs: Sequence[Job],
             on_step: StepListener | None = None) -> Iterator[EpisodeRecord]:
        """Play `jobs` here (one worker; `in_flight` threads) or in worker processes; yield each record as its
        episode finishes, and hand `on_step` each step note as it comes."""
        if not jobs:
            return
        if self.in_flight > 1 and len(jobs) > 1:
            yield from _Threads(host, work, min(self.in_flight, len(jobs)), on_step, self.halted).play(jobs)
        elif self.workers == 1:
            player = work.player(host)
            try:
                for job in jobs:
                    if self.halted.is_set():
                        break
                    with steps_reported(on_step):
                        record = player.play(job)
                    yield record
            finally:
                player.close()
        else:
            yield from _Pool(host.strict, work, min(self.workers or 1, len(jobs)), on_step, self.halted).play(jobs)


class _Threads:
    """`size` threads in this process, each with its own player (env and agent), taking jobs from one queue.

    Model calls release the GIL while they wait on the network, so one process keeps `size` episodes' requests in
    flight. Records come back to the calling thread, which alone writes them. An exception a strict episode raises
    stops the other threads after their current episode and comes out of `play`; so does an interrupt, after which
    the episodes still playing are left unrecorded (their traces are set aside on resume, as after kill -9). Step
    notes come back the same way, to `on_step` in the calling thread.
    """

    def __init__(self, host: Host, work: Work, size: int, on_step: StepListener | None = None,
                 halt: threading.Event | None = None) -> None:
        self.host, self.work, self.size, self.on_step, self.halt = host, work, size, on_step, halt

    def play(self, jobs: Sequence[Job]) -> Iterator[EpisodeRecord]:
        jobs_left, lock = JobQueue(jobs, self.halt), threading.Lock()
        results: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        stop = threading.Event()

        def step(note: StepNote) -> None:
            results.put(("step", note))

        def worker(number: int) -> None:
            player = None
            try:
                player = self.work.player(self.host)
                while not stop.is_set():
                    with lock:
                        if not jobs_left:
                            break
                        job = jobs_left.next_for(number)
                    with steps_reported(step if self.on_step else None):
                        record = player.play(job)
                    results.put(("record", record))
            except BaseException as exc:  # noqa: BLE001 - the calling thread re-raises it
                results.put(("raised", exc))
            finally:
                if player is not None:
                    player.close()
                results.put(("done", None))

        threads = [threading.Thread(target=worker, args=(n,), name=f"episode-{n}", daemon=True)
                   for n in range(self.size)]
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                kind, value = results.get()
                if kind == "done":
                    running -= 1
                elif kind == "raised":
                    raise value
                elif kind == "step":
                    if self.on_step is not None:
                        self.on_step(value)
                else:
                    yield value
        finally:
            stop.set()


class _Worker:
    """A worker process and the parent's end of its pipe; `job` is the episode it is playing (None: idle), `ready`
    whether it has loaded the plugins and built its player."""

    def __init__(self, context: Any, strict: bool, work: Work, report_steps: bool, siblings: int = 1) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main,
                                       args=(child, strict, os.getpid(), work, report_steps, siblings))
        self.process.start()
        child.close()  # the worker holds the other end: its death reads as end of file here
        self.job: Job | None = None
        self.ready = False

    def give(self, job: Job) -> None:
        self.job = job
        self.conn.send(job)

    def stop(self, now: bool) -> None:
        """Ask an idle worker to close its player and end; end a busy one (or any, when `now`) at once."""
        if not now and self.job is None and self.process.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(STOP_GRACE)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


class _Pool:
    """`size` workers playing a queue of jobs, one at a time each; their step notes go to `on_step`."""

    def __init__(self, strict: bool, work: Work, size: int, on_step: StepListener | None = None,
                 halt: threading.Event | None = None) -> None:
        self.strict, self.work, self.size, self.on_step, self.halt = strict, work, size, on_step, halt
        self.context = multiprocessing.get_context("spawn")

    def play(self, jobs: Sequence[Job]) -> Iterator[EpisodeRecord]:
        queue = JobQueue(jobs, self.halt)
        workers: list[_Worker] = []
        finished = False
        try:
            for _ in range(self.size):
                workers.append(self._give(None, queue))
            while busy := [w for w in workers if w.job is not None]:
                for conn in multiprocessing.connection.wait([w.conn for w in busy]):
                    answered = next(w for w in busy if w.conn is conn)
                    record = self._answer(answered)
                    if record is None:  # the worker said it is ready, or reported a step
                        continue
                    free: _Worker | None = answered
                    if answered.job is not None:  # it died playing the job: another worker takes its place
                        workers.remove(answered)
                        queue.give_back(answered)
                        answered.stop(now=True)
                        free = None
                    if queue:  # the next job first: the worker plays while this process writes the record
                        given = self._give(free, queue)
                        if given is not free:
                            if free is not None:
                                workers.remove(free)
                            workers.append(given)
                    yield record
            finished = True
        finally:
            for worker in workers:
                worker.stop(now=not finished)

    def _give(self, worker: _Worker | None, queue: JobQueue) -> _Worker:
        """Give `worker` its next job from `queue`, or a new worker one when there is none or it is gone (it died
        while idle); return the worker that holds the job."""
        if worker is not None:
            job = queue.next_for(worker)
            try:
                worker.give(job)
                return worker
            except OSError:
                queue.give_back(worker, job)
                worker.stop(now=True)
        worker = _Worker(self.context, self.strict, self.work, self.on_step is not None, self.size)
        worker.give(queue.next_for(worker))
        return worker

    def _answer(self, worker: _Worker) -> EpisodeRecord | None:
        """What `worker` sent: None when it said it is ready or reported a step (passed to `on_step`), else the record
        of its job (its job is then done).
        When the worker died playing the job, the job's error record (its job stays set). A strict run's error, a
        worker that died while starting, and a dead worker in a strict run raise."""
        job = worker.job
        assert job is not None
        try:
            kind, value, where = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(5)
            code = worker.process.exitcode
            if not worker.ready:
                raise ExecutorError(f"a worker process died while loading the plugins (exit code {code}); "
                                    "nothing was recorded for its episode") from None
            why = f"the worker process died (exit code {code}) while playing this episode"
            if code == STUCK_EXIT:
                why = (f"a plugin hook or the episode ran {STUCK_GRACE:g} s past its deadline (--hook-deadline, "
                       "--episode-deadline) blocked in a call that cannot be interrupted: its worker process was "
                       "ended and replaced")
            if self.work.strict:
                raise ExecutorError(f"{job.harness}/{job.task_id} (trial {job.trial}): {why}") from None
            return self.work.failed(job, why)
        if kind == "raised":
            value.add_note(f"raised in worker process {worker.process.pid}:\n{where}")
            raise value
        if kind == "ready":
            worker.ready = True
            return None
        if kind == "step":
            if self.on_step is not None:
                self.on_step(value)
            return None
        worker.job = None
        return value


def _worker_main(conn: Any, strict: bool, parent_pid: int, work: Work, report_steps: bool = False,
                 siblings: int = 1) -> None:
    """A worker: die with the run, load the plugins and build the player (then say "ready"), then play each job the
    parent sends (None: close the player and end), sending each step note as it comes when `report_steps`.
    `siblings` (the pool's size) tells what it builds how many processes share the cores (`cores_per_process`)."""
    die_with_parent(parent_pid)
    exit_when_stuck(STUCK_GRACE)  # a hook blocked in one C call past its deadline ends this process, not the run
    os.environ[RUN_PROCESSES_ENV] = str(siblings)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        player = work.player(Host(strict=strict).load())
    except Exception as exc:  # noqa: BLE001 - the parent re-raises it
        _send_exception(conn, exc)
        return
    try:
        conn.send(("ready", None, ""))
        step = (lambda note: conn.send(("step", note, ""))) if report_steps else None
        while (job := conn.recv()) is not None:
            try:
                with steps_reported(step):
                    record = player.play(job)
                conn.send(("record", record, ""))
            except Exception as exc:  # noqa: BLE001 - the parent decides; it re-raises it
                _send_exception(conn, exc)
    except (EOFError, OSError):
        pass  # the parent is gone
    finally:
        player.close()


def _send_exception(conn: Any, exc: Exception) -> None:
    where = "".join(traceback.format_exception(exc))
    try:
        conn.send(("raised", exc, where))
    except Exception:  # noqa: BLE001 - an exception that cannot be pickled goes as its text
        conn.send(("raised", RuntimeError(f"{type(exc).__name__}: {exc}"), where))
