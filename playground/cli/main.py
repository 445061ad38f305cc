"""The `playground` command line."""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from playground.cli.cache import cache_command
from playground.cli.compare import compare_command
from playground.cli.fork import fork_command
from playground.cli.options import (
    CLIError,
    default_harnesses,
    episode_options,
    episodes_in_flight,
    make_checked_config,
)
from playground.cli.progress import ProgressDisplay
from playground.cli.report import report_command
from playground.cli.step import step_group
from playground.cli.study import study_group
from playground.cli.terminal import visible
from playground.cli.view import view_command
from playground.core.errors import PlaygroundError
from playground.host.manager import Host, get_host
from playground.run.config import RunConfig, RunConfigError
from playground.run.executors import EXECUTORS
from playground.run.parameters import describe_params
from playground.run.paths import path_callback
from playground.run.report import format_table
from playground.run.rundir import RunDirError
from playground.run.runner import run
from playground.run.validation import CheckedRun


class CommandHost:
    """The host the `playground` group hands its commands (`ctx.obj`): loaded on first use, so a command that needs
    none (and `--help`) does not load the plugins; it is the process-wide host the rest of the CLI uses."""

    def __init__(self) -> None:
        self._host: Host | None = None

    @property
    def host(self) -> Host:
        """The host, loaded (by the host layer's `get_host`) the first time a command asks for it."""
        if self._host is None:
            self._host = get_host()
        return self._host


def pass_host(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a plugin's click command: it is called with the host as its first argument (the host the
    `playground` group keeps on the click context), e.g. `@group.command("x") @pass_host def x(host, ...)`."""

    def with_host(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        return ctx.invoke(command, ctx.ensure_object(CommandHost).host, *args, **kwargs)

    return functools.update_wrapper(with_host, command)


@click.group()
@click.version_option(package_name="playground")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """playground: run agents on text benchmarks under failure-recovery harnesses."""
    ctx.ensure_object(CommandHost)  # the host, for commands that take it (`pass_host`), loaded when one asks


def run_with_progress(host, config: RunConfig, quiet: bool, workers: int | None = None, repair: bool = False,
                      check_lock: dict | None = None, executor: str = "local", address: str | None = None,
                      in_flight: int = 1, checked: CheckedRun | None = None) -> dict:
    """Run `config` with a progress bar on stderr (episodes, and steps, model calls and an ETA as they are played);
    return the summary. `checked` is the config's check (`make_checked_config`), so the runner need not repeat it."""
    trials = f" trials={config.trials}" if config.trials > 1 else ""
    trials += f" in-flight={in_flight}" if in_flight > 1 else ""
    click.echo(visible(f"run: {config.env}:{config.task_set} split={config.split} tasks={len(config.tasks)}{trials} "
                       f"agent={config.agent} harnesses={','.join(config.harnesses)} -> {config.out}"), err=True)
    episodes = len(config.tasks) * len(config.harnesses) * config.trials
    with ProgressDisplay(episodes, config.max_steps, hidden=quiet) as display:
        try:
            return run(host, config, display.progress, workers=workers, repair=repair, check_lock=check_lock,
                       executor=executor, address=address, in_flight=in_flight, checked=checked)
        except (RunConfigError, RunDirError) as exc:
            raise CLIError(str(exc)) from None


@cli.command("run")
@episode_options
@click.option("--harness", "harnesses", multiple=True,
              help="harness to run (repeatable; each runs the same tasks) [default: "
                   "those their plugins mark as defaults]")
@click.option("--out", default=None, help="run directory; rerun with the same DIR to resume [default: "
                                          "runs/<env>-<task set>-<agent>-<hash of the settings>]")
@click.option("--playbook", default=None, help="playbook database for harnesses that use one")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="episodes played at once, in worker processes [default: 1; with --executor ray, the cluster's CPUs]")
@click.option("--executor", type=click.Choice(sorted(EXECUTORS)), default="local", show_default=True,
              help="where episodes are played: local processes, or Ray (the 'ray' extra)")
@click.option("--address", default=None, metavar="ADDR",
              help="with --executor ray: the Ray cluster to join (auto, HOST:PORT, ray://HOST:10001) "
                   "[default: a private local Ray]")
@click.option("--repair", is_flag=True,
              help="move bad lines of a damaged DIR/episodes.jsonl, and records whose trace is gone, to "
                   "episodes.quarantine.jsonl and play them again")
@click.option("--trials", type=click.IntRange(min=1), default=1, show_default=True,
              help="play each task N times per harness, each trial with its own derived seed")
