"""Runs a set of tasks under one or more harnesses into a resumable run directory.

Each episode is an independent unit: its own harness plugin objects, built here from the
registries, and a reset env and agent. An `EpisodePlayer` plays a run's episodes in one
process and keeps one env and one agent across them (built once, reset by each episode;
an episode that errors leaves them behind). Episodes share nothing else in memory (a
playbook is shared only through its SQLite file), so an executor
(`playground.run.executors`: this process, worker processes, a Ray cluster) can play them
anywhere; the parent alone writes the run directory's episode records, so resume works the
same way whatever played them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import threading
import time
import uuid
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from playground.agents.base import bind_env
from playground.agents.judge_calls import judge_calls_reported
from playground.agents.response_cache import cache_use_counted
from playground.agents.structured import agent_model_shared
from playground.core.episode_hooks import EpisodeHooks
from playground.core.errors import MissingExtra, PlaygroundError, format_exception
from playground.core.loop import EpisodeConfig, run_episode
from playground.core.payloads import AttemptStep, AttemptVerdict, AttemptView, EpisodeIds
from playground.host.manager import Host
from playground.host.registry import GRADE_VERIFIER, HarnessSpec, InterventionSpec
from playground.run.costs import attempt_cost
from playground.run.executors import Executor, Job, make_executor
from playground.run.files import confined, safe_file_name
from playground.run.lock import LOCK_FILE, LockError, build_lock, finish_lock, lock_differences, read_lock, write_lock
from playground.run.progress import StepCounter, StepListener
from playground.run.report import EpisodeTally, merge_cache_use, merge_failures, merge_judge_replies, summarise_run
from playground.run.rundir import QUARANTINE, RunDir, RunDirError, episode_key, trace_path
from playground.run.secrets import redact, redact_text
from playground.run.traces import TraceWriter


class RunConfigError(PlaygroundError, ValueError):
    """The run was asked for something that does not exist; the message lists the choices."""


class AgentUnavailable(RunConfigError):
    """The agent's factory refused its options or cannot start here (e.g. a missing optional package)."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # a write failed for want of space: a named error, not a traceback
DEFAULT_MAX_STEPS = 40  # the step budget of a task set that sets none (`TaskSet.default_max_steps`)


@dataclass
class RunConfig:
    """Everything `playground run` was asked to do."""

    env: str
    task_set: str
    split: str
    tasks: list[str]
    agent: str
    harnesses: list[str]
    out: str
    seed: int = 0
    max_steps: int = DEFAULT_MAX_STEPS
    agent_options: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    playbook: str | None = None
    strict: bool = False
    trials: int = 1  # each task is played this many times per harness, trial N with its own derived seed
    # An episode that ends in an error (the endpoint, the disk, the env or a plugin failed: never the agent's own
    # outcome) is left unfinished, for the next run to play again, unless `record_errors` records it as it ended.
    record_errors: bool = False
    max_consecutive_errors: int = 5  # the circuit breaker: stop handing out work after this many in a row (0: never)
    hook_deadline: float = 600.0  # seconds one plugin hook call may take (0: no limit)
    episode_deadline: float = 14_400.0  # seconds one episode (one attempt) may take (0: no limit)


