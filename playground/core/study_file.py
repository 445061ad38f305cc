"""A study file's model: the grids of runs a study plays, the pipelines of plugin steps over copies of their runs,
the smoke size, the paper's numbers (`Study`), read from TOML and validated (`load_study`). `playground.run.study`
plans, runs and tabulates a study.

A harness name may hold `{here}`, the folder of the study file: a study ships the files its harnesses read (a
frozen policy, a prompt) beside it, as package data, and names them `PREFIX:{here}/FILE`. It may hold `{out}`, the
study's directory, to deploy what an earlier pipeline wrote (`PREFIX:{out}/PIPELINE/FILE`); a pipeline
step's string parameters may name `{out}` too (another folder's file). The table shows the name as declared; the
runs see the path.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from playground.core.errors import PlaygroundError


class StudyError(PlaygroundError, ValueError):
    """A study file that cannot be read or run: names the file and what is wrong."""


HERE = "{here}"  # in a harness name: the study file's folder
OUT = "{out}"  # in a harness name or a step's parameter: the study's directory
# the figures a cell has, each a per-episode mean or a share, that a paper's number can stand beside
PAPER_METRICS = ("success", "reward", "steps", "invalid", "resolved", "calls", "tokens", "interventions", "lessons")


class Grid(BaseModel):
    """One run of a study: env, tasks, agent, harnesses (the cells), seeds and budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="the grid's folder under the study's directory")
    env: str = Field(description="ENV or ENV:TASKSET")
    split: str | None = Field(default=None, description="the task set's split (default: its default)")
    episodes: int = Field(ge=1, description="tasks played per harness")
    trials: int = Field(default=1, ge=1, description="times each task is played per harness")
    max_steps: int = Field(default=40, ge=1, description="the step budget of an episode")
    seed: int = 0
    agent: str = "noisy"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    keep_agent: bool = Field(default=False, description="the agent is part of the design (a model-free control): "
                                                        "`study run --agent` does not replace it")
    harnesses: list[str] = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict, description="--param values for every harness")
    reference: str | None = Field(default=None, description="the harness each cell is paired with (default: "
                                                             "the first)")
    playbook_from: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/.+$",
                                      description="GRID/HARNESS: before this grid plays, each of its harnesses "
                                                  "gets its own copy of the playbook that earlier cell grew (the "
                                                  "held-out protocol); the two grids may share no task")

    @field_validator("harnesses")
    @classmethod
    def _distinct(cls, harnesses: list[str]) -> list[str]:
        if len(set(harnesses)) != len(harnesses):
            raise ValueError("a harness is listed twice")
        return harnesses

    def runnable(self, here: str | None, out: str | Path | None = None) -> list[str]:
        """The harness names as the runs see them: `{here}` replaced by the study file's folder, `{out}` by the
        study's directory."""
        return [resolve_here(harness, here).replace(OUT, str(out)) if out is not None else resolve_here(harness, here)
                for harness in self.harnesses]


def resolve_here(name: str, here: str | None) -> str:
    """`name` with `{here}` replaced by `here`; StudyError where the study's folder is unknown (a study built in
    code, not read from a file)."""
    if HERE not in name:
        return name
    if here is None:
        raise StudyError(f"harness {name!r} names {HERE}, the study file's folder, but this study was not read "
                         f"from a file")
    return name.replace(HERE, here)


def named_folders(value: Any) -> set[str]:
    """The study folders (grids, pipelines) a harness name or a parameter value names as `{out}/FOLDER`."""
    if isinstance(value, dict):
        return {name for item in value.values() for name in named_folders(item)}
    if isinstance(value, list):
        return {name for item in value for name in named_folders(item)}
    return set(re.findall(r"\{out\}/([A-Za-z0-9_.-]+)", value)) if isinstance(value, str) else set()


def resolve_out(value: Any, out: str | Path | None) -> Any:
    """`value` (a parameter: a string, or a list or table of them) with `{out}` replaced by the study's directory
    (left as it is where that is not known yet)."""
    if isinstance(value, dict):
        return {key: resolve_out(item, out) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_out(item, out) for item in value]
    return value.replace(OUT, str(out)) if isinstance(value, str) and out is not None else value


