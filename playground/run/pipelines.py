"""A study's pipelines (`[[pipelines]]`): plugin steps (`register_pipeline_steps`) run in order over a copy of a
grid's finished run, each pipeline in its own folder of the study's directory.

The copy is made once, when the grid has played every episode (`OUT/<grid>` to `OUT/<pipeline>`; the finished
traces hard-linked where the filesystem allows, since no step writes a trace), so the grid's own directory stays as
its run left it and two pipelines over one grid (a diagnosis at two accuracies) never see
each other's files. `pipeline.json` in the folder records the grid, the episodes copied and every step done with
its parameters and seconds: a rerun skips the steps done, reruns a step that was stopped part-way (the step picks
up where it stopped), and refuses a study whose steps changed under a folder that ran others. A step that fails
is named; the study's other pipelines still run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from playground.agents.judge_calls import judge_calls_reported
from playground.core.study_file import Grid, Pipeline, StudyError, resolve_out
from playground.run.files import atomic_write_text
from playground.run.rundir import records_so_far

RECORD = "pipeline.json"  # in a pipeline's folder: what it copied and the steps done
TRACES_DIR = "traces"  # a run's episode traces (`record_trace`): hard-linked into a pipeline's copy


def steps_of(host: Any, pipeline: Pipeline, smoke: bool, out: Path) -> list[tuple[dict[str, Any], BaseModel]]:
    """Each step call of `pipeline` (step name and parameters, as written) with its parameters validated by the
    step's model (`{out}` in them the study's directory `out`); StudyError names the pipeline, the step and what is
    wrong (a step no loaded plugin registers, a bad parameter)."""
    checked = []
    for number, call in enumerate(pipeline.called(smoke), start=1):
        try:
            step = host.pipeline_steps.get(call["step"])
        except KeyError:
            raise StudyError(f"pipeline {pipeline.name!r}, step {number}: no loaded plugin registers the step "
                             f"{call['step']!r} (registered: {', '.join(host.pipeline_steps.names()) or 'none'})"
                             ) from None
        try:
            checked.append((call, step.params_model.model_validate(resolve_out(call["params"], out))))
        except ValidationError as exc:
            error = exc.errors()[0]
            at = ".".join(str(part) for part in error["loc"]) or "(params)"
            raise StudyError(f"pipeline {pipeline.name!r}, step {number} ({call['step']}): params.{at}: "
                             f"{error['msg']}") from None
    return checked


def run_pipelines(host: Any, pipelines: Sequence[tuple[Pipeline, Grid]], out: Path, smoke: bool) -> dict[str, str]:
    """Run (or resume) each pipeline over its grid (the grid as played, at its size); every pipeline's steps are
    checked before any runs (StudyError). A pipeline whose step fails is left where it stopped and the others run;
    return {pipeline: what failed} for those."""
    checked = [(pipeline, grid, steps_of(host, pipeline, smoke, out)) for pipeline, grid in pipelines]
    failed = {}
    for pipeline, grid, steps in checked:
        try:
            run_pipeline(host, pipeline, grid, steps, out)
        except StudyError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's step: named, and the other pipelines still run
            failed[pipeline.name] = f"pipeline {pipeline.name!r}: {type(exc).__name__}: {exc}"
    return failed


def run_pipeline(host: Any, pipeline: Pipeline, grid: Grid, steps: list[tuple[dict[str, Any], BaseModel]],
                 out: Path) -> None:
    """Copy the grid's finished run to the pipeline's folder (once), then run the steps not yet done, recording
    each in `pipeline.json`."""
    folder = out / pipeline.name
    record = read_record(folder)
    if record is None:
        expected = len(grid.harnesses) * grid.episodes * grid.trials
        finished = len(records_so_far(out / grid.name))
        if finished < expected:
            raise StudyError(f"pipeline {pipeline.name!r} runs over grid {grid.name!r}, which has "
                             f"{expected - finished} episode(s) left to play: run the grid first")
        record = copy_run(out / grid.name, folder, grid.name, finished)
    done = record["done"]
    for number, (call, params) in enumerate(steps, start=1):
        if number <= len(done):
            if {"step": done[number - 1]["step"], "params": done[number - 1]["params"]} != call:
                raise StudyError(f"pipeline {pipeline.name!r}, step {number}: {folder} ran "
                                 f"{done[number - 1]['step']} with {done[number - 1]['params']}, the study now says "
                                 f"{call['step']} with {call['params']}: remove {folder} to run the pipeline afresh")
            continue
        run_step(host, call["step"], folder, params, call)


def copy_run(source: Path, folder: Path, grid: str, episodes: int) -> dict[str, Any]:
    """Copy the finished run `source` (grid `grid`'s, `episodes` records) to `folder`, traces hard-linked; write and
    return its `pipeline.json` record (no step done yet). A folder left by a copy cut short is replaced."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(source, folder, copy_function=_link_traces)
    record = {"grid": grid, "episodes": episodes, "done": []}
    atomic_write_text(folder / RECORD, json.dumps(record, indent=2) + "\n")
    return record


def run_step(host: Any, name: str, folder: Path, params: BaseModel, call: dict[str, Any] | None = None) -> object:
    """Run the step `name` in `folder` with `params`; where the folder is a pipeline's copy (`pipeline.json`),
    record it as done with its seconds, model calls and tokens (`call`: the step and its parameters as a study
    wrote them). Return what the step returned."""
    started = time.perf_counter()
    calls: list[Any] = []
    with judge_calls_reported(calls.append):  # a diagnoser's, and the judges' in the episodes it forks
        result = host.pipeline_steps.get(name).run(host, folder, params)
    record = read_record(folder)
    if record is not None:
        called = call or {"step": name, "params": params.model_dump(mode="json", exclude_defaults=True)}
        record["done"].append({**called, "seconds": round(time.perf_counter() - started, 3),
                               "model_calls": len(calls),
                               "tokens": sum(c.prompt_tokens + c.completion_tokens for c in calls)})
        atomic_write_text(folder / RECORD, json.dumps(record, indent=2) + "\n")
    return result


def _link_traces(source: str, target: str) -> None:
    """Copy one file of a grid's run into a pipeline's folder; a finished episode's trace (under `traces/`) is
    hard-linked instead, where the filesystem allows: it is never written again, and a grid's traces are most of
    its size (an evidence grid of 450 episodes copied into two pipelines)."""
    if TRACES_DIR in Path(source).parts:
        try:
            os.link(source, target)
            return
        except OSError:  # another filesystem, or one without hard links: copy
            pass
    shutil.copy2(source, target)


def read_record(folder: Path) -> dict[str, Any] | None:
    """A pipeline folder's `pipeline.json` (None before the copy was made); StudyError for one that is not
    readable."""
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record.get("done"), list):
            raise ValueError("no list of the steps done")
        return record
    except (OSError, ValueError, AttributeError) as exc:
        raise StudyError(f"{path} is not a pipeline record ({exc}): remove {folder} to run the pipeline afresh"
                         ) from None