def resolve_tasks(host: Host, env: str, task_set: str | None, split: str | None, count: int | None):
    """Return (task_set, split, task ids) for an env, checking every name against the choices."""
    try:
        provider = host.envs.get(env).provider
    except KeyError as exc:
        raise RunConfigError(exc.args[0]) from None
    sets = provider.task_sets()
    task_set = task_set or provider.default_task_set
    if task_set not in sets:
        raise RunConfigError(f"unknown task set {task_set!r} for env {env!r}; choose from: {', '.join(sorted(sets))}")
    chosen = sets[task_set]
    split = split or chosen.default_split
    if split not in chosen.splits:
        raise RunConfigError(f"unknown split {split!r} for {env}:{task_set}; choose from: {', '.join(chosen.splits)}")
    if count is not None and count < 1:
        raise RunConfigError(f"--episodes must be at least 1, got {count}")
    where = f"{env}:{task_set} split {split}"
    available = chosen.available(split)
    if count is not None and available is not None and count > available:
        raise RunConfigError(f"{where} has {'' if chosen.exact_count(split) else 'at most '}{available} tasks; "
                             f"--episodes {count} asks for more")
    try:
        tasks = chosen.tasks(split, count)
    except (ValueError, OSError) as exc:
        raise RunConfigError(f"{where}: {exc}") from None
    if count is not None and len(tasks) < count:
        raise RunConfigError(f"{where} has {len(tasks)} tasks; --episodes {count} asks for more")
    return task_set, split, tasks


def check_config(host: Host, config: RunConfig) -> None:
    """Raise RunConfigError naming the first unknown agent or harness, or a bad agent option or parameter."""
    try:
        host.agents.get(config.agent)
        specs = [resolve_harness(host, harness) for harness in config.harnesses]
    except KeyError as exc:
        raise RunConfigError(exc.args[0]) from None
    except (ValueError, OSError) as exc:
        raise RunConfigError(str(exc)) from None
    if not config.tasks:
        raise RunConfigError(f"{config.env}:{config.task_set} split {config.split} has no tasks; nothing to run")
    if not str(config.out).strip():
        raise RunConfigError("the run directory (--out) is empty")
    if config.playbook is not None and not str(config.playbook).strip():
        raise RunConfigError("--playbook is empty")
    try:
        host.agents.get(config.agent).factory(**config.agent_options)
    except (PlaygroundError, ValueError) as exc:  # a TypeError is a bug in the factory, not bad config
        raise AgentUnavailable(str(exc)) from None
    for harness, spec in zip(config.harnesses, specs):
        check_loop_params({**spec.params, **config.params}, harness)
        if spec.cascade and spec.verifier != GRADE_VERIFIER:
            try:
                attempt_verifier(host, spec, {**spec.params, **config.params})
            except KeyError:
                raise RunConfigError(f"harness {harness!r}: unknown verifier {spec.verifier!r}; choose from: "
                                     f"{', '.join([GRADE_VERIFIER, *host.attempt_verifiers.names()])}") from None
            except (PlaygroundError, ValueError) as exc:
                raise RunConfigError(f"harness {harness!r}: verifier {spec.verifier!r}: {exc}") from None
    known: set[str] = set(LOOP_PARAMS)
    opaque = False
    built: dict[str, list[tuple[str, Any]]] = {}  # harness -> its interventions, built with the run's parameters
    try:
        for harness, spec in zip(config.harnesses, specs):
            built[harness] = []
            for name in sorted({n for attempt in spec.attempts for n in attempt}):
                probe = _ParamProbe({**spec.params, **config.params})
                plugin = resolve_intervention(host, name).factory(probe)
                built[harness].append((name, plugin))
                keys = _declared_params(plugin)
                if keys is not None:
                    known |= keys
                elif probe.iterated:
                    opaque = True
                known |= probe.read if not probe.iterated else set()
    except (PlaygroundError, ValueError) as exc:  # a TypeError is a bug in the factory, not bad config
        raise RunConfigError(str(exc)) from None
    unknown = sorted(set(config.params) - known)
    if unknown and not opaque:
        raise RunConfigError(f"unknown --param {', '.join(map(repr, unknown))} for harness(es) "
                             f"{', '.join(config.harnesses)}; known: {', '.join(sorted(known))}")
    check_playbooks(host, config, built)


