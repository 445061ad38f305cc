"""The `playground` command line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from playground.host import PluginLoadError, get_host
from playground.playbook_cli import playbook_group
from playground.report import format_table
from playground.rundir import RunDirError
from playground.runner import RunConfig, RunConfigError, check_config, resolve_tasks, run

DEFAULT_ENV = "textworld:custom"
DEFAULT_AGENT = "noisy"
DEFAULT_HARNESSES = ("base", "sentry")


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


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


@click.group()
@click.version_option(package_name="playground")
def cli() -> None:
    """playground: run agents on text benchmarks under failure-recovery harnesses."""


def _agent_options(pairs: tuple[str, ...], base_url: str | None, model: str | None) -> dict:
    """Agent options from --agent-option, plus --llm-base-url and --model when given."""
    options = parse_pairs(pairs, "--agent-option")
    if base_url:
        options["base_url"] = base_url
    if model:
        options["model"] = model
    return options


def episode_options(command):
    """The options that say what to run: env, tasks, agent, parameters, budget, seed."""
    options = [
        click.option("--env", "env_name", default=None, help=f"env or env:task_set [default: {DEFAULT_ENV}]"),
        click.option("--agent", default=None, help=f"agent name [default: {DEFAULT_AGENT}]"),
        click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
                     help="agent option (repeatable)"),
        click.option("--llm-base-url", default=None,
                     help="OpenAI-compatible endpoint for --agent llm (e.g. http://127.0.0.1:8000/v1)"),
        click.option("--model", default=None, help="model name for --agent llm"),
        click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="harness parameter (repeatable)"),
        click.option("--episodes", type=click.IntRange(min=1), default=None, help="number of tasks from the split"),
        click.option("--split", default=None, help="task split (e.g. train, dev, test)"),
        click.option("--seed", type=int, default=0, show_default=True, help="run seed (episode seeds derive from it)"),
        click.option("--max-steps", type=click.IntRange(min=1), default=40, show_default=True,
                     help="step budget per episode"),
        click.option("--strict", is_flag=True, help="stop at the first plugin, env or agent error"),
        click.option("--quiet", is_flag=True, help="no progress bar"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def make_config(host, harnesses, out: str, playbook: str | None, *, env_name, agent, agent_options, llm_base_url,
                model, params, episodes, split, seed, max_steps, strict, quiet) -> RunConfig:
    """Build and check a RunConfig from the command line; CLIError names what is wrong."""
    env, _, task_set = (env_name or DEFAULT_ENV).partition(":")
    try:
        task_set, split, tasks = resolve_tasks(host, env, task_set or None, split, episodes)
        config = RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent=agent or DEFAULT_AGENT,
                           harnesses=list(dict.fromkeys(harnesses)), out=out, seed=seed, max_steps=max_steps,
                           agent_options=_agent_options(agent_options, llm_base_url, model),
                           params=parse_pairs(params, "--param"), playbook=playbook, strict=strict)
        check_config(host, config)
    except RunConfigError as exc:
        raise CLIError(str(exc)) from None
    return config


def run_with_progress(host, config: RunConfig, quiet: bool, workers: int = 1) -> dict:
    """Run `config` with a progress bar on stderr; return the summary."""
    click.echo(f"run: {config.env}:{config.task_set} split={config.split} tasks={len(config.tasks)} "
               f"agent={config.agent} harnesses={','.join(config.harnesses)} -> {config.out}", err=True)
    with click.progressbar(length=len(config.tasks) * len(config.harnesses), label="episodes", file=sys.stderr,
                           show_pos=True, item_show_func=lambda s: s, hidden=quiet) as bar:
        def progress(message: str, record: dict | None) -> None:
            if record is None:
                click.echo(f"  {message}", err=True)
            else:
                bar.update(1, f"{message}: {record['status']}")

        try:
            return run(host, config, progress, workers=workers)
        except (RunConfigError, RunDirError) as exc:
            raise CLIError(str(exc)) from None


@cli.command("run")
@episode_options
@click.option("--harness", "harnesses", multiple=True,
              help="harness to run (repeatable; each runs the same tasks) [default: base, and sentry when installed]")
@click.option("--out", default=None, help="run directory; rerun with the same DIR to resume [default: runs/<time>]")
@click.option("--playbook", default=None, help="playbook database for harnesses that use one")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="episodes played at once, in worker processes")
def run_command(harnesses, out, playbook, workers, **options) -> None:
    """Run an agent on a task set under one or more harnesses and print a table."""
    host = get_host()
    if not harnesses:
        harnesses = tuple(h for h in DEFAULT_HARNESSES if h in host.harnesses)
    out = out or str(Path("runs") / time.strftime("run-%Y%m%d-%H%M%S"))
    config = make_config(host, harnesses, out, playbook, **options)
    summary = run_with_progress(host, config, options["quiet"], workers)
    click.echo(format_table(summary))
    click.echo(f"summary: {Path(out) / 'summary.json'}", err=True)


@cli.group("envs", invoke_without_command=True)
@click.pass_context
def envs_command(ctx: click.Context) -> None:
    """List envs and their task sets (`envs setup NAME` installs what an env needs)."""
    if ctx.invoked_subcommand is not None:
        return
    for spec in get_host().envs:
        click.echo(f"{spec.name}: {spec.description}  [plugin {spec.plugin}]")
        for name, task_set in spec.provider.task_sets().items():
            default = " (default)" if name == spec.provider.default_task_set else ""
            click.echo(f"  {spec.name}:{name}{default}  splits: {', '.join(task_set.splits)}  - {task_set.description}")


@envs_command.command("setup")
@click.argument("name")
def envs_setup_command(name: str) -> None:
    """Install what env NAME needs outside this environment (e.g. AppWorld's own virtual environment)."""
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
    """List agents."""
    for spec in get_host().agents:
        click.echo(f"{spec.name}: {spec.description}  [plugin {spec.plugin}]")


@cli.command("harnesses")
def harnesses_command() -> None:
    """List harnesses and the interventions each uses."""
    host = get_host()
    for spec in host.harnesses:
        parts = ", ".join(spec.interventions) or "no interventions"
        click.echo(f"{spec.name}: {spec.description} ({parts})  [plugin {spec.plugin}]")
    for spec in host.interventions:
        modes = f" modes: {', '.join(spec.modes)}" if spec.modes else ""
        click.echo(f"  intervention {spec.name}: {spec.description}{modes}, cost in {spec.cost_unit}")


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
def new_plugin_command(name: str, parent: str) -> None:
    """Write a ready-to-install plugin project NAME (an intervention, a harness, a test)."""
    from playground.scaffold import scaffold_plugin

    try:
        target = scaffold_plugin(name, Path(parent))
    except (ValueError, OSError) as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"created {target}; next: pip install -e {target} && playground harnesses && pytest {target}")


cli.add_command(playbook_group)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; user errors print one line and exit with code 2."""
    import playground.darc_cli  # noqa: F401 - adds the `darc` commands to `cli`

    try:
        get_host().add_commands(cli)
        cli.main(args=argv, prog_name="playground", standalone_mode=False)
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.UsageError as exc:
        where = f" (playground {exc.ctx.command.name})" if exc.ctx and exc.ctx.command else ""
        click.echo(f"error: {exc.format_message()}{where}", err=True)
        return 2
    except (CLIError, PluginLoadError) as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