@dataclass(frozen=True)
class PipelineRow:
    """What one pipeline has left: its steps, those done, and the seconds, model calls and tokens the rest should
    take (None where no earlier run of those steps measured them)."""

    pipeline: str
    grid: str
    steps: int
    done: int
    seconds: float | None
    calls: float | None = None
    tokens: float | None = None


def plan_pipelines(pipelines: Sequence[tuple[Pipeline, Grid]], out: Path, smoke: bool,
                   rates_from: Path | None = None) -> list[PipelineRow]:
    """Per pipeline, the steps left and what they should take: each step's seconds, model calls and tokens in
    `rates_from` (an earlier run of the study, else `out`) per episode it copied, times the episodes the grid plays
    here (a step recorded before steps counted their calls counts as none)."""
    rows = []
    for pipeline, grid in pipelines:
        calls = pipeline.called(smoke)
        done = len((read_record(out / pipeline.name) or {"done": []})["done"])
        earlier = read_record((rates_from or out) / pipeline.name) or {"done": [], "episodes": 0}
        measured = earlier["done"]
        left = [0.0, 0.0, 0.0]  # seconds, model calls, tokens
        known = True
        for number in range(done, len(calls)):
            if number >= len(measured) or measured[number]["step"] != calls[number]["step"] or not earlier["episodes"]:
                known = False
                break
            scale = len(grid.harnesses) * grid.episodes * grid.trials / earlier["episodes"]
            for index, key in enumerate(("seconds", "model_calls", "tokens")):
                left[index] += measured[number].get(key, 0) * scale
        rows.append(PipelineRow(pipeline.name, grid.name, len(calls), done, *(left if known else (None,) * 3)))
    return rows
