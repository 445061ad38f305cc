"""Checks a run's configuration before anything is played: its tasks, agent, harnesses, verifiers, parameters
(against their declarations, `playground.run.parameters`) and playbooks; RunConfigError names what is wrong and
lists the choices."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from playground.core.episode_hooks import EpisodeHooks
from playground.core.errors import PlaygroundError
from playground.host.manager import Host
from playground.host.registry import GRADE_VERIFIER
from playground.run.config import AgentUnavailable, RunConfig, RunConfigError, playbook_path
from playground.run.harnesses import attempt_verifier, resolve_harness, resolve_intervention
from playground.run.parameters import check_params
from playground.run.paths import URLPathError, plain_path
from playground.run.secrets import redact_url
from playground.run.services import build_intervention, episode_services


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


def check_config(host: Host, config: RunConfig) -> Any:
    """Raise RunConfigError naming the first unknown agent or harness, or a bad agent option or parameter; return
    the agent built to check its options (the run's lock reads it, and the run's first player plays it: built once
    for all three; `check_run` keeps it with the check, for a caller that runs the config itself). A run directory or
    playbook that looks like a URL is refused first, before anything is made (`playground.run.paths`)."""
    try:
        plain_path(config.out, "--out")
        plain_path(config.playbook, "--playbook")
    except URLPathError as exc:
        raise RunConfigError(str(exc)) from None
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
    for option, seconds in (("--hook-deadline", config.hook_deadline), ("--episode-deadline", config.episode_deadline)):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) \
                or seconds < 0:  # nan compares false with every limit: it would turn the deadline off
            raise RunConfigError(f"{option} must be a finite number of seconds, at least 0 (0: no limit), "
                                 f"got {seconds!r}")
    if config.playbook is not None and not str(config.playbook).strip():
        raise RunConfigError("--playbook is empty")
    try:
        agent = host.agents.get(config.agent).factory(**config.agent_options)
    except (PlaygroundError, ValueError) as exc:  # a TypeError is a bug in the factory, not bad config
        raise AgentUnavailable(str(exc)) from None
    for harness, spec in zip(config.harnesses, specs):
        if spec.cascade and spec.verifier != GRADE_VERIFIER:
            try:
                attempt_verifier(host, spec, {**spec.params, **config.params})
            except KeyError:
                raise RunConfigError(f"harness {harness!r}: unknown verifier {spec.verifier!r}; choose from: "
                                     f"{', '.join([GRADE_VERIFIER, *host.attempt_verifiers.names()])}") from None
            except (PlaygroundError, ValueError) as exc:
                raise RunConfigError(f"harness {harness!r}: verifier {spec.verifier!r}: {exc}") from None
    try:
        check_params(host, list(zip(config.harnesses, specs)), config.params)
    except KeyError as exc:  # an intervention that does not resolve
        raise RunConfigError(exc.args[0]) from None
    except ValueError as exc:  # ... or that its loader cannot build
        if isinstance(exc, RunConfigError):
            raise
        raise RunConfigError(str(exc)) from None
    built: dict[str, list[tuple[str, Any]]] = {}  # harness -> its interventions, built with the run's parameters
    try:
        for harness, spec in zip(config.harnesses, specs):
            playbook = playbook_path(config, harness)
            built[harness] = [(name, build_intervention(
                resolve_intervention(host, name), {**spec.params_for(name), **config.params},
                episode_services("", config.env, harness, config.seed, playbook, str(config.out), name, checking=True)))
                              for name in sorted({n for attempt in spec.attempts for n in attempt})]
    except (PlaygroundError, ValueError) as exc:  # a TypeError is a bug in the factory, not bad config
        raise RunConfigError(str(exc)) from None
    check_playbooks(host, config, built)
    return agent


@dataclass(frozen=True, eq=False)
class CheckedRun:
    """A run configuration that passed `check_config` on `host`, what it held then, and the agent the check built.

    `playground run` checks its configuration once, in the CLI, and hands this to the runner
    (`run(..., checked=...)`), which takes it instead of checking again while it `holds`; its
    agent is the one the lock reads and the first player plays (see `episodes.BuiltAgent`).
    """

    host: Host
    config: RunConfig
    agent: Any
    snapshot: dict

    def holds(self, host: Host, config: RunConfig) -> bool:
        """Whether this check stands for running `config` on `host`: the same objects, the config unchanged since."""
        return host is self.host and config is self.config and asdict(config) == self.snapshot


def check_run(host: Host, config: RunConfig) -> CheckedRun:
    """`check_config`, kept with what it checked and the agent it built (RunConfigError as there)."""
    agent = check_config(host, config)
    return CheckedRun(host, config, agent, asdict(config))


def check_playbooks(host: Host, config: RunConfig, built: dict[str, list[tuple[str, Any]]]) -> None:
    """Ask the plugins (`check_playbook`) whether each harness's playbook path will do: every loaded plugin, then
    the harness's interventions `built` with the run's parameters; RunConfigError lists every problem."""
    problems: list[str] = []
    for harness in config.harnesses:
        path = playbook_path(config, harness)
        said = host.call_plugins("check_playbook", path=path)
        said += EpisodeHooks(built.get(harness, ())).collect("check_playbook", path=path)
        shown = redact_url(path)  # a URL's password is never shown
        where = f"--playbook {shown!r}" if config.playbook else f"the playbook of harness {harness!r} ({shown})"
        for sentence in said:
            for text in (sentence if isinstance(sentence, (list, tuple)) else [sentence]):
                if text and f"{where}: {text}" not in problems:
                    problems.append(f"{where}: {text}")
    if problems:
        raise RunConfigError("; ".join(problems))
