"""The options shared by commands that run episodes (`run`, and plugin commands that play episodes)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import click

from playground.core.errors import PlaygroundError
from playground.host.registry import AgentSpec
from playground.run.config import DEFAULT_MAX_STEPS, AgentUnavailable, RunConfig, RunConfigError
from playground.run.files import safe_file_name
from playground.run.validation import CheckedRun, check_run, resolve_tasks

MODEL_FREE_AGENT = "noisy"  # suggested when the default agent cannot start (it needs no model)


class CLIError(PlaygroundError):
    """A user error on the command line: printed as one line, exit code 2."""


def nonempty(value: str, option: str) -> str:
    """`value`, unless it is empty or blank: then CLIError naming `option` (an empty path would mean the current
    folder, which nobody asks for on purpose)."""
    if not value.strip():
        raise CLIError(f"{option} is empty; name a path")
    return value


def default_env(host) -> str:
    """`ENV:TASK_SET` of the env its plugin marks as the default (`EnvProvider.is_default`), for a run without --env."""
    for spec in host.envs:
        if getattr(spec.provider, "is_default", False):
            return f"{spec.name}:{spec.provider.default_task_set}"
    raise CLIError("no loaded env is marked as the default; choose one with --env from: "
                   f"{', '.join(host.envs.names())}")


def default_agent(host) -> AgentSpec:
    """The AgentSpec its plugin marks as the default (`register(..., default=True)`), for a run without --agent."""
    marked = [spec for spec in host.agents if spec.default]
    if len(marked) != 1:
        which = f"agents {', '.join(s.name for s in marked)} are each" if marked else "no loaded agent is"
        raise CLIError(f"{which} marked as the default; choose one with --agent from: "
                       f"{', '.join(host.agents.names())}")
    return marked[0]


def default_max_steps(host, env: str, task_set: str) -> int:
    """The step budget the task set declares (`TaskSet.default_max_steps`), else DEFAULT_MAX_STEPS."""
    return host.envs.get(env).provider.task_sets()[task_set].default_max_steps or DEFAULT_MAX_STEPS


def default_harnesses(host) -> tuple[str, ...]:
    """The harnesses their plugins mark as defaults (`register(..., default=True)`), for a run without --harness."""
    return tuple(spec.name for spec in host.harnesses if spec.default)


def parse_pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """Parse repeated KEY=VALUE options into a dict."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CLIError(f"{option} expects KEY=VALUE, got {pair!r}")
        out[key] = _scalar(value)
    return out


