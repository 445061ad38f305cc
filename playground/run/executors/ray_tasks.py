"""The Ray executor: episodes as Ray actor tasks, on a private local Ray or an existing cluster (the `ray` extra).

Each worker is a Ray actor (one CPU) that loads the plugins once, with this process's
PLAYGROUND_* variables, and keeps one player, so one env and one agent, for every episode it
is given. The executor gives each actor PREFETCH calls at once (it plays one while the next
waits on it, so no round trip to the run's process comes between two episodes; once the run
stops handing out episodes those still waiting are cancelled, left unplayed as a local run
leaves them, while one that started as the last ended plays on), each call a batch of up to
BATCH episodes (Ray's own cost is per call), and yields each record as it comes back, an
actor's in the order they were given.
Workers never open a file under the run directory: they play the detached work
(`Work.detach`), whose players keep each episode's trace lines in memory; the actor returns
them with the record (one object through Ray's object store per batch), and the run's
process writes the traces, then the record. So `--out` need not be visible to any worker,
and a Ray run resumes like a local one.

Step notes (`playground.run.progress`) come back the same way, through Ray, never through a
file: an actor keeps those of the episode it is playing in memory, and while episodes play the
run's process pulls them every NOTES_EVERY seconds (`EpisodeActor.notes`, answered on a thread
of its own while the episode plays) and hands them to `on_step` in order; the notes not yet
pulled come back with the record, and are handed on before it is yielded. So the progress bar
and the ETA move per step on a cluster too. A dead actor's notes are lost with its episode.

The playbook is reached through its location. A playbook file (SQLite) is shared only by
processes of one machine, so once the actors have started the executor compares their nodes'
addresses with the driver's (`ray.nodes()`): a harness that may keep lessons in a playbook
file, with a worker on another machine, stops the run before any episode with a
`PlaybookPlacementError` that says to give a PostgreSQL playbook (`--playbook
postgresql://...`). The response cache is per node: each node's workers use that node's own
cache folder.

A worker that dies (its node lost, the OOM killer) costs the episodes it held (the batch it played
and the one waiting on it): they are left unfinished for the next run, and a new actor is asked
for in its place; until the cluster has room for it the other actors play on. An episode that
raises (a strict run's fault, or a bug) stops the run, as in a local run; the episodes of its
batch that had ended are then not recorded either, and the rerun plays them again.

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
import threading
import time
import uuid
from collections import deque
from typing import Any, Iterable, Iterator, Mapping, Sequence

from playground.core.records import EpisodeRecord
from playground.host.manager import Host
from playground.processes import Reaper
from playground.run.executors.base import Executor, ExecutorError, Job, JobQueue, Work, plugin_environment
from playground.run.progress import StepListener, StepNote, steps_reported

INSTALL_HINT = "pip install 'playground[ray]' (or, in a checkout, pip install -e '.[ray]')"
MARK = "PLAYGROUND_RAY_RUN"  # in the environment of every process of a private local Ray
LOCAL_OBJECT_STORE = 256 * 1024**2  # bytes: records are small; the default (30% of memory) is far too much
START_GRACE = 30.0  # seconds the first workers are waited for together; those without room yet start later
PLACE_TIMEOUT = 600.0  # seconds to wait for a replacement worker when no other is left playing
NOTES_EVERY = 0.5  # seconds between the run's pulls of the step notes of the episodes in play
NOTES_WAIT = 10.0  # seconds an ended episode's last pull is waited for (a dead actor's notes are lost)
PREFETCH = 2  # calls given to an actor at once: while it plays one, the next waits on it, not on a round trip
BATCH = 4  # episodes per call at most: Ray's cost per call (about 1 ms of CPU, run and actor together) is shared
BATCH_SHARE = 16  # ... and at most 1/BATCH_SHARE of an actor's share of the jobs: the actors end together
NOTES_GROUP = "notes"  # the actors' concurrency group for `notes`: answered while `play` runs
LOST_STARTS = 8  # workers that may die before they start (their node lost) before the run gives up
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

    def play(self, host: Host, work: Work, jobs: Sequence[Job],
             on_step: StepListener | None = None) -> Iterator[EpisodeRecord]:
        """Play `jobs` on Ray actors; yield each record as its episode finishes, and hand `on_step` each step note,
        in order, as the run pulls them from the actors (every NOTES_EVERY s; an episode's last ones before its
        record)."""
        if not jobs:
            return
        import ray

        session = _Session(self.address, self.workers or os.cpu_count() or 1)
        try:
            size = min(self.workers or session.cpus(), len(jobs))
            yield from _Actors(ray, work, host.strict, size, self.halted, work.playbook_files(host),
                               on_step).play(jobs)
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


class PlaybookPlacementError(ExecutorError):
    """A harness keeps lessons in a playbook file (SQLite), which only processes on one machine can share, while
    Ray workers run on other machines than the run's: a cluster needs a playbook every worker reaches by URL."""


