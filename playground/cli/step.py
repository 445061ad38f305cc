"""A plugin's pipeline step run from the command line over a finished run: `playground study step NAME RUN_DIR`
for every registered step, and `playground PREFIX COMMAND RUN_DIR` for a step that names a command
(`PipelineStep.command`: a step `NAME.STEP` with command `go` is `playground NAME go`).

The options are the fields of the step's parameter model (`--max-len` for `max_len`, a `Literal` as a choice, a
bool as a flag, a list or a dict as a repeated option, a dict's items as KEY=VALUE), checked by that model, so a
plugin writes no command-line code for its stages. The step runs in RUN_DIR itself, or with `--out DIR` in a copy
of RUN_DIR at DIR made as a study's pipeline makes one (records copied, traces hard-linked, `pipeline.json`
recording the steps done), which leaves RUN_DIR as it was; a second step over the same DIR runs in it again, and
a copy made for a step that is refused before it writes anything is removed.
What the step returns is printed as JSON.
"""

from __future__ import annotations

import functools
import json
import shutil
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from playground.cli.options import CLIError, nonempty, parse_pairs
from playground.core.pipeline_step import PipelineStep
from playground.host.manager import Host, get_host
from playground.run.parameters import type_members
from playground.run.paths import path_callback
from playground.run.pipelines import copy_run, read_record, run_step
from playground.run.rundir import records_so_far


def _bare(annotation: Any) -> Any:
    """`annotation` without an `Optional[...]` around it (a union of several types stays as it is)."""
    members, _ = type_members(annotation)
    return members[0] if len(members) == 1 else annotation


def field_option(name: str, field: FieldInfo) -> tuple[list[str], dict[str, Any]]:
    """The declarations and settings of one parameter's option: `--name-with-hyphens`, typed, its help the field's
    description. Every option defaults to "not given", so the model's own default applies."""
    flag = "--" + name.replace("_", "-")
    kind = _bare(field.annotation)
    origin = typing.get_origin(kind)
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    shown = None if default in (None, "", [], {}, ()) else str(default)
    help_text = (field.description or "") + (f"  [default: {shown}]" if shown and kind is not bool else "")
    common: dict[str, Any] = {"help": help_text, "required": field.is_required() and kind is not bool}
    if kind is bool:
        if field.default is True:
            return [f"{flag}/--no-{flag[2:]}", name], {"default": None, **common}
        return [flag, name], {"is_flag": True, "default": False, **common}
    if origin is Literal:
        return [flag, name], {"type": click.Choice([str(a) for a in typing.get_args(kind)]), "default": None,
                              **common}
    # a repeated option: `--agent-option K=V` for `agent_options`, the plural spelling accepted too
    flags = [flag[:-1], flag] if flag.endswith("s") else [flag]
    if origin is dict:
        return [*flags, name], {"multiple": True, "metavar": "KEY=VALUE", **common}
    if origin in (list, tuple):
        return [*flags, name], {"multiple": True, **common}
    return [flag, name], {"type": kind if kind in (int, float) else str, "default": None, **common}