def _scalar(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _agent_options(defaults: Mapping[str, Any], pairs: tuple[str, ...], base_url: str | None,
                   model: str | None) -> dict:
    """Agent options: `defaults`, then --agent-option, plus --llm-base-url and --model when given."""
    options = {**defaults, **parse_pairs(pairs, "--agent-option")}
    if base_url:
        options["base_url"] = base_url
    if model:
        options["model"] = model
    return options


def episode_options(command):
    """The options that say what to run (`playground run`'s): env, tasks, agent, parameters, budget, seed."""
    options = [
        click.option("--env", "env_name", default=None,
                     help="env or env:task_set [default: the env its plugin marks as default; `playground envs`]"),
        click.option("--agent", default=None,
                     help="agent name [default: the agent its plugin marks as default; `playground agents`]"),
        click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
                     help="agent option (repeatable)"),
        click.option("--llm-base-url", default=None,
                     help="OpenAI-compatible endpoint for --agent llm (e.g. http://127.0.0.1:8000/v1)"),
        click.option("--model", default=None, help="model name for --agent llm"),
        click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="harness parameter (repeatable)"),
        click.option("--episodes", type=click.IntRange(min=1), default=None, help="number of tasks from the split"),
        click.option("--split", default=None, help="task split (e.g. train, dev, test)"),
        click.option("--seed", type=int, default=0, show_default=True, help="run seed (episode seeds derive from it)"),
        click.option("--max-steps", type=click.IntRange(min=1), default=None,
                     help=f"step budget per episode [default: the task set's, else {DEFAULT_MAX_STEPS}]"),
        click.option("--strict", is_flag=True, help="stop at the first plugin, env or agent error"),
        click.option("--record-errors", is_flag=True,
                     help="record an episode that ends in an error as it ended [default: leave it unfinished, logged "
                          "in unfinished.jsonl, for the next run to play again]"),
        click.option("--max-consecutive-errors", type=click.IntRange(min=0), default=5, show_default=True,
                     help="stop handing out work after this many episodes in a row end in an error (0: never)"),
        click.option("--hook-deadline", type=click.FloatRange(min=0), default=600.0, show_default=True,
                     help="seconds one plugin hook call may take before it is that plugin's fault (0: no limit)"),
        click.option("--episode-deadline", type=click.FloatRange(min=0), default=14_400.0, show_default=True,
                     help="seconds one episode may take before it ends in an error (0: no limit)"),
        click.option("--max-tokens-total", "max_tokens_total", type=click.IntRange(min=1), default=None,
                     metavar="N",
                     help="run-wide token budget: hand out no new episode once the recorded episodes spent N tokens "
                          "(agent and judges, prompt and completion); the rest stay unplayed (exit 3) for a rerun "
                          "with a larger budget or none [default: no budget]"),
        click.option("--quiet", is_flag=True, help="no progress bar"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def make_config(host, harnesses, out: str | None, playbook: str | None, **options: Any) -> RunConfig:
    """Build and check a RunConfig from the command line (the options of `make_checked_config`); CLIError names
    what is wrong. Without `out`, the run directory is named by the settings (`default_run_dir`)."""
    return make_checked_config(host, harnesses, out, playbook, **options).config


def make_checked_config(host, harnesses, out: str | None, playbook: str | None, *, env_name, agent, agent_options,
                        llm_base_url, model, params, episodes, split, seed, max_steps, strict, quiet,
                        trials: int = 1, record_errors: bool = False, max_consecutive_errors: int = 5,
                        hook_deadline: float = 600.0, episode_deadline: float = 14_400.0,
                        max_tokens_total: int | None = None) -> CheckedRun:
    """`make_config`, returning the check itself (`validation.CheckedRun`: the config and the agent the check
    built), which `run(..., checked=...)` takes instead of checking the config again."""
    if env_name is not None and not env_name.strip():
        raise CLIError(f"--env is empty; choose from: {', '.join(host.envs.names())}")
    env, _, task_set = (env_name or default_env(host)).partition(":")
    chosen = None if agent else default_agent(host)
    agent, defaults = (chosen.name, chosen.default_options) if chosen else (agent, {})
    provider = host.envs.get(env).provider if env in host.envs.names() else None
    needs = provider.missing() if provider is not None else None
    if needs:
        raise CLIError(f"env '{env}': {needs}")
    try:
        task_set, split, tasks = resolve_tasks(host, env, task_set or None, split, episodes)
        config = RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent=agent,
                           harnesses=list(dict.fromkeys(harnesses)), out=out or "", seed=seed,
                           max_steps=max_steps or default_max_steps(host, env, task_set),
                           agent_options=_agent_options(defaults, agent_options, llm_base_url, model),
                           params=parse_pairs(params, "--param"), playbook=playbook, strict=strict, trials=trials,
                           record_errors=record_errors, max_consecutive_errors=max_consecutive_errors,
                           hook_deadline=hook_deadline, episode_deadline=episode_deadline,
                           max_tokens_total=max_tokens_total)
        if out is None:  # named by its settings, so the same bare command finds its run again and resumes it
            config.out = default_run_dir(config)
        checked = check_run(host, config)
    except AgentUnavailable as exc:
        # nothing about the agent was asked for: it cannot start here, so name one that needs no model
        other = MODEL_FREE_AGENT if chosen and not agent_options and MODEL_FREE_AGENT in host.agents else None
        raise CLIError(f"{exc}; or run an agent that needs no model: --agent {other}" if other else str(exc)) from None
    except RunConfigError as exc:
        raise CLIError(str(exc)) from None
    return checked


def connection_cap(max_connections: int | None) -> int | None:
    """The cap on requests at once per endpoint: `--max-connections`, else `$PLAYGROUND_MAX_CONNECTIONS` (read as the
    HTTP client reads it), else None (no cap, the default)."""
    from playground.agents.http_model import MAX_CONNECTIONS_VARIABLE

    if max_connections is not None:
        return max_connections
    value = os.environ.get(MAX_CONNECTIONS_VARIABLE, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def episodes_in_flight(agent: Any, in_flight: int | None, max_connections: int | None, workers: int | None = None,
                       executor: str = "local") -> int:
    """How many episodes `playground run` keeps in flight in its process: `--in-flight` when given; else, for an
    agent that talks to an HTTP endpoint (its `model` is an `HTTPChatModel`, as the `llm` agent's) played here (the
    local executor, one process), the connection cap (`connection_cap`), so one flag sets how many requests are at
    the server at once; else 1 (no cap, the embedded model, worker processes, Ray: each keeps its own rule)."""
    from playground.agents.http_model import HTTPChatModel

    if in_flight is not None:
        return in_flight
    cap = connection_cap(max_connections)
    if cap is None or executor != "local" or (workers or 1) > 1:
        return 1
    return cap if isinstance(getattr(agent, "model", None), HTTPChatModel) else 1


def default_run_dir(config: RunConfig) -> str:
    """The run directory of a run given no `--out`: runs/<env>-<task set>-<agent>-<hash>, the hash of every setting
    that decides what the run plays, so the same command resumes the same run and other settings get another (the
    token budget, `--max-tokens-total`, decides only where it stops: a rerun with another budget resumes it)."""
    settings = {key: value for key, value in asdict(config).items() if key not in ("out", "max_tokens_total")}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return str(Path("runs") / safe_file_name(f"{config.env}-{config.task_set}-{config.agent}-{digest}"))