def check_playbook_placement(playbooks: Mapping[str, str], here: str | None, workers: Iterable[str]) -> None:
    """Refuse (PlaybookPlacementError) a playbook file (`playbooks`: harness -> path) when a worker's machine (its
    node's address, `workers`) is not the run's own (`here`; None: unknown, as through Ray Client)."""
    elsewhere = sorted({address for address in workers if address != here})
    if not playbooks or not elsewhere:
        return
    files = ", ".join(f"{harness}: {path}" for harness, path in sorted(playbooks.items()))
    raise PlaybookPlacementError(
        f"Ray workers run on other machines ({', '.join(elsewhere)}) than this run ({here or 'not a node'}), but a "
        f"playbook is an SQLite file, which only processes on one machine can share ({files}). Give a playbook "
        "every worker reaches: --playbook postgresql://USER@HOST:PORT/DB, or run the workers on this machine")


class EpisodeActor:
    """A Ray worker: the run's plugins loaded once, one player kept across episodes, the run directory untouched;
    the step notes of the episode it plays are kept in memory until the run takes them (`notes`)."""

    def __init__(self, work: Work, strict: bool, environment: dict[str, str]) -> None:
        os.environ.update(environment)  # on a cluster the worker does not inherit the run's PLAYGROUND_* variables
        self.work, self.strict = work, strict
        self.player: Any = None
        self.steps: deque[StepNote] = deque()  # appended by `play`'s thread, taken by `notes`' (both atomic)

    def ready(self) -> str:
        """Load the plugins and build the player; return this worker's node id."""
        import ray

        self.player = self.work.player(Host(strict=self.strict).load())
        return ray.get_runtime_context().get_node_id()

    def play(self, jobs: list[Job]) -> list[tuple[EpisodeRecord, list[Any], list[StepNote]]]:
        """Play a batch of episodes, one after the other; return, for each, its record, its traces (kept in memory,
        for the run to write) and the step notes `notes` had not taken when it ended."""
        played = []
        for job in jobs:
            try:
                with steps_reported(self.steps.append):
                    record = self.player.play(job)
            except BaseException:
                self.player.take_traces()  # an episode that raised leaves no trace or note behind for the next one
                self.steps.clear()
                raise
            played.append((record, self.player.take_traces(), self.notes()))
        return played

    def notes(self) -> list[StepNote]:
        """Take the step notes reported so far (called in NOTES_GROUP: it is answered while an episode plays)."""
        taken = []
        while self.steps:
            taken.append(self.steps.popleft())
        return taken

    def close(self) -> None:
        """Release the player's env."""
        if self.player is not None:
            self.player.close()
            self.player = None