@click.option("--check-lock", "check_lock", default=None, metavar="LOCK.json", callback=path_callback,
              help="refuse to run (exit 2) when this run's lock differs from LOCK.json (another run's lock.json) "
                   "in what matters")
@click.option("--in-flight", "in_flight", type=click.IntRange(min=1), default=None,
              help="episodes played at once in this process, in threads: their model calls wait on the server "
                   "together (for endpoints; see docs/models.md) [default: 1; for an endpoint agent played here, "
                   "the --max-connections cap]")
@click.option("--max-connections", "max_connections", type=click.IntRange(min=1), default=None,
              help="at most N requests at once to each model endpoint, across all episodes and judges of a process; "
                   "under it the requests in flight adapt to the server (AIMD: a 429 or 503 halves them, a window "
                   "of successes adds one; Retry-After pauses the endpoint); with an endpoint agent (--agent llm) "
                   "and no --in-flight, also N episodes in flight [default: no cap; the adaptive limit stays at or "
                   "under 256]")
@click.option("--no-response-cache", "no_response_cache", is_flag=True,
              help="send every model request, even one the shared response cache holds (see docs/models.md)")
def run_command(harnesses, out, playbook, workers, executor, address, repair, trials, check_lock, in_flight,
                max_connections, no_response_cache, **options) -> None:
    """Run an agent on a task set under one or more harnesses and print a table."""
    from playground.agents.http_model import MAX_CONNECTIONS_VARIABLE
    from playground.agents.response_cache import RESPONSE_CACHE_VARIABLE
    from playground.run.lock import read_lock

    # environment variables, so the worker processes see them too
    if no_response_cache:
        os.environ[RESPONSE_CACHE_VARIABLE] = "off"
    if max_connections is not None:
        os.environ[MAX_CONNECTIONS_VARIABLE] = str(max_connections)
    host = get_host()
    wanted_lock = read_lock(check_lock) if check_lock is not None else None
    if not harnesses:
        harnesses = default_harnesses(host)
    if out is not None and not out.strip():
        raise CLIError("--out is empty; name a run directory (or leave --out out for runs/<env>-<task set>-...)")
    checked = make_checked_config(host, harnesses, out, playbook, trials=trials, **options)
    config = checked.config
    in_flight = episodes_in_flight(checked.agent, in_flight, max_connections, workers, executor)
    try:
        summary = run_with_progress(host, config, options["quiet"], workers, repair, wanted_lock, executor, address,
                                    in_flight, checked)
    except KeyboardInterrupt as stop:
        _say_interrupted(getattr(stop, "summary", None), config.out)
        raise
    click.echo(visible(format_table(summary)))  # everything a run prints goes through `visible`
    click.echo(visible(f"summary: {Path(config.out) / 'summary.json'}"), err=True)
    if config.agent == "local" and not config.agent_options.get("gguf"):
        click.echo(TINY_MODEL_NOTE, err=True)
    if summary.get("stopped_by_budget"):
        click.echo(f"token budget reached: {summary.get('tokens_spent', 0):,} tokens spent of --max-tokens-total "
                   f"{summary.get('max_tokens_total') or 0:,}; {summary.get('not_played', 0)} episode(s) not played; "
                   "rerun the same command with a larger --max-tokens-total (or none) to play them", err=True)
    if summary.get("unfinished"):
        why = "the run stopped after errors in a row; " if summary.get("stopped_by_breaker") else ""
        click.echo(visible(f"unfinished: {summary['unfinished']} episode(s) ended in an error and were not recorded "
                           f"({why}see {Path(config.out) / 'unfinished.jsonl'}); fix the cause and rerun the same "
                           "command to play them and whatever is left"), err=True)
        raise click.exceptions.Exit(UNFINISHED_EXIT)
    if summary.get("stopped_by_budget"):
        raise click.exceptions.Exit(UNFINISHED_EXIT)



TINY_MODEL_NOTE = (
    "note: these figures come from the embedded SmolLM2-135M, a tiny model: its judges' detections, verdicts and "
    "lessons are mostly empty (see the flags beside the counts), so this table shows that the loop runs, not where a "
    "method pays off. `playground run --agent noisy --agent-option judge_accuracy=0.9` shows each mechanism at a set "
    "judge accuracy in seconds; `--agent llm --llm-base-url URL --model NAME` plays a real model (docs/models.md).")

UNFINISHED_EXIT = 3  # episodes left unfinished (errors outside the agent) or unplayed (the token budget): rerun