class StepCall(BaseModel):
    """One step of a pipeline: a plugin's registered step (`register_pipeline_steps`) and its parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: str = Field(description="the registered step, `PLUGIN.STEP`")
    params: dict[str, Any] = Field(default_factory=dict, description="validated by the step's parameter model")
    smoke_params: dict[str, Any] = Field(default_factory=dict, description="under --smoke, set over `params`")


class Pipeline(BaseModel):
    """Plugin steps run in order over a copy of a grid's finished run, in its own folder (`OUT/<name>`): a
    method's stages after the episodes (a diagnosis, then a replay). Its table rows are the grid's cells as that
    copy holds them, with the figures the steps' files give."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="the pipeline's folder under the study's directory")
    grid: str = Field(description="the grid whose finished run the pipeline copies")
    steps: list[StepCall] = Field(min_length=1)
    harnesses: list[str] | None = Field(default=None, description="the grid's harnesses the table shows a row for "
                                                                   "(default: every one)")

    def called(self, smoke: bool) -> list[dict[str, Any]]:
        """Each step and the parameters it runs with (`smoke_params` over `params` under --smoke; `{out}` as
        written: `resolve_out` gives the study's directory)."""
        return [{"step": call.step, "params": {**call.params, **(call.smoke_params if smoke else {})}}
                for call in self.steps]


class StandIn(BaseModel):
    """What a grid plays at smoke size instead of a task set that needs a download (CI has none): the env, its
    split and, where the grid's params name the real data, the params to use instead."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str = Field(description="ENV or ENV:TASKSET")
    split: str | None = None
    params: dict[str, Any] | None = Field(default=None, description="replace the grid's params (None: keep them)")


class Smoke(BaseModel):
    """The size every grid shrinks to under `--smoke`, and the stand-ins of grids whose data needs a download."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episodes: int = Field(default=2, ge=1)
    trials: int = Field(default=1, ge=1)
    max_steps: int = Field(default=3, ge=1)
    stand_ins: dict[str, StandIn] = Field(default_factory=dict, description="grid name -> what it plays instead")


