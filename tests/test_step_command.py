"""Every pipeline step runs from the command line (`playground study step NAME RUN_DIR`, and mounted as
`playground PREFIX COMMAND` where the step names a command), its parameters as options built from its parameter
model (`playground.cli.step`): in RUN_DIR itself, or in a copy made with `--out` as a study's pipeline makes one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, Field

from playground.cli.step import add_step_commands, model_options
from playground.core.pipeline_step import PipelineStep
from playground.host.manager import get_host
from tests.conftest import cli


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory) -> Path:
    from playground.cli.main import main

    out = tmp_path_factory.mktemp("step") / "run"
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3", "--harness", "base",
                 "--episodes", "6", "--max-steps", "8", "--out", str(out), "--quiet"]) == 0
    return out


def test_study_step_lists_every_registered_step(capsys):
    code, out, err = cli(capsys, "study", "step", "--help")
    assert code == 0, err
    names = get_host().pipeline_steps.names()
    assert len(names) >= 5 and not [name for name in names if name not in out]


def test_a_step_runs_in_a_copy_and_leaves_the_run_as_it_was(noisy_run, tmp_path, capsys):
    before = sorted(p.relative_to(noisy_run) for p in noisy_run.rglob("*"))
    copy = tmp_path / "copy"
    code, out, err = cli(capsys, "study", "step", "aed.diagnose", str(noisy_run), "--out", str(copy))
    assert code == 0, err
    assert json.loads(out)["pairs"] >= 1  # what the step returned, as JSON
    assert sorted(p.relative_to(noisy_run) for p in noisy_run.rglob("*")) == before
    assert (copy / "aed" / "diagnoses.jsonl").is_file()
    trace = next((noisy_run / "traces").rglob("*.jsonl"))
    assert (copy / trace.relative_to(noisy_run)).stat().st_ino == trace.stat().st_ino  # hard-linked, not copied
    record = json.loads((copy / "pipeline.json").read_text())
    assert record["grid"] == str(noisy_run.resolve()) and record["episodes"] == 6
    assert [done["step"] for done in record["done"]] == ["aed.diagnose"]
    # a second step over the same copy runs in it (the mounted command, `aed replay`)
    code, out, err = cli(capsys, "aed", "replay", str(noisy_run), "--out", str(copy), "--trials", "1", "--limit", "1")
    assert code == 0, err
    assert (copy / "aed" / "replays.jsonl").is_file() and not (noisy_run / "aed").exists()
    record = json.loads((copy / "pipeline.json").read_text())
    assert [(d["step"], d["params"]) for d in record["done"]] == [
        ("aed.diagnose", {}), ("aed.replay", {"trials": 1, "limit": 1})]


def test_out_must_be_new_or_a_copy_of_the_same_run(noisy_run, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, "study", "step", "aed.diagnose", str(noisy_run), "--out", str(other))
    assert code == 2 and "other files" in err and (other / "notes.txt").read_text() == "mine"
    code, _, err = cli(capsys, "study", "step", "aed.diagnose", str(noisy_run), "--out", str(noisy_run))
    assert code == 2 and "RUN_DIR itself" in err
    code, _, err = cli(capsys, "study", "step", "aed.diagnose", str(tmp_path), "--out", str(tmp_path / "x"))
    assert code == 2 and "not a run directory" in err


def test_a_bad_parameter_is_named_with_its_value(noisy_run, tmp_path, capsys):
    code, _, err = cli(capsys, "aed", "diagnose", str(noisy_run), "--out", str(tmp_path / "c"), "--proposals", "0")
    assert code == 2 and "--proposals" in err and "0" in err and not (tmp_path / "c").exists()
    code, _, err = cli(capsys, "study", "step", "no.such_step", str(noisy_run))
    assert code == 2 and "no.such_step" in err


class Settings(BaseModel):
    """A parameter model of every kind of field."""

    name: str = Field(description="required text")
    fast: bool = False
    careful: bool = True
    view: Literal["full", "top"] = "full"
    budget: int | None = Field(default=None, ge=1)
    interventions: list[str] | None = None
    agent_options: dict[str, Any] = Field(default_factory=dict)


def _command() -> click.Command:
    @click.command()
    @model_options(Settings)
    def show(params: Settings) -> None:
        click.echo(params.model_dump_json())

    return show


@pytest.mark.parametrize("argv, expected", [
    (["--name", "a"], {"name": "a", "fast": False, "careful": True, "view": "full", "budget": None,
                       "interventions": None, "agent_options": {}}),
    (["--name", "a", "--fast", "--no-careful", "--view", "top", "--budget", "3", "--intervention", "x,y",
      "--interventions", "z", "--agent-option", "k=1", "--agent-option", "m=v"],
     {"name": "a", "fast": True, "careful": False, "view": "top", "budget": 3, "interventions": ["x", "y", "z"],
      "agent_options": {"k": 1, "m": "v"}}),
])
def test_a_models_fields_become_options(argv, expected):
    result = CliRunner().invoke(_command(), argv)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == expected


@pytest.mark.parametrize("argv, needle", [
    ([], "--name"), (["--name", "a", "--view", "side"], "side"), (["--name", "a", "--budget", "0"], "--budget"),
    (["--name", "a", "--agent-option", "novalue"], "KEY=VALUE"),
])
def test_a_value_the_model_refuses_is_a_named_error(argv, needle):
    result = CliRunner().invoke(_command(), argv)
    assert result.exit_code != 0 and needle in (result.output + str(result.exception))


def test_a_step_naming_a_command_is_mounted_under_its_prefix():
    group = click.Group("cli")
    mine = click.Group("mine")
    mine.add_command(click.Command("keep", callback=lambda: None))
    group.add_command(mine)
    steps = [PipelineStep("mine.keep", "a step whose command the plugin wrote itself", lambda *a: None, Settings,
                          "p", "keep"),
             PipelineStep("mine.go", "go", lambda *a: None, Settings, "p", "go"),
             PipelineStep("new.go", "go", lambda *a: None, Settings, "q", "go"),
             PipelineStep("new.quiet", "no command", lambda *a: None, Settings, "q")]

    class Host:
        pipeline_steps = steps

    add_step_commands(group, Host())  # type: ignore[arg-type]
    assert sorted(group.commands["mine"].commands) == ["go", "keep"]
    assert group.commands["mine"].commands["keep"].help is None  # the plugin's own command is kept
    assert sorted(group.commands["new"].commands) == ["go"]