def _say_interrupted(summary: dict | None, out: str) -> None:
    """After an interrupt: the table of what was played (its summary.json says `interrupted: true`) and how to
    resume. A terminal that is gone (SIGHUP) cannot take them: the run directory holds them anyway."""
    try:
        if summary is not None:
            click.echo(visible(format_table(summary)))
            click.echo(visible(f"summary: {Path(out) / 'summary.json'} (interrupted: the episodes recorded so far)"),
                       err=True)
        click.echo(visible(f"interrupted: what was played is kept in {out}; rerun the same command to resume"),
                   err=True)
    except OSError:
        pass


@cli.group("envs", invoke_without_command=True)
@click.pass_context
def envs_command(ctx: click.Context) -> None:
    """List envs and their task sets (`envs setup NAME` installs what an env needs)."""
    if ctx.invoked_subcommand is not None:
        return
    for spec in get_host().envs:
        needs = spec.provider.missing()
        click.echo(f"{spec.name}: {spec.description}  [plugin {spec.plugin}]"
                   + (f"\n  NOT INSTALLED: {needs}" if needs else ""))
        for name, task_set in spec.provider.task_sets().items():
            default = " (default)" if name == spec.provider.default_task_set else ""
            click.echo(f"  {spec.name}:{name}{default}  splits: {', '.join(task_set.splits)}  - {task_set.description}")


@envs_command.command("setup")
@click.argument("name")
def envs_setup_command(name: str) -> None:
    """Install what env NAME needs outside this environment (e.g. a benchmark's own virtual environment)."""
    host = get_host()
    try:
        provider = host.envs.get(name).provider
    except KeyError as exc:
        raise CLIError(exc.args[0]) from None
    try:
        provider.setup(lambda message: click.echo(message, err=True))
    except RuntimeError as exc:
        raise CLIError(f"envs setup {name}: {exc}") from None
    click.echo(f"{name}: set up")


@cli.command("agents")
def agents_command() -> None:
    """List agents (the one `playground run` plays without --agent is marked default)."""
    for spec in get_host().agents:
        default = " (default)" if spec.default else ""
        click.echo(f"{spec.name}: {spec.description}{default}  [plugin {spec.plugin}]")


@cli.command("harnesses")
@click.option("--params", "params_of", metavar="NAME", default=None,
              help="list harness NAME's parameters (--param keys): type, default, range and meaning of each")
def harnesses_command(params_of: str | None) -> None:
    """List harnesses and the interventions each uses, the harness prefixes, the interventions and their prefixes;
    with --params NAME, the parameters harness NAME takes."""
    host = get_host()
    if params_of is not None:
        try:
            lines = describe_params(host, params_of)
        except KeyError as exc:
            raise CLIError(exc.args[0]) from None
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        click.echo("\n".join(lines))
        return
    harnesses = list(host.harnesses)
    width = max((len(spec.name) for spec in harnesses), default=0)
    click.echo("harnesses:")
    for spec in harnesses:
        parts = (f"cascade: {' -> '.join(spec.cascade)}, until {spec.verifier}" if spec.cascade
                 else ", ".join(spec.interventions) or "no interventions")
        default = " (default)" if spec.default else ""
        click.echo(f"  {spec.name.ljust(width)}  {spec.description}{default} ({parts})  [plugin {spec.plugin}]")
    loaders = list(host.harness_loaders)
    if loaders:
        click.echo("harness prefixes (--harness PREFIX...):")
        width = max(len(loader.prefix) for loader in loaders)
        for loader in loaders:
            click.echo(f"  {loader.prefix.ljust(width)}  {loader.description}")
    interventions = list(host.interventions)
    width = max((len(spec.name) for spec in interventions), default=0)
    click.echo("interventions:")
    for intervention in interventions:
        modes = f"; modes: {', '.join(intervention.modes)}" if intervention.modes else ""
        click.echo(f"  {intervention.name.ljust(width)}  {intervention.description}{modes}; "
                   f"cost in {intervention.cost_unit}")
    intervention_loaders = list(host.intervention_loaders)
    if intervention_loaders:
        click.echo("intervention prefixes (in a harness: PREFIX...):")
        width = max(len(made.prefix) for made in intervention_loaders)
        for made in intervention_loaders:
            click.echo(f"  {made.prefix.ljust(width)}  {made.description}")


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def plugins_command(as_json: bool) -> None:
    """List plugins: where each came from, whether it loaded, which hooks it implements."""
    records = get_host().records
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in records], indent=2, default=list))
        return
    for r in records:
        click.echo(f"{r.name}  [{r.status}]  {r.source}")
        if r.hooks:
            click.echo(f"    hooks: {', '.join(r.hooks)}")
        if r.error:
            click.echo(f"    error: {r.error}")