class Study(BaseModel):
    """A study file: its grids, the smoke size and, for a paper's table, the paper's numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    title: str
    kind: str = Field(default="machinery", pattern="^(instrument|real-model|machinery)$",
                      description="which of the three kinds of figure the table is")
    paper: str = Field(default="", description="the paper table it reproduces, if any")
    # what every grid takes unless it sets the key itself (any grid field but its name); applied as the file is
    # read, so the grids (and study.json) hold the whole of each
    grid_defaults: dict[str, Any] = Field(default_factory=dict, exclude=True)
    grids: list[Grid] = Field(min_length=1)
    pipelines: list[Pipeline] = Field(default_factory=list)
    smoke: Smoke = Field(default_factory=Smoke)
    # the paper's success rate per "GRID/HARNESS" cell (or "HARNESS" for every grid), shown beside the measured
    paper_success: dict[str, float] = Field(default_factory=dict)
    # the paper's other figures, per metric (PAPER_METRICS) then cell as paper_success: a column beside each
    paper_figures: dict[str, dict[str, float]] = Field(default_factory=dict)
    # the plugins' table columns (`register_figures`) to show; None: every one some cell has a value for
    figures: list[str] | None = None
    _here: str | None = PrivateAttr(default=None)  # the study file's folder (`{here}`), set by load_study

    @model_validator(mode="before")
    @classmethod
    def _apply_grid_defaults(cls, data: Any) -> Any:
        """Each grid table as written over `grid_defaults` (a key the grid sets replaces the default's value whole,
        a table such as agent_options too)."""
        defaults = data.get("grid_defaults") if isinstance(data, dict) else None
        if not defaults:
            return data
        if not isinstance(defaults, dict):
            raise ValueError("grid_defaults: a table of grid fields")
        if "name" in defaults:
            raise ValueError("grid_defaults: name belongs to each grid (its folder)")
        unknown = sorted(set(defaults) - set(Grid.model_fields))
        if unknown:
            raise ValueError(f"grid_defaults: unknown grid field(s) {', '.join(unknown)}; choose from "
                             f"{', '.join(f for f in Grid.model_fields if f != 'name')}")
        grids = data.get("grids")
        if isinstance(grids, list):
            data = {**data, "grids": [{**defaults, **grid} if isinstance(grid, dict) else grid for grid in grids]}
        return data

    @field_validator("grids")
    @classmethod
    def _distinct_names(cls, grids: list[Grid]) -> list[Grid]:
        if len({g.name for g in grids}) != len(grids):
            raise ValueError("two grids share a name")
        return grids

    @field_validator("paper_figures")
    @classmethod
    def _known_metrics(cls, figures: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        unknown = sorted(set(figures) - set(PAPER_METRICS))
        if unknown:
            raise ValueError(f"unknown metric {', '.join(unknown)}; choose from {', '.join(PAPER_METRICS)}")
        return figures

    @model_validator(mode="after")
    def _cells_exist(self) -> Study:
        cells = {f"{grid.name}/{harness}" for grid in self.grids for harness in grid.harnesses}
        cells |= {f"{pipeline.name}/{harness}" for pipeline in self.pipelines
                  for grid in self.grids if grid.name == pipeline.grid for harness in grid.harnesses}
        harnesses = {harness for grid in self.grids for harness in grid.harnesses}
        for metric, figures in self.paper_metric_items():
            stray = sorted(key for key in figures if key not in cells and key not in harnesses)
            if stray:
                raise ValueError(f"the paper's {metric} names no cell of the study: {', '.join(stray)} (GRID/HARNESS "
                                 f"or HARNESS)")
        earlier: dict[str, Grid] = {}
        for grid in self.grids:
            if grid.playbook_from is not None:
                source, _, harness = grid.playbook_from.partition("/")
                if source not in earlier or harness not in earlier[source].harnesses:
                    raise ValueError(f"grid {grid.name!r}: playbook_from {grid.playbook_from!r} names no harness of "
                                     f"an earlier grid (GRID/HARNESS; a grid plays after the grids above it)")
            earlier[grid.name] = grid
        folders = [grid.name for grid in self.grids]
        for pipeline in self.pipelines:
            if pipeline.grid not in earlier:
                raise ValueError(f"pipeline {pipeline.name!r} names no grid {pipeline.grid!r}")
            stray = sorted(set(pipeline.harnesses or ()) - set(earlier[pipeline.grid].harnesses))
            if stray:
                raise ValueError(f"pipeline {pipeline.name!r} shows harness(es) its grid does not play: "
                                 f"{', '.join(stray)}")
            if pipeline.name in folders:
                raise ValueError(f"pipeline {pipeline.name!r}: a grid or another pipeline has that name (each is a "
                                 f"folder of the study)")
            folders.append(pipeline.name)
        self._check_order()
        stray = sorted(set(self.smoke.stand_ins) - {grid.name for grid in self.grids})
        if stray:
            raise ValueError(f"smoke.stand_ins names no grid: {', '.join(stray)}")
        return self

    def _check_order(self) -> None:
        """What a grid or step names under `{out}` is made before it: a grid deploys only what the pipelines of
        the grids above it wrote, and a step reads only a grid above its own or a pipeline above it."""
        grids = [grid.name for grid in self.grids]
        for grid in self.grids:
            before = grids[:grids.index(grid.name)]
            made = set(before) | {p.name for p in self.pipelines if p.grid in before}
            missing = sorted(named_folders(grid.harnesses) - made)
            if missing:
                raise ValueError(f"grid {grid.name!r} names {OUT}/{missing[0]}, which no grid above it or pipeline "
                                 f"over one makes (pipelines run after their grid, before the next grid)")
        for index, pipeline in enumerate(self.pipelines):
            before = grids[:grids.index(pipeline.grid) + 1]
            made = set(before) | {p.name for p in self.pipelines[:index] if p.grid in before}
            missing = sorted(named_folders([[c.params, c.smoke_params] for c in pipeline.steps]) - made)
            if missing:
                raise ValueError(f"pipeline {pipeline.name!r} names {OUT}/{missing[0]}, which is not made before it "
                                 f"(its grid or one above, or a pipeline above it over one of those)")

    def pipelines_of(self, grid: str) -> list[Pipeline]:
        """The pipelines over `grid`, in the file's order (they run after it, before the next grid)."""
        return [pipeline for pipeline in self.pipelines if pipeline.grid == grid]

    def folders(self) -> list[tuple[str, Grid, list[str]]]:
        """The table's folders in order: each grid, then each pipeline (over its grid), with the harnesses it
        shows a row for."""
        return ([(grid.name, grid, grid.harnesses) for grid in self.grids]
                + [(p.name, self.grid(p.grid), p.harnesses or self.grid(p.grid).harnesses) for p in self.pipelines])

    def grid(self, name: str) -> Grid:
        """The grid called `name`."""
        return next(grid for grid in self.grids if grid.name == name)

    @property
    def here(self) -> str | None:
        """The study file's folder (what `{here}` in a harness name stands for); None for a study built in code."""
        return self._here

    def paper_metric_items(self) -> list[tuple[str, dict[str, float]]]:
        """The paper's figures per metric, success first (paper_success and paper_figures together)."""
        merged = {**({"success": dict(self.paper_success)} if self.paper_success else {})}
        for metric, figures in self.paper_figures.items():
            merged[metric] = {**merged.get(metric, {}), **figures}
        return sorted(merged.items(), key=lambda item: PAPER_METRICS.index(item[0]))

    def paper_number(self, metric: str, grid: str, harness: str) -> float | None:
        """The paper's figure for one cell (its "GRID/HARNESS" key, else its "HARNESS" key), or None."""
        figures = dict(self.paper_metric_items()).get(metric, {})
        return figures.get(f"{grid}/{harness}", figures.get(harness))


def load_study(path: str | Path) -> Study:
    """Read and validate a study file; StudyError names the file and the first problem."""
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise StudyError(f"cannot read study {where!r}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"study {where!r} is not valid TOML: {exc}") from None
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(part) for part in error["loc"]) or "(top)"
        raise StudyError(f"study {where!r}: {at}: {error['msg']}") from None
    study._here = str(Path(path).resolve().parent)
    return study