def check_playbooks(host: Host, config: RunConfig, built: dict[str, list[tuple[str, Any]]]) -> None:
    """Ask the plugins (`check_playbook`) whether each harness's playbook path will do: every loaded plugin, then
    the harness's interventions `built` with the run's parameters; RunConfigError lists every problem."""
    problems: list[str] = []
    for harness in config.harnesses:
        path = playbook_path(config, harness)
        said = host.call_plugins("check_playbook", path=path)
        said += EpisodeHooks(built.get(harness, ())).collect("check_playbook", path=path)
        where = f"--playbook {path!r}" if config.playbook else f"the playbook of harness {harness!r} ({path})"
        for sentence in said:
            for text in (sentence if isinstance(sentence, (list, tuple)) else [sentence]):
                if text and f"{where}: {text}" not in problems:
                    problems.append(f"{where}: {text}")
    if problems:
        raise RunConfigError("; ".join(problems))


# Parameters the episode loop itself reads.
LOOP_PARAMS = ("max_reasks_per_step",)


MAX_REASKS_LIMIT = 100


def check_loop_params(params: dict, harness: str) -> None:
    """RunConfigError unless the loop's own parameters hold: `max_reasks_per_step` a whole number 0..100."""
    value = params.get("max_reasks_per_step", 2)
    try:
        number = float(value)
        whole = number.is_integer()
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or not 0 <= number <= MAX_REASKS_LIMIT:
        raise RunConfigError(f"harness {harness!r}: max_reasks_per_step must be a whole number from 0 to "
                             f"{MAX_REASKS_LIMIT}, got {value!r}")


class _ParamProbe(dict):
    """The parameters handed to an intervention factory while checking a run: records the keys it reads.

    A factory that iterates over the parameters (copies them, filters them) reveals nothing by
    its reads; then the keys of its plugin's parameter mapping count (`_declared_params`).
    """

    def __init__(self, data: dict) -> None:
        super().__init__(data)
        self.read: set[str] = set()
        self.iterated = False

    def __getitem__(self, key):
        if not self.iterated:
            self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if not self.iterated:
            self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key) -> bool:
        if not self.iterated:
            self.read.add(key)
        return super().__contains__(key)

    def _iterating(self):
        self.iterated = True
        return self

    def __iter__(self):
        return dict.__iter__(self._iterating())

    def keys(self):
        return dict.keys(self._iterating())

    def items(self):
        return dict.items(self._iterating())

    def values(self):
        return dict.values(self._iterating())

    def copy(self):
        return dict(dict.items(self._iterating()))


def _declared_params(plugin: Any) -> set[str] | None:
    """The parameter names an intervention plugin declares: the keys of its resolved-parameters mapping
    (an attribute `params` or `p` holding every parameter it knows, defaults included), else None."""
    for attribute in ("params", "p"):
        value = getattr(plugin, attribute, None)
        if isinstance(value, dict) and not isinstance(value, _ParamProbe) and value:
            return {str(key) for key in value}
    return None


def resolve_harness(host: Host, name: str) -> HarnessSpec:
    """Return the harness called `name`: a registered one, or one a harness loader builds (`PREFIX:REST`).

    KeyError or ValueError names what is wrong.
    """
    for loader in host.harness_loaders:
        if name.startswith(loader.prefix):
            spec = loader.loader(name, name[len(loader.prefix):])
            unknown = [n for attempt in spec.attempts for n in attempt if not _known_intervention(host, n)]
            if unknown:
                raise KeyError(f"harness {name!r} uses unknown intervention(s) {', '.join(unknown)}")
            return spec
    return host.harnesses.get(name)


def resolve_intervention(host: Host, name: str) -> InterventionSpec:
    """Return the intervention called `name`: a registered one, or one an intervention loader builds (`PREFIX:REST`).

    A built intervention is not added to the host's registry. KeyError or ValueError names what is wrong.
    """
    if name in host.interventions:
        return host.interventions.get(name)
    for loader in host.intervention_loaders:
        if name.startswith(loader.prefix):
            spec = loader.loader(name, name[len(loader.prefix):], lambda other: resolve_intervention(host, other))
            if not isinstance(spec, InterventionSpec) or spec.name != name:
                raise ValueError(f"intervention loader {loader.prefix!r} (plugin {loader.plugin}) built "
                                 f"{spec!r} for {name!r}, not an InterventionSpec named {name!r}")
            return spec
    return host.interventions.get(name)  # KeyError naming the registered ones