def model_options(model: type[BaseModel]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for a command: the fields of `model` as its options (`field_option`), handed to the command
    as one checked instance in its `params` argument (CLIError names the option the model refuses)."""
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in model.model_fields if name in kwargs}
            return function(*args, params=params_from(model, given), **kwargs)

        for name, field in reversed(list(model.model_fields.items())):
            decls, settings = field_option(name, field)
            command = click.option(*decls, **settings)(command)
        return command

    return decorate


def params_from(model: type[BaseModel], given: dict[str, Any]) -> BaseModel:
    """The step's parameters from the options given (those left out take the model's defaults); CLIError names
    the option the model refuses."""
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        value = given.get(name)
        if value is None or value == () or (value is False and field.default is False):  # a flag not given
            continue
        origin = typing.get_origin(_bare(field.annotation))
        if origin is dict:
            value = parse_pairs(value, "--" + name.replace("_", "-").removesuffix("s"))
        elif origin in (list, tuple):  # repeated, or comma-separated
            value = [part.strip() for item in value for part in str(item).split(",") if part.strip()]
        values[name] = value
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ", ".join("--" + str(part).replace("_", "-") for part in error["loc"][:1]) or "the options"
        raise CLIError(f"{where}: {error['msg']} (given: {error.get('input')!r})") from None


def _folder(run_dir: Path, out: str | None) -> tuple[Path, bool]:
    """Where the step runs: RUN_DIR, or a copy of it at `out` (made now, or made by an earlier step); and whether
    the copy was made now."""
    if not (run_dir / "config.json").is_file():
        raise CLIError(f"{run_dir}: not a run directory (no config.json)")
    if out is None:
        return run_dir, False
    folder = Path(nonempty(out, "--out"))
    if folder.resolve() == run_dir.resolve():
        raise CLIError("--out names RUN_DIR itself; leave --out out to run the step in RUN_DIR")
    if folder.exists() and any(folder.iterdir()):
        record = read_record(folder)
        if record is None or record.get("grid") != str(run_dir.resolve()):
            made = f"a copy of {record.get('grid')}" if record else "a folder with other files in it"
            raise CLIError(f"--out {folder}: {made}, not a copy of {run_dir} made by a step; name a new folder")
        return folder, False  # a copy an earlier step made: this step runs in it too
    copy_run(run_dir, folder, str(run_dir.resolve()), len(records_so_far(run_dir)))
    return folder, True


def step_command(step: PipelineStep, name: str) -> click.Command:
    """The command that runs `step` over a run directory."""
    def run(run_dir: str, out: str | None, **given: Any) -> None:
        params = params_from(step.params_model, given)
        folder, fresh = _folder(Path(run_dir), out)
        copied = sorted(folder.rglob("*")) if fresh else []
        try:
            result = run_step(get_host(), step.name, folder, params)
        except Exception:
            if fresh and sorted(folder.rglob("*")) == copied:  # refused before writing: no copy left behind
                shutil.rmtree(folder, ignore_errors=True)
            raise
        if result is not None:
            click.echo(json.dumps(result, indent=2, default=str))
        click.echo(f"{step.name}: done in {folder}", err=True)

    params: list[click.Parameter] = [
        click.Argument(["run_dir"], callback=path_callback),
        click.Option(["--out"], default=None, callback=path_callback, metavar="DIR",
                     help="run the step in a copy of RUN_DIR made here (RUN_DIR stays as it is) [default: in RUN_DIR]"),
        *(click.Option(decls, **settings) for decls, settings in
          (field_option(name, field) for name, field in step.params_model.model_fields.items())),
    ]
    described = step.description[:1].upper() + step.description[1:]
    command = click.Command(name, callback=run, params=params, short_help=described,
                            help=f"{described} (the pipeline step "
                                 f"{step.name}, plugin {step.plugin!r}), over the finished run RUN_DIR.")
    command.plugin = step.plugin  # type: ignore[attr-defined]  # whose options these are (scripts/apparatus_size.py)
    return command


class StepGroup(click.Group):
    """`playground study step NAME`: one command per registered pipeline step, built when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return get_host().pipeline_steps.names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        try:
            return step_command(get_host().pipeline_steps.get(cmd_name), cmd_name)
        except KeyError:
            return None


step_group = StepGroup("step", help="Run a plugin's pipeline step over a finished run directory (the steps a "
                                    "study's [[pipelines]] run), its parameters as options.")


def add_step_commands(cli: click.Group, host: Host) -> None:
    """Mount each step that names a command under its prefix's group (`NAME.STEP` with command `go` as `playground
    NAME go`), making the group where no plugin did; a command a plugin registered itself is kept."""
    for step in host.pipeline_steps:
        if not step.command:
            continue
        prefix = step.name.partition(".")[0]
        group = cli.commands.get(prefix)
        if group is None:
            group = click.Group(prefix, help=f"The {prefix} plugin's pipeline steps as commands.")
            cli.add_command(group)
        if isinstance(group, click.Group) and step.command not in group.commands:
            group.add_command(step_command(step, step.command))
