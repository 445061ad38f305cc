"""What the memory baselines (ACE, Reflexion, AWM, ReasoningBank) do alike in an episode.

Each is an episode plugin that checks its parameters, keeps the observable trajectory, shows
a standing note every step and learns from the episode when it ends. `MemoryBaseline` does
the common part; a baseline sets its name, its parameter model (`params.py`), the parameters
to check up front, and implements `begin` (the episode started: read its memory, make its note) and
`learn` (the episode ended: write to its memory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel

from playground import EpisodeEnd, EpisodeStart, PlaygroundError, StepContext, StepOutcome, hookimpl
from playground.plugins.baselines.judge import Judge
from playground.plugins.baselines.memory import Memory
from playground.plugins.baselines.params import BaselineConfigError, parse_params
from playground.plugins.baselines.store import read_records
from playground.plugins.baselines.trajectory import Trajectory


class MemoryBaseline:
    """A memory baseline's episode plugin: parameters, judge model, trajectory, standing note, begin and learn."""

    NAME = ""
    PARAMS: type[BaseModel] = BaseModel  # the baseline's declared parameters (`params.py`)
    SUCCESS_PARAM = ""  # the parameter saying how success is told; its value `judge` needs a judge model
    MEMORY_PARAM = ""   # the parameter naming a memory file; a file named is read up front

    def __init__(self, params: Mapping[str, Any] | BaseModel) -> None:
        """`params`: an instance of `PARAMS` (the host validated it), or a dict validated by `PARAMS`."""
        self.p = parse_params(self.NAME, self.PARAMS, params)
        self.judge = Judge(self.p, self.NAME)
        if self.SUCCESS_PARAM and self.p[self.SUCCESS_PARAM] == "judge" and not self.judge.configured:
            raise BaselineConfigError(f"{self.NAME}: {self.SUCCESS_PARAM}=judge needs a judge model (--param "
                                      "judge_base_url=URL --param judge_model=NAME, or --param judge_local=true)")
        if self.MEMORY_PARAM and self.p[self.MEMORY_PARAM]:  # checked before a run starts: exit 2, not an error later
            try:
                self.read_memory(Path(str(self.p[self.MEMORY_PARAM])))
            except (PlaygroundError, OSError) as exc:
                raise BaselineConfigError(f"{self.NAME} parameter {self.MEMORY_PARAM!r}: {exc}") from None
        self.trajectory = Trajectory()
        self.memory: Memory | None = None  # memory_for(...) in `begin`; None: nothing is carried over
        self.note = ""

    def read_memory(self, path: Path) -> object:
        """Read a memory file (raising when it cannot be one); JSONL records unless the baseline says otherwise."""
        return read_records(path)

    def begin(self, start: EpisodeStart) -> None:
        """The episode started (its trajectory too): set `memory` and `note`."""

    def learn(self, end: EpisodeEnd) -> None:
        """The episode ended (its trajectory too): write what it taught to the memory."""

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        self.trajectory.start(start)
        self.begin(start)

    @hookimpl
    def agent_notes(self, context: StepContext):
        return self.note or None

    @hookimpl
    def step_completed(self, outcome: StepOutcome) -> None:
        self.trajectory.record(outcome)

    @hookimpl
    def episode_finished(self, end: EpisodeEnd) -> None:
        self.trajectory.end(end)
        self.learn(end)

