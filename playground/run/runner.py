"""Runs a set of tasks under one or more harnesses into a resumable run directory: checks the configuration,
writes the lock, hands the unfinished episodes to an executor and records each as it finishes, then the summary.

Each episode is an independent unit (`playground.run.episodes`), played wherever the executor plays it; the
parent alone writes the run directory's episode records, so resume works the same way whatever played them.
"""

from __future__ import annotations

import errno
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from playground.core.errors import PlaygroundError
from playground.core.records import EpisodeRecord, episode_key
from playground.core.run_summary import read_summary
from playground.host.manager import Host
from playground.run.budget import TokenBudget
from playground.run.config import RunConfig, RunConfigError, episode_id, playbook_path
from playground.run.episodes import BuiltAgent, RunWork
from playground.run.executors import Executor, Job, make_executor
from playground.run.harnesses import harness_fingerprint
from playground.run.lock import LOCK_FILE, LockError, build_lock, finish_lock, lock_differences, read_lock, write_lock
from playground.run.progress import EpisodeDone, ProgressListener, RunMessage
from playground.run.report import summarise_run
from playground.run.rundir import QUARANTINE, RunDir, RunDirError, listed
from playground.run.secrets import redact
from playground.run.validation import CheckedRun, check_config

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # a write failed for want of space: a named error, not a traceback