class _Actors:
    """`size` actors playing a queue of jobs, PREFETCH calls of up to BATCH given to each at once (fewer for a short
    queue, so that every actor has work: `batch`); a dead actor's episodes are recorded as
    errors and another actor is asked for in its place (a strict run stops instead). `playbooks` are the run's
    playbook files (`Work.playbook_files`): every actor must then be on this machine. With `on_step`, the step notes
    of the episodes in play are pulled every NOTES_EVERY s and handed to it."""

    def __init__(self, ray: Any, work: Work, strict: bool, size: int, halt: threading.Event | None = None,
                 playbooks: Mapping[str, str] | None = None, on_step: StepListener | None = None) -> None:
        self.ray, self.work, self.strict, self.size, self.halt = ray, work, strict, size, halt
        self.detached = work.detach()  # what the actors play: no file under the run directory
        self.playbooks = dict(playbooks or {})
        self.on_step = on_step
        self.pulls: dict[Any, Any] = {}  # an actor -> its `notes` call not yet answered
        self.given: dict[Any, deque[Any]] = {}  # an actor -> its `play` calls not yet answered, in the order given
        self.waiting_cancelled = False  # once the run stopped handing out jobs (`_cancel_waiting`)
        self.pulled_at = 0.0  # when the last round of `notes` calls was made (time.monotonic)
        self.lost_starts = 0  # actors that died before they started (`_replace`)
        self.batch = 1  # episodes per `play` call (`play`: from the number of jobs)
        # a concurrency group of its own answers `notes` while `play` runs; `ready`, `play` and `close` share one
        # other thread (no longer the worker's main thread), so the player is built and used on one thread
        self.remote_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0,
                                       concurrency_groups={NOTES_GROUP: 1})(EpisodeActor)

    def _start(self) -> Any:
        return self.remote_class.remote(self.detached, self.strict, plugin_environment())

    def play(self, jobs: Sequence[Job]) -> Iterator[EpisodeRecord]:
        ray = self.ray
        queue = JobQueue(jobs, self.halt)
        self.batch = max(1, min(BATCH, len(jobs) // (BATCH_SHARE * self.size)))
        actors = [self._start() for _ in range(self.size)]
        started: list[Any] = []  # the actors that loaded the plugins (those `close` is asked of at the end)
        running: dict[Any, tuple[Any, list[Job] | None]] = {}  # a pending ref -> its actor and jobs (None: start)
        try:
            for actor in self._first(actors, running):
                started.append(actor)
                self._fill(running, actor, queue)
            while running:
                if self.halt is not None and self.halt.is_set() and not self.waiting_cancelled:
                    self._cancel_waiting()
                playing = any(batch is not None for _, batch in running.values())
                if not playing and not queue:
                    break  # only replacements still waiting for room on the cluster, and nothing for them
                timeout = self._pull(running) if playing else PLACE_TIMEOUT  # None: until a record comes
                done, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
                self._pass_notes()
                if not done and playing:
                    continue  # time to pull the step notes again
                if not done:
                    raise ExecutorError(f"no Ray worker could be started in {PLACE_TIMEOUT:g} s to play the episodes "
                                        "left (the workers died and the cluster has no free CPU for another); they "
                                        "are not played: rerun the same command when the cluster has room")
                [ref] = done
                actor, batch = running[ref]
                if batch is None:  # a replacement started: it plays the next jobs
                    del running[ref]
                    node = self._ready(ref)
                    if node is None:  # it died before it started (its node lost): another is asked for
                        self._replace(actor, actors, running)
                        continue
                    self._placed([node])
                    started.append(actor)
                    self._fill(running, actor, queue)
                    continue
                first = self.given[actor].popleft()  # an actor's records are taken in the order its jobs were given
                records, died = self._answer(first, _taken(running, first), actor)
                if not died:
                    self._fill(running, actor, queue)  # the next jobs first: they play while the run writes the records
                    yield from records
                    continue
                actors.remove(actor)
                queue.give_back(actor)
                ray.kill(actor)
                # the jobs given to it after that one: error records too (whether one had started is not known)
                later = [each for ref in self.given.pop(actor)
                         for each in self._answer(ref, _taken(running, ref), actor)[0]]
                if queue:  # another actor takes its place once the cluster has room for it
                    actor = self._start()
                    actors.append(actor)
                    running[actor.ready.remote()] = (actor, None)
                yield from records
                yield from later
            self._close([actor for actor in started if actor in actors])
        finally:
            for actor in actors:
                ray.kill(actor)

    def _first(self, actors: list[Any], running: dict[Any, tuple[Any, list[Job] | None]]) -> list[Any]:
        """Wait for the first actors to start (all of them, or those the cluster has room for after START_GRACE s:
        the others are left in `running` to start when it has); return those that started. Nothing is played before:
        a fault loading the plugins raises here, and so does a playbook file with a worker on another machine."""
        refs = {actor.ready.remote(): actor for actor in actors}
        done, waiting = self.ray.wait(list(refs), num_returns=len(refs), timeout=START_GRACE)
        if not done:
            done, waiting = self.ray.wait(waiting, num_returns=1, timeout=PLACE_TIMEOUT)
        if not done:
            raise ExecutorError(f"no Ray worker could be started in {START_GRACE + PLACE_TIMEOUT:g} s: the cluster "
                                "has no free CPU (each worker takes one)")
        for ref in waiting:
            running[ref] = (refs[ref], None)
        started, nodes = [], []
        for ref in done:
            node = self._ready(ref)
            if node is None:  # it died before it started (its node lost; Ray may learn it late): another in its place
                self._replace(refs[ref], actors, running)
                continue
            started.append(refs[ref])
            nodes.append(node)
        self._placed(nodes)
        return started

    def _replace(self, dead: Any, actors: list[Any], running: dict[Any, tuple[Any, list[Job] | None]]) -> None:
        """Put a new actor in the place of one that died before it started (its start left in `running`);
        ExecutorError once LOST_STARTS have died so."""
        self.lost_starts += 1
        if dead in actors:
            actors.remove(dead)
        try:
            self.ray.kill(dead)
        except Exception:  # noqa: BLE001 - gone already, with its node
            pass
        if self.lost_starts > LOST_STARTS:
            raise ExecutorError(f"{self.lost_starts} Ray workers died before they started (their nodes lost?); the "
                                "episodes left are not played: rerun the same command when the cluster is whole")
        actor = self._start()
        actors.append(actor)
        running[actor.ready.remote()] = (actor, None)

    def _fill(self, running: dict[Any, tuple[Any, list[Job] | None]], actor: Any, queue: JobQueue) -> None:
        """Give `actor` calls of `batch` jobs from `queue` (fewer at its end) until it holds PREFETCH."""
        given = self.given.setdefault(actor, deque())
        while queue and len(given) < PREFETCH:
            batch: list[Job] = []
            while queue and len(batch) < self.batch:
                batch.append(queue.next_for(actor))
            ref = actor.play.remote(batch)
            running[ref] = (actor, batch)
            given.append(ref)

    def _cancel_waiting(self) -> None:
        """Cancel the jobs waiting on the actors behind the one each plays (the run stopped handing out jobs, so none
        is given after: once is enough): Ray drops a call not yet started, and `_answer` takes it as not played."""
        self.waiting_cancelled = True
        for given in self.given.values():
            for ref in list(given)[1:]:
                self.ray.cancel(ref)

    def _pull(self, running: dict[Any, tuple[Any, list[Job] | None]]) -> float | None:
        """Ask each actor playing an episode for its step notes, every NOTES_EVERY s (one call pending at most each);
        return how long to wait for a record before the next round (None: no notes are wanted)."""
        if self.on_step is None:
            return None
        now = time.monotonic()
        if now - self.pulled_at >= NOTES_EVERY:
            self.pulled_at = now
            for actor, batch in running.values():
                if batch is not None and actor not in self.pulls:
                    self.pulls[actor] = actor.notes.options(concurrency_group=NOTES_GROUP).remote()
        return max(0.0, self.pulled_at + NOTES_EVERY - now)

    def _pass_notes(self, actor: Any = None) -> None:
        """Hand `on_step` the notes of the `notes` calls answered so far; with `actor`, those of its call alone,
        waited for up to NOTES_WAIT s. A call that failed (its actor died) or is not answered in time is dropped."""
        asked = [actor] if actor is not None else list(self.pulls)
        calls = {self.pulls[a]: a for a in asked if a in self.pulls}
        if not calls:
            return
        answered, _ = self.ray.wait(list(calls), num_returns=len(calls), timeout=0 if actor is None else NOTES_WAIT)
        if actor is not None:
            self.pulls.pop(actor, None)
        for ref in answered:
            self.pulls.pop(calls[ref], None)
            try:
                notes = self.ray.get(ref)
            except self.ray.exceptions.RayError:
                continue
            self._hand_on(notes)

    def _hand_on(self, notes: list[StepNote]) -> None:
        """Hand `notes` to `on_step`, in order."""
        if self.on_step is not None:
            for note in notes:
                self.on_step(note)

    def _close(self, actors: list[Any]) -> None:
        """Ask the actors to close their players (an env's engine ends cleanly); one that is gone is passed over."""
        refs = [actor.close.remote() for actor in actors]
        if not refs:
            return
        _, waiting = self.ray.wait(refs, num_returns=len(refs), timeout=30)
        for ref in refs:
            if ref not in waiting:
                try:
                    self.ray.get(ref)
                except self.ray.exceptions.RayError:
                    pass

    def _ready(self, ref: Any) -> str | None:
        """The node id of the actor whose `ready` call is `ref`: it started and loaded the plugins; None when it died
        before it could (its node lost); else the plugins' error, or ExecutorError (nothing is recorded for it)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:  # loading the plugins raised
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except self.ray.exceptions.RayActorError:
            return None
        except self.ray.exceptions.RayError as exc:
            raise ExecutorError(f"a Ray worker died while starting: {exc}") from None

    def _placed(self, nodes: list[str]) -> None:
        """Check that the actors on `nodes` may share the run's playbook files: all on this machine, or none used."""
        if not self.playbooks:
            return
        here, addresses = machines(self.ray)
        check_playbook_placement(self.playbooks, here, [addresses.get(node, f"node {node}") for node in nodes])

    def _answer(self, ref: Any, batch: list[Job], actor: Any) -> tuple[list[EpisodeRecord], bool]:
        """The records of `batch` (each one's traces written to the run directory and its last step notes handed to
        `on_step` first), and False; or, when its actor died, their error records and True; or none and False for a
        batch cancelled before it started (`_cancel_waiting`). A strict run's error, and a dead actor in a strict
        run, raise."""
        exceptions = self.ray.exceptions
        self._pass_notes(actor)  # the notes its pending `notes` call took come before those `play` returned
        try:
            played = self.ray.get(ref)
        except exceptions.TaskCancelledError:
            return [], False
        except exceptions.RayTaskError as exc:  # an episode raised: a strict run's error, or a bug
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except exceptions.RayActorError as exc:
            why = f"the Ray worker died while playing this episode ({type(exc).__name__})"
            if self.work.strict:
                job = batch[0]
                raise ExecutorError(f"{job.harness}/{job.task_id} (trial {job.trial}): {why}: {exc}") from None
            return [self.work.failed(job, why) for job in batch], True
        records = []
        for record, traces, notes in played:
            self.work.write_traces(traces)  # before the record: a recorded episode's trace is always there
            self._hand_on(notes)
            records.append(record)
        return records, False


def _taken(running: dict[Any, tuple[Any, list[Job] | None]], ref: Any) -> list[Job]:
    """The jobs of the `play` call `ref`, taken out of `running`."""
    _, batch = running.pop(ref)
    assert batch is not None, "a `play` call's ref, not a start's"
    return batch


def machines(ray: Any) -> tuple[str | None, dict[str, str]]:
    """The address of the machine this run's process is on (None through Ray Client: no node of the cluster), and
    each live node's address by node id (`ray.nodes()`)."""
    addresses = {node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes() if node.get("Alive", True)}
    try:
        client = ray.util.client.ray.is_connected()
    except AttributeError:
        client = False
    here = None if client else addresses.get(ray.get_runtime_context().get_node_id())
    return here, addresses
