"""A study file's model: the grids of runs a study plays, the smoke size, the paper's numbers (`Study`), read from
TOML and validated (`load_study`). `playground.run.study` plans, runs and tabulates a study.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from playground.core.errors import PlaygroundError


class StudyError(PlaygroundError, ValueError):
    """A study file that cannot be read or run: names the file and what is wrong."""


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
    harnesses: list[str] = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict, description="--param values for every harness")
    reference: str | None = Field(default=None, description="the harness each cell is paired with (default: "
                                                             "the first)")

    @field_validator("harnesses")
    @classmethod
    def _distinct(cls, harnesses: list[str]) -> list[str]:
        if len(set(harnesses)) != len(harnesses):
            raise ValueError("a harness is listed twice")
        return harnesses


class Smoke(BaseModel):
    """The size every grid shrinks to under `--smoke`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episodes: int = Field(default=2, ge=1)
    trials: int = Field(default=1, ge=1)
    max_steps: int = Field(default=3, ge=1)


class Study(BaseModel):
    """A study file: its grids, the smoke size and, for a paper's table, the paper's numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    title: str
    kind: str = Field(default="machinery", pattern="^(instrument|real-model|machinery)$",
                      description="which of the three kinds of figure the table is")
    paper: str = Field(default="", description="the paper table it reproduces, if any")
    grids: list[Grid] = Field(min_length=1)
    smoke: Smoke = Field(default_factory=Smoke)
    # the paper's success rate per "GRID/HARNESS" cell (or "HARNESS" for every grid), shown beside the measured
    paper_success: dict[str, float] = Field(default_factory=dict)

    @field_validator("grids")
    @classmethod
    def _distinct_names(cls, grids: list[Grid]) -> list[Grid]:
        if len({g.name for g in grids}) != len(grids):
            raise ValueError("two grids share a name")
        return grids


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
        return Study.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(part) for part in error["loc"]) or "(top)"
        raise StudyError(f"study {where!r}: {at}: {error['msg']}") from None