def run(host: Host, config: RunConfig, progress: ProgressListener | None = None,
        workers: int | None = None, repair: bool = False, check_lock: dict | None = None,
        executor: str | Executor = "local", address: str | None = None, in_flight: int = 1,
        checked: CheckedRun | None = None) -> dict:
    """Run every (task, harness) episode not yet finished in `config.out`; return the summary.

    `executor` plays the episodes (`playground.run.executors`): "local" (the default) in this
    process (`in_flight` at once, in threads) or, with `workers > 1`, in that many long-lived
    worker processes (spawned; each
    loads the plugins the way the CLI does: built-ins, entry points, the PLAYGROUND_*
    variables); "ray" as Ray actor tasks on the cluster at `address` (default: a private local
    Ray). Records are written as episodes finish, so their order in episodes.jsonl varies,
    and harnesses that learn online see their playbook grow in a different order.
    `repair` moves bad lines of a damaged episodes.jsonl, and the records of episodes whose trace file is gone, to
    episodes.quarantine.jsonl (their episodes are played again) instead of refusing the directory.
    A run directory is grown by a config with more tasks (`--episodes` with a larger N: the recorded tasks first),
    harnesses or trials: the episodes it lacks are played, the finished ones kept (`rundir.RunDir`).
    DIR/lock.json records what the results depend on (`playground.run.lock`); with `check_lock`
    (another run's lock) a run whose lock differs from it in what matters is refused (LockError
    naming the fields) before anything is written.
    `progress` is the run's one progress channel (`playground.run.progress`): it is handed a `StepNote` for each
    step played (from threads and worker processes too, not from Ray workers), an `EpisodeDone` for each episode
    recorded and a `RunMessage` for each line the run has for its user, in the order they happen.
    `checked` is the caller's check of this very config (`validation.check_run`, as `playground run` makes it): while
    it holds, the config is not checked again, and its agent is the run's (the lock reads it; the first player in
    this process plays it).
    An interrupt (KeyboardInterrupt) while episodes play settles them as the executor does (the ones in flight are
    left unfinished, played again on resume), writes summary.json over the episodes recorded with `interrupted:
    true` and finishes lock.json, then raises `RunInterrupted` (a KeyboardInterrupt) carrying that summary.
    """
    if isinstance(config.trials, bool) or not isinstance(config.trials, int) or config.trials < 1:
        raise RunConfigError(f"trials must be a whole number of at least 1, got {config.trials!r}")
    budget = getattr(config, "max_tokens_total", None)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise RunConfigError(f"max_tokens_total must be a whole number of at least 1 (or None), got {budget!r}")
    chosen = executor if isinstance(executor, Executor) else make_executor(executor, workers, address, in_flight)
    if checked is not None and checked.holds(host, config):
        agent = checked.agent  # checked (and built) once, by the caller
    else:
        agent = check_config(host, config)  # the lock reads its model file; the first player plays it
    env_spec = host.envs.get(config.env)
    fingerprints = {name: harness_fingerprint(host, name) for name in config.harnesses}
    lock, previous_lock = _start_lock(host, config, fingerprints, agent)
    if check_lock is not None:
        differences = lock_differences(check_lock, lock)
        if differences:
            raise LockError(f"this run's lock differs from the one given in what matters ({len(differences)} "
                            "field(s)); refusing to run:\n  " + "\n  ".join(differences))
    try:
        identity = {"run_id": uuid.uuid4().hex[:12], "harness_fingerprints": fingerprints}
        rundir = RunDir(config.out, redact(asdict(config)) | identity, repair=repair)
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise _disk_full(config, exc, "nothing was played") from None
        raise
    run_id = rundir.config["run_id"]
    listener: ProgressListener = progress or (lambda event: None)

    def notify(message: str, record: EpisodeRecord | None) -> None:
        listener(RunMessage(message) if record is None else EpisodeDone(message, record))

    missing = rundir.missing_traces
    if rundir.quarantined > len(missing):
        notify(f"moved {rundir.quarantined - len(missing)} bad line(s) of episodes.jsonl to {QUARANTINE}", None)
    if missing:
        notify(f"moved the records of {len(missing)} episode(s) whose trace is missing ({listed(missing)}) to "
               f"{QUARANTINE}; they are played again", None)
    if rundir.grown_from is not None:
        notify(f"the run grows from {rundir.grown_from} to {len(rundir.config['tasks'])} tasks; the episodes "
               "finished before are kept", None)
    if previous_lock is not None:
        for line in lock_differences(previous_lock, lock):
            if rundir.grown_from is None or not line.startswith(("tasks.count:", "tasks.sha256:")):
                notify(f"warning: {LOCK_FILE} of the earlier session differs: {line}", None)
    unfinished = Unfinished()
    try:
        write_lock(rundir.path, finish_lock(lock, host), previous_lock)  # "after": the playbooks as they are now
        try:
            env_spec.provider.prepare(config.task_set, config.tasks, lambda msg: notify(msg, None))
            header_base = {**env_spec.provider.describe(config.task_set), "run_id": run_id, "agent": config.agent,
                           "split": config.split}
            pending = []
            for trial in range(1, config.trials + 1):  # trial by trial: a run with trials N is N passes over the tasks
                for task_id in config.tasks:
                    for harness in config.harnesses:
                        key = episode_key(harness, task_id, trial)
                        if rundir.is_finished(key):
                            notify(f"{key} (done before)", rundir.records[key])
                        else:
                            pending.append(Job(harness, task_id, trial))
            unfinished.budget = TokenBudget(getattr(config, "max_tokens_total", None), rundir.records.values(),
                                            getattr(chosen, "stop_handing_out", lambda: None))
            unfinished.pending = [episode_key(job.harness, job.task_id, job.trial) for job in pending]
            if unfinished.budget.reached and pending:  # spent in earlier sessions: nothing new is handed out
                unfinished.budget.stopped, pending = True, []
                notify(unfinished.budget.message(len(unfinished.pending)), None)
            discard_unfinished(host, config, run_id, pending)
            work = RunWork(config, run_id, str(rundir.path), header_base, BuiltAgent(agent, host))
            played = chosen.play(host, work, pending, listener if progress else None)
            _play_and_record(host, config, run_id, rundir, played, notify, unfinished)
        except KeyboardInterrupt:  # the episodes in flight are settled (their generator closed): what was played
            stopped = _finish(host, config, rundir, lock, previous_lock, unfinished, interrupted=True) \
                if rundir.records else None
            raise RunInterrupted(stopped) from None
        return _finish(host, config, rundir, lock, previous_lock, unfinished)
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise _disk_full(config, exc, f"the {len(rundir.records)} episode(s) recorded in episodes.jsonl are kept, "
                         "and an episode cut short is played again") from None
    finally:
        rundir.close()


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by an interrupt (Ctrl-C; the CLI turns SIGTERM and SIGHUP into one) after it wrote summary.json
    over the episodes recorded, with `interrupted: true`, and finished lock.json; `summary` is that summary (None
    when no episode was recorded: nothing is written then). A rerun of the same command resumes the run."""

    def __init__(self, summary: dict | None) -> None:
        super().__init__()
        self.summary = summary


def _finish(host: Host, config: RunConfig, rundir: RunDir, lock: dict, previous_lock: dict | None,
            unfinished: Unfinished, interrupted: bool = False) -> dict:
    """Write summary.json over the episodes recorded (`interrupted: true` for a run stopped before its end) and
    lock.json with the playbooks as they are now; return the summary."""
    summary = summarise_run(f"{config.env}:{config.task_set}", config.agent, rundir.config["harnesses"],
                            rundir.records.values())
    summary.update(run_id=rundir.config["run_id"], split=config.split, seed=config.seed, max_steps=config.max_steps,
                   unfinished=len(unfinished.keys), unfinished_keys=unfinished.keys,
                   stopped_by_breaker=unfinished.stopped)
    summary.update(unfinished.budget_summary(rundir.records))
    if interrupted:
        summary["interrupted"] = True
    summary = read_summary(summary).as_json()  # checked against the summary's model, its version named
    rundir.write_summary(summary)
    write_lock(rundir.path, finish_lock(lock, host, rundir.records.values()), previous_lock)
    return summary


def _disk_full(config: RunConfig, exc: OSError, kept: str) -> RunDirError:
    """The named error for a write that failed for want of space: where, what was kept, what to do."""
    return RunDirError(f"{config.out}: the disk is full ({exc.filename or exc.strerror}); {kept}. "
                       "Free some space and rerun the same command")


class RunIncomplete(PlaygroundError):
    """A run a command builds on left episodes unfinished (they ended in errors outside the agent)."""


def check_finished(summary: dict, out: str | Path) -> dict:
    """Return `summary`, or raise RunIncomplete when its run left episodes unfinished: a command that builds a table
    on a run (an evidence table, a diagnosis) must not build it on a part of the tasks. A run its token budget
    stopped (`stopped_by_budget`) is refused the same way."""
    if summary.get("stopped_by_budget"):
        raise RunIncomplete(f"{out}: the token budget (--max-tokens-total {summary.get('max_tokens_total')}) stopped "
                            f"the run with {summary.get('not_played', 0)} episode(s) not played; rerun the same "
                            "command with a larger budget (or none) to finish it")
    if summary.get("unfinished"):
        raise RunIncomplete(f"{summary['unfinished']} episode(s) of {out} ended in an error and are unfinished "
                            f"(see {Path(out) / 'unfinished.jsonl'}); fix the cause and rerun the same command, or "
                            "pass --record-errors to count them as they ended")
    return summary


@dataclass
class Unfinished:
    """The episodes a run left unfinished (ended in an error, not recorded) and whether its breaker stopped it."""

    keys: list[str] = field(default_factory=list)
    stopped: bool = False
    budget: TokenBudget | None = None  # the run's token budget (`--max-tokens-total`), when one is given
    pending: list[str] = field(default_factory=list)  # the keys of the episodes this session was to play

    def not_played(self, records: Mapping[str, Any]) -> int:
        """How many of this session's episodes were neither recorded nor left unfinished (a budget held them)."""
        ended = set(self.keys)
        return sum(1 for key in self.pending if key not in records and key not in ended)

    def budget_summary(self, records: Mapping[str, Any]) -> dict[str, Any]:
        """What summary.json says of the token budget: `stopped_by_budget` always; with a budget, its limit, the
        tokens spent and the episodes it left unplayed."""
        if self.budget is None or self.budget.limit is None:
            return {"stopped_by_budget": False}
        return self.budget.summary(self.not_played(records))


