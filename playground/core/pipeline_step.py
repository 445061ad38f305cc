"""A step a study's pipeline runs over a copy of a grid's run (`register_pipeline_steps`): a method's own stage
after the episodes, such as a diagnosis of the failed ones or a replay of corrections from the same state. The
study layer (`playground.run.pipelines`) copies the run, runs the steps in order and records each as done; the
figures of what a step wrote are the plugin's `Figure(of_folder=...)` columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class PipelineStep:
    """A plugin's stage a study can run over a copy of a grid's run directory.

    `run(host, run_dir, params)` works in `run_dir` (the copy; its records, traces and the files earlier steps
    wrote) with `params`, an instance of `params_model` (a pydantic model: a study's `params` are validated
    against it before the step runs, and a wrong key or value is a study error naming the pipeline and step). A
    step that is stopped part-way may be run again with the same parameters and should pick up where it stopped;
    one that finished is not run again (the study layer records it). `plugin` is filled in by the host.

    Every step also runs from the command line over a finished run, its parameters as options
    (`playground study step NAME RUN_DIR`, which prints what `run` returns as JSON); `command`, where given, mounts
    it as `playground PREFIX COMMAND` too (PREFIX: the name's part before the dot), so a method's stage needs no
    command-line code of its own.
    """

    name: str
    description: str
    run: Callable[[Any, Path, Any], object]  # what it returns: printed by the command, unused by a study
    params_model: type[BaseModel]
    plugin: str = ""
    command: str = ""