def _known_intervention(host: Host, name: str) -> bool:
    try:
        resolve_intervention(host, name)
    except (KeyError, ValueError):
        return False
    return True


def harness_fingerprint(host: Host, name: str) -> str:
    """A hash of what a harness does (its attempts, parameters, cascade and verifier), and for a harness
    built by a loader (`PREFIX:REST`, e.g. from a policy file) also its description, which names the
    file's content hash: a resumed run refuses a harness that changed meanwhile."""
    spec = resolve_harness(host, name)
    built = any(name.startswith(loader.prefix) for loader in host.harness_loaders)
    what = {"attempts": spec.attempts, "params": dict(spec.params), "cascade": spec.cascade,
            "verifier": spec.verifier, "description": spec.description if built else None}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def episode_seed(run_seed: int, task_id: str, trial: int = 1) -> int:
    """Return the seed of a task's episodes in one trial: the same for every harness of a run, another for
    each trial (trial 1 keeps the seed runs had before trials existed)."""
    text = f"{run_seed}:{task_id}" + (f":trial{trial}" if trial > 1 else "")
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big")


def run(host: Host, config: RunConfig, progress: Callable[[str, dict | None], None] | None = None,
        workers: int | None = None, repair: bool = False, check_lock: dict | None = None,
        executor: str | Executor = "local", address: str | None = None, in_flight: int = 1,
        on_step: StepListener | None = None) -> dict:
    """Run every (task, harness) episode not yet finished in `config.out`; return the summary.

    `executor` plays the episodes (`playground.run.executors`): "local" (the default) in this
    process (`in_flight` at once, in threads) or, with `workers > 1`, in that many long-lived
    worker processes (spawned; each
    loads the plugins the way the CLI does: built-ins, entry points, the PLAYGROUND_*
    variables); "ray" as Ray actor tasks on the cluster at `address` (default: a private local
    Ray). Records are written as episodes finish, so their order in episodes.jsonl varies,
    and harnesses that learn online see their playbook grow in a different order.
    `repair` moves bad lines of a damaged episodes.jsonl to episodes.quarantine.jsonl (their
    episodes are played again) instead of refusing the directory.
    DIR/lock.json records what the results depend on (`playground.run.lock`); with `check_lock`
    (another run's lock) a run whose lock differs from it in what matters is refused (LockError
    naming the fields) before anything is written.
    `on_step` is handed a `progress.StepNote` for each step played (in this thread; from worker processes and
    threads too, but not from Ray workers), so a display can move while an episode plays.
    """
    if isinstance(config.trials, bool) or not isinstance(config.trials, int) or config.trials < 1:
        raise RunConfigError(f"trials must be a whole number of at least 1, got {config.trials!r}")
    chosen = executor if isinstance(executor, Executor) else make_executor(executor, workers, address, in_flight)
    check_config(host, config)
    env_spec = host.envs.get(config.env)
    fingerprints = {name: harness_fingerprint(host, name) for name in config.harnesses}
    lock, previous_lock = _start_lock(host, config, fingerprints)
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
    notify = progress or (lambda message, record: None)
    if rundir.quarantined:
        notify(f"moved {rundir.quarantined} bad line(s) of episodes.jsonl to {QUARANTINE}", None)
    if previous_lock is not None:
        for line in lock_differences(previous_lock, lock):
            notify(f"warning: {LOCK_FILE} of the earlier session differs: {line}", None)
    try:
        write_lock(rundir.path, finish_lock(lock, host), previous_lock)  # "after": the playbooks as they are now
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
        discard_unfinished(host, config, run_id, pending)
        work = RunWork(config, run_id, str(rundir.path), header_base)
        unfinished = _play_and_record(host, config, run_id, rundir, chosen.play(host, work, pending, on_step), notify)
        summary = summarise_run(f"{config.env}:{config.task_set}", config.agent, rundir.config["harnesses"],
                                rundir.records.values())
        summary.update(run_id=run_id, split=config.split, seed=config.seed, max_steps=config.max_steps,
                       unfinished=len(unfinished.keys), unfinished_keys=unfinished.keys,
                       stopped_by_breaker=unfinished.stopped)
        rundir.write_summary(summary)
        write_lock(rundir.path, finish_lock(lock, host, rundir.records.values()), previous_lock)
        return summary
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise _disk_full(config, exc, f"the {len(rundir.records)} episode(s) recorded in episodes.jsonl are kept, "
                         "and an episode cut short is played again") from None
    finally:
        rundir.close()