def _play_and_record(host: Host, config: RunConfig, run_id: str, rundir: RunDir, records: Iterator[EpisodeRecord],
                     notify: Callable[[str, EpisodeRecord | None], None], unfinished: Unfinished) -> Unfinished:
    """Record each finished episode as it comes. An episode that ended in an error is not recorded (unless
    `config.record_errors`): it is logged to unfinished.jsonl (and noted in `unfinished`, which also says whether
    the breaker stopped the run), its playbook writes are taken back as a killed episode's are, and the next run
    plays it again. After `config.max_consecutive_errors` such episodes in a row (an endpoint or a disk that stays
    down) no more work is handed out."""
    streak = 0
    try:
        for record in records:
            if record.status != "error" or config.record_errors:
                streak = 0
                rundir.record(record)
                notify(record.key, record)
                if unfinished.budget is not None and unfinished.budget.add(record):
                    notify(unfinished.budget.message(), None)
                continue
            streak += 1
            unfinished.keys.append(record.key)
            rundir.note_unfinished(record)
            discard_unfinished(host, config, run_id, [Job(record.harness, record.task_id, record.trial)])
            notify(f"{record.key} unfinished: {record.error}", None)
            if config.max_consecutive_errors and streak >= config.max_consecutive_errors:
                unfinished.stopped = True
                notify(f"stopped: {streak} episodes in a row ended in an error (the last: {record.error}); "
                       "nothing more is played. Fix the cause and rerun the same command", None)
                break
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()  # an executor stops its workers and threads when its generator is closed
    return unfinished


def discard_unfinished(host: Host, config: RunConfig, run_id: str, pending: list[Job]) -> None:
    """Before `pending` episodes are played, let the plugins take back what unfinished plays of them wrote outside
    the run directory (`discard_episodes`, once per harness), so each replay starts where an uninterrupted run would."""
    by_harness: dict[str, list[str]] = {}
    for job in pending:
        by_harness.setdefault(job.harness, []).append(episode_id(run_id, job.harness, job.task_id, job.trial))
    for harness, ids in by_harness.items():
        host.call_plugins("discard_episodes", run_id=run_id, episode_ids=ids, playbook=playbook_path(config, harness))


def _start_lock(host: Host, config: RunConfig, fingerprints: dict[str, str],
                agent: Any = None) -> tuple[dict, dict | None]:
    """This run's lock (playbook hashes before it kept from an earlier session's lock in DIR), and that lock."""
    path = Path(config.out) / LOCK_FILE
    previous = None
    if path.is_file():
        try:
            previous = read_lock(path)
        except LockError:
            previous = None  # a damaged lock is rewritten; the run's own files are checked by RunDir
    playbooks = {harness: playbook_path(config, harness) for harness in config.harnesses}
    try:
        lock = build_lock(host, config, fingerprints, playbooks, previous, agent)
    except (OSError, ValueError) as exc:
        raise RunConfigError(f"cannot write the run's lock: {exc}") from None
    if previous is not None:  # harnesses of earlier sessions stay in the lock, as they stay in config.json
        for harness, entry in (previous.get("playbooks") or {}).items():
            lock["playbooks"].setdefault(harness, entry)
        for harness, fingerprint in (previous.get("run", {}).get("harnesses") or {}).items():
            lock["run"]["harnesses"].setdefault(harness, fingerprint)
    return lock, previous