@cli.command("new-plugin")
@click.argument("name")
@click.option("--dir", "parent", default=".", show_default=True, help="folder to create the project in")
@click.option("--kind", type=click.Choice(["intervention", "env", "agent"]), default="intervention", show_default=True,
              help="what the plugin registers")
def new_plugin_command(name: str, parent: str, kind: str) -> None:
    """Write a ready-to-install plugin project NAME: module, pyproject, README and a passing test."""
    from playground.cli.scaffold import scaffold_plugin

    try:
        target = scaffold_plugin(name, Path(parent), kind)
    except (ValueError, OSError) as exc:
        raise CLIError(str(exc)) from None
    listing = {"intervention": "harnesses", "env": "envs", "agent": "agents"}[kind]
    # pytest too: a user who installed only the `local` extra has none
    click.echo(f"created {target}; next: pip install -e {target} pytest && playground {listing} && pytest {target}")



cli.add_command(cache_command)
cli.add_command(compare_command)
cli.add_command(fork_command)
cli.add_command(report_command)
cli.add_command(view_command)
study_group.add_command(step_group)
cli.add_command(study_group)


_stopped_by: list[int] = []  # the signal (SIGTERM, SIGHUP) that stopped this process, if one did


def _stop_like_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM and SIGHUP stop a command as Ctrl-C does: work in flight is left, what finished is kept, a run says
    how to resume; the exit code is then 128 + the signal's number."""
    _stopped_by.append(signum)
    raise KeyboardInterrupt


def load_plugin_commands() -> None:
    """Add the plugins' commands to the CLI: those they register, and their pipeline steps that name a command."""
    from playground.cli.step import add_step_commands

    host = get_host()
    host.add_commands(cli)
    add_step_commands(cli, host)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; user errors print one line and exit with code 2."""
    if threading.current_thread() is threading.main_thread():  # (only the main thread may set handlers)
        for stop_signal in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(stop_signal, _stop_like_ctrl_c)
    try:
        args = sys.argv[1:] if argv is None else argv
        command = next((arg for arg in args if not arg.startswith("-")), None)
        if command not in cli.commands:  # a plugin's command, or a listing: load the plugins' commands first
            load_plugin_commands()
        code = cli.main(args=argv, prog_name="playground", standalone_mode=False)
        sys.stdout.flush()  # here, not at exit: a full stdout is then the named error below
        # without standalone mode click returns the exit code of a `click.exceptions.Exit` a command raised
        return code if isinstance(code, int) and not isinstance(code, bool) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        if _stopped_by:
            click.echo(f"stopped by {signal.Signals(_stopped_by[0]).name}", err=True)
            return 128 + _stopped_by[0]
        click.echo("aborted", err=True)
        return 130
    except click.UsageError as exc:
        where = f" (playground {exc.ctx.command.name})" if exc.ctx and exc.ctx.command else ""
        click.echo(visible(f"error: {exc.format_message()}{where}"), err=True)
        return 2
    except PlaygroundError as exc:
        raised = getattr(exc, "traceback", None)  # a plugin's, the env's or the agent's error (a --strict run's)
        if isinstance(raised, str) and raised:
            click.echo(visible(f"{raised.rstrip()}\n"), err=True)
        click.echo(f"error: {visible(str(exc))}", err=True)  # it may quote a task id, a file or a model's reply
        return 2
    except click.ClickException as exc:
        click.echo(visible(f"error: {exc.format_message()}"), err=True)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is not None or exc.errno not in OUTPUT_ERRNOS or not _stdout_broken():
            raise
        click.echo(f"error: cannot write to standard output ({exc.strerror or exc}); what the command wrote to files "
                   "is kept (a run's records are in its directory)", err=True)
        return 2


OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EDQUOT, errno.EFBIG})


def _stdout_broken() -> bool:
    """Whether standard output cannot be written (a full disk, /dev/full, a closed pipe), tried with one newline
    (asked only after a write failed with one of OUTPUT_ERRNOS). When so, it is pointed at /dev/null, so the
    interpreter's last flush at exit does not fail a second time with a traceback."""
    try:
        sys.stdout.write("\n")
        sys.stdout.flush()
        return False
    except OSError:
        pass
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # no file descriptor (a captured stream): nothing flushes it at exit
    return True


if __name__ == "__main__":
    sys.exit(main())
