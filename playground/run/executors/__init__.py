"""Executors: where a run's episodes are played (`base.Executor`).

`local` plays them in this process, or in long-lived worker processes with `workers > 1`;
`ray` plays them as Ray actor tasks, on a private local Ray or an existing cluster
(the `ray` extra). `make_executor` picks one by name from `EXECUTORS`.
"""

from __future__ import annotations

from playground.run.executors.base import Executor, ExecutorError, Job, Player, Work
from playground.run.executors.local import LocalExecutor
from playground.run.executors.ray_tasks import RayExecutor

EXECUTORS: dict[str, type[Executor]] = {cls.name: cls for cls in (LocalExecutor, RayExecutor)}

__all__ = ["EXECUTORS", "Executor", "ExecutorError", "Job", "Player", "Work", "make_executor"]


def make_executor(name: str, workers: int | None = None, address: str | None = None, in_flight: int = 1) -> Executor:
    """The executor called `name`, for `workers` worker processes (None: its default) with `in_flight` episodes
    each; ExecutorError names what is wrong (an unknown name, a missing extra, an option it does not take)."""
    try:
        cls = EXECUTORS[name]
    except KeyError:
        raise ExecutorError(f"unknown executor {name!r}; choose from: {', '.join(EXECUTORS)}") from None
    return cls(workers, address, in_flight)