def _disk_full(config: RunConfig, exc: OSError, kept: str) -> RunDirError:
    """The named error for a write that failed for want of space: where, what was kept, what to do."""
    return RunDirError(f"{config.out}: the disk is full ({exc.filename or exc.strerror}); {kept}. "
                       "Free some space and rerun the same command")


class RunIncomplete(PlaygroundError):
    """A run a command builds on left episodes unfinished (they ended in errors outside the agent)."""


def check_finished(summary: dict, out: str | Path) -> dict:
    """Return `summary`, or raise RunIncomplete when its run left episodes unfinished: a command that builds a table
    on a run (an evidence table, a diagnosis) must not build it on a part of the tasks."""
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


def _play_and_record(host: Host, config: RunConfig, run_id: str, rundir: RunDir, records: Iterator[dict],
                     notify: Callable[[str, dict | None], None]) -> Unfinished:
    """Record each finished episode as it comes. An episode that ended in an error is not recorded (unless
    `config.record_errors`): it is logged to unfinished.jsonl, its playbook writes are taken back as a killed
    episode's are, and the next run plays it again. After `config.max_consecutive_errors` such episodes in a row
    (an endpoint or a disk that stays down) no more work is handed out."""
    unfinished, streak = Unfinished(), 0
    try:
        for record in records:
            if record.get("status") != "error" or config.record_errors:
                streak = 0
                rundir.record(record)
                notify(record["key"], record)
                continue
            streak += 1
            unfinished.keys.append(record["key"])
            rundir.note_unfinished(record)
            discard_unfinished(host, config, run_id, [Job(record["harness"], record["task_id"],
                                                          int(record.get("trial") or 1))])
            notify(f"{record['key']} unfinished: {record.get('error')}", None)
            if config.max_consecutive_errors and streak >= config.max_consecutive_errors:
                unfinished.stopped = True
                notify(f"stopped: {streak} episodes in a row ended in an error (the last: {record.get('error')}); "
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


def episode_id(run_id: str, harness: str, task_id: str, trial: int = 1) -> str:
    """The id of a (task, harness, trial) episode of a run: the same on every resume (the run id is kept in
    config.json); trials after the first carry `#trial`."""
    return f"{run_id}:{harness}:{task_id}" + (f"#{trial}" if trial > 1 else "")


def _start_lock(host: Host, config: RunConfig, fingerprints: dict[str, str]) -> tuple[dict, dict | None]:
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
        lock = build_lock(host, config, fingerprints, playbooks, previous)
    except (OSError, ValueError) as exc:
        raise RunConfigError(f"cannot write the run's lock: {exc}") from None
    if previous is not None:  # harnesses of earlier sessions stay in the lock, as they stay in config.json
        for harness, entry in (previous.get("playbooks") or {}).items():
            lock["playbooks"].setdefault(harness, entry)
        for harness, fingerprint in (previous.get("run", {}).get("harnesses") or {}).items():
            lock["run"]["harnesses"].setdefault(harness, fingerprint)
    return lock, previous


def playbook_path(config: RunConfig, harness: str) -> str:
    """The playbook a harness uses: `--playbook` for all, else its own under DIR/playbooks/.

    The harness name becomes one safe file name (`prefix:../x/p.json` or an absolute policy
    path never leads out of DIR/playbooks/).
    """
    if config.playbook:
        return config.playbook
    root = Path(config.out) / "playbooks"
    return str(confined(root, safe_file_name(harness) + ".sqlite", what=f"playbook of harness {harness!r}"))


@dataclass(frozen=True)
class RunWork:
    """What every episode of a run shares (the executors' `Work`): picklable, sent once to each worker."""

    config: RunConfig
    run_id: str
    run_path: str
    header_base: dict

    @property
    def strict(self) -> bool:
        """The run's --strict."""
        return self.config.strict

    def player(self, host: Host) -> EpisodePlayer:
        """A player of this run's episodes in this process."""
        return EpisodePlayer(host, self)

    def failed(self, job: Job, why: str) -> dict:
        """The error record of `job`, whose worker died while playing it: a trace holding its header, the error and
        the end replaces whatever the worker had written."""
        config = self.config
        seed = episode_seed(config.seed, job.task_id, job.trial)
        path = trace_path(Path(self.run_path), job.harness, job.task_id, 1, job.trial)
        attempt = _Attempt(path, self.header_base, config, self.run_id, job.harness, job.task_id, seed, job.trial,
                           dict(config.params), (), 1)
        attempt.emit("error", {"message": why})
        attempt.emit("end", {"status": "error", "won": False, "steps": 0, "error": why})
        record = attempt.record("error", False, 0, why, None, None)
        record["key"] = episode_key(job.harness, job.task_id, job.trial)
        return record

    def problem_here(self) -> str | None:
        """Why episodes cannot be played in this process (a worker on another machine that does not see the run
        directory at the same path), or None."""
        path = Path(self.run_path) / "config.json"
        try:
            run_id = json.loads(path.read_text()).get("run_id")
        except (OSError, ValueError, AttributeError):
            run_id = None
        if run_id != self.run_id:
            return (f"the run directory {self.run_path} (run {self.run_id}) is not visible here: every worker must "
                    "see it at the same path (a shared filesystem)")
        return None


class EpisodePlayer:
    """Plays a run's episodes one at a time in one process, keeping one env and one agent across them.

    Building them once (an engine's imports, a model, a server) is what makes long-lived
    workers pay off; every episode still resets both (`env.reset(seed, task)`,
    `agent.reset(task, seed)`) and gets fresh intervention and observer objects, so an
    episode plays the same whichever episodes came before. An episode that errors leaves
    its env and agent behind (the env is closed): the next one gets new ones, so a fault never
    carries over.
    """

    def __init__(self, host: Host, work: RunWork) -> None:
        self.host, self.work = host, work
        self._env: Any = None
        self._agent: Any = None

    def play(self, job: Job) -> dict:
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
                agent = agent_spec.factory(**config.agent_options)
                bind_env(agent, env)
            except BaseException:
                _close_env(env)
                raise
            self._env, self._agent = env, agent
        return self._env, self._agent

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
    try:
        env.close()
    except Exception:  # noqa: BLE001 - closing a broken env must not hide the result
        pass


def run_one_episode(host: Host, config: RunConfig, run_id: str, run_path: Path, header_base: dict,
                    harness: str, task_id: str, trial: int = 1, player: EpisodePlayer | None = None) -> dict:
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
            record = _play_attempt(host, config, run_id, trace_path(run_path, harness, task_id, number, trial),
                                   header_base, harness, spec, names, task_id, number, trial, player)
            if spec.cascade:
                record["cost"] = attempt_cost([resolve_intervention(host, n) for n in names], record)
            attempts.append(record)
            if record.get("verified", record["won"]):  # the deployment verifier's verdict; else the env's grade
                break
    finally:
        if own:
            player.close()
    record = _merge_attempts(attempts, spec) if spec.cascade else attempts[0]
    record["key"] = episode_key(harness, task_id, trial)
    return record


def _merge_attempts(attempts: list[dict], spec: HarnessSpec) -> dict:
    """One record for a cascade: the last attempt's outcome, summed counts and costs, and each attempt."""
    merged = dict(attempts[-1])
    counters = [key for key, value in EpisodeTally().as_record().items() if isinstance(value, int)]
    counters += [key for key in EpisodeTally.OPTIONAL_COUNTERS if any(key in a for a in attempts)]
    for key in ["steps", "seconds", "cost", *counters]:  # every tally counter, so new ones add up too
        merged[key] = sum(a.get(key) or 0 for a in attempts)
    merged["interventions"] = dict(sum((Counter(a["interventions"]) for a in attempts), Counter()))
    merged["failures"] = merge_failures(attempts)
    if any("judge_replies" in a for a in attempts):
        merged["judge_replies"] = merge_judge_replies(attempts)
    if (cache := merge_cache_use(attempts)) is not None:
        merged["response_cache"] = cache
    merged["trace"] = attempts[0]["trace"]
    merged["verifier"] = spec.verifier
    merged["cascade_length"] = len(spec.attempts)
    merged["attempts"] = [{"interventions": list(names), "won": a["won"], "status": a["status"], "steps": a["steps"],
                           "cost": a["cost"], "trace": a["trace"],
                           **({"verified": a["verified"]} if "verified" in a else {})}
                          for names, a in zip(spec.attempts, attempts)]
    merged.pop("verified", None)  # per attempt only: the merged record's outcome is the last attempt's grade
    return merged


class _Attempt:
    """One attempt's trace and tally: its header written on opening, each event counted as it is written."""

    def __init__(self, path: Path, header_base: dict, config: RunConfig, run_id: str, harness: str, task_id: str,
                 seed: int, trial: int, params: dict, names: tuple[str, ...], number: int) -> None:
        self.path, self.harness, self.task_id, self.seed, self.trial = path, harness, task_id, seed, trial
        self.episode = episode_id(run_id, harness, task_id, trial)
        self.tally = EpisodeTally()
        self.steps = StepCounter(episode_key(harness, task_id, trial))  # reports each step to the run's display
        self.cache_use: Counter[str] = Counter()  # response-cache hits and misses of the episode's model calls
        self.seen = SeenByAgent()  # what a deployment verifier may see of the attempt
        self.started = time.perf_counter()
        self.trace = TraceWriter(path, {**header_base, "task_id": task_id, "harness": harness, "seed": seed,
                                        "episode_id": self.episode, "params": params, "interventions": list(names),
                                        "agent_options": redact(dict(config.agent_options)),
                                        "max_steps": config.max_steps,
                                        "attempt": number, "trial": trial})

    def emit(self, event_type: str, data: dict) -> None:
        """Write one event to the trace and count it (credentials in URLs of its texts masked: an error message
        quotes the endpoint's URL)."""
        if any(isinstance(value, str) and "://" in value for value in data.values()):
            data = {key: redact_text(value) if isinstance(value, str) else value for key, value in data.items()}
        self.trace.emit(event_type, data)
        self.tally.add(event_type, data)
        self.seen.add(event_type, data)
        self.steps.add(event_type, data)

    def record(self, status: str, won: bool, steps: int, error: str | None, score: Any, max_score: Any) -> dict:
        """Close the trace; return the attempt's record."""
        self.trace.close()
        return {
            "harness": self.harness, "task_id": self.task_id, "episode_id": self.episode, "trial": self.trial,
            "seed": self.seed, "status": status, "won": won, "steps": steps,
            "error": redact_text(error) if error else error,
            "score": score, "max_score": max_score,
            "seconds": round(time.perf_counter() - self.started, 3),
            "trace": str(self.path.relative_to(rundir_root(self.path))),
            **self.tally.as_record(),
            **({"response_cache": {"hits": self.cache_use["hits"], "misses": self.cache_use["misses"]}}
               if self.cache_use else {}),
        }


def _play_attempt(host: Host, config: RunConfig, run_id: str, trace_path: Path, header_base: dict, harness: str,
                  spec: HarnessSpec, names: tuple[str, ...], task_id: str, attempt: int, trial: int,
                  player: EpisodePlayer) -> dict:
    """Play one attempt with the player's env and agent and fresh intervention plugins; return its record."""
    seed = episode_seed(config.seed, task_id, trial)
    params = {**spec.params, **config.params}
    play = _Attempt(trace_path, header_base, config, run_id, harness, task_id, seed, trial, params, names, attempt)
    try:
        try:
            env, agent = player.instances()
            # the plugins' model roles may use the agent's own model (`shared_agent_model`), and the tokens
            # they spend count in the episode's record, apart from the agent's
            with agent_model_shared(getattr(agent, "model", None)), judge_calls_reported(play.emit), \
                    cache_use_counted() as play.cache_use:
                interventions = [(name, resolve_intervention(host, name).factory(params)) for name in names]
                observers = [(o.name, o.factory()) for o in host.observers]
                hooks = EpisodeHooks(interventions, observers, hook_deadline=config.hook_deadline or None)
                episode_config = EpisodeConfig(run_id, play.episode, config.env, task_id, harness, config.agent,
                                               seed, config.max_steps, playbook_path(config, harness), params,
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
            play.emit("error", {"message": error})
            play.emit("end", {"status": status, "won": won, "steps": steps, "error": error})
    except BaseException:  # a strict run's error, or an interrupt: the run stops here
        play.trace.close()
        player.discard()
        raise
    if status == "error":
        player.discard()  # whatever failed may have left the env or the agent broken
        verdict = None
    record = play.record(status, won, steps, error, score, max_score)
    if verdict is not None:
        record["verified"] = verdict.passed
    return record


class SeenByAgent:
    """Collects, from an attempt's trace events, what the agent saw: the goal, each step's action, observation and
    validity (rolled-back steps dropped), and whether its last proposal declared the task done. Never a grade."""

    def __init__(self) -> None:
        self.goal = ""
        self.steps: list[tuple[int, str, str, bool]] = []
        self.finished = False

    def add(self, event_type: str, data: dict) -> None:
        """Take what an event shows the agent."""
        if event_type == "reset":
            self.goal = str(data.get("goal") or "")
        elif event_type == "proposal":
            self.finished = bool(data.get("finish"))
        elif event_type == "step":
            self.steps.append((int(data["step"]), str(data.get("action", "")), str(data.get("observation", "")),
                               bool(data.get("valid_action", True))))
            self.finished = False
        elif event_type == "rollback":
            self.steps = [s for s in self.steps if s[0] < int(data["to_step"])]

    def view(self, ids: EpisodeIds, max_steps: int, remove_grade_text: Callable[[str], str]) -> AttemptView:
        """The frozen view a deployment verifier gets, every text through the env's `remove_grade_text`."""
        return AttemptView(ids, remove_grade_text(self.goal),
                           tuple(AttemptStep(action, remove_grade_text(observation), valid)
                                 for _, action, observation, valid in self.steps),
                           self.finished, max_steps)


def attempt_verifier(host: Host, spec: HarnessSpec, params: dict) -> Callable[[AttemptView], Any]:
    """The cascade's deployment verifier built with the harness parameters (KeyError when none is registered)."""
    return host.attempt_verifiers.get(spec.verifier).factory(params)


def verify_attempt(host: Host, config: RunConfig, spec: HarnessSpec, params: dict, play: "_Attempt", run_id: str,
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
    play.emit("attempt_verdict", {"verifier": spec.verifier, "passed": verdict.passed, "why": verdict.why})
    return verdict


def rundir_root(trace_path: Path) -> Path:
    """The run directory a trace file belongs to (DIR/traces/<harness>/<file>)."""
    return trace_path.parents[2]
