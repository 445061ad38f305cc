"""ScienceWorld's 30 tasks and their train/dev/test variations, without starting the engine.

ScienceWorld 1.2.3 splits each task's variations into three contiguous ranges: train
first, then dev, then test (`get_variations_train/dev/test`). `VARIATIONS` records the
sizes of those ranges (checked against the engine by tests/test_scienceworld.py), so
listing tasks needs no JVM. A task id is `<task>-<variation>` ("boil-21"); the split a
variation belongs to is the range it falls in.
"""

from __future__ import annotations

import re

from playground.core.task_sets import TaskSet

SPLITS = ("train", "dev", "test")
DEFAULT_SPLIT = "test"
DEFAULT_COUNT = 10

# task -> (train, dev, test) variation counts; the splits are consecutive ranges from 0
VARIATIONS: dict[str, tuple[int, int, int]] = {
    "boil": (14, 7, 9),
    "change-the-state-of-matter-of": (14, 7, 9),
    "chemistry-mix": (16, 8, 8),
    "chemistry-mix-paint-secondary-color": (18, 9, 9),
    "chemistry-mix-paint-tertiary-color": (18, 9, 9),
    "find-animal": (150, 75, 75),
    "find-living-thing": (150, 75, 75),
    "find-non-living-thing": (150, 75, 75),
    "find-plant": (150, 75, 75),
    "freeze": (14, 7, 9),
    "grow-fruit": (62, 31, 33),
    "grow-plant": (62, 31, 33),
    "identify-life-stages-1": (6, 3, 5),
    "identify-life-stages-2": (4, 2, 4),
    "inclined-plane-determine-angle": (84, 42, 42),
    "inclined-plane-friction-named-surfaces": (692, 346, 348),
    "inclined-plane-friction-unnamed-surfaces": (80, 40, 42),
    "lifespan-longest-lived": (62, 31, 32),
    "lifespan-longest-lived-then-shortest-lived": (62, 31, 32),
    "lifespan-shortest-lived": (62, 31, 32),
    "measure-melting-point-known-substance": (218, 109, 109),
    "measure-melting-point-unknown-substance": (150, 75, 75),
    "melt": (14, 7, 9),
    "mendelian-genetics-known-plant": (60, 30, 30),
    "mendelian-genetics-unknown-plant": (240, 120, 120),
    "power-component": (10, 5, 5),
    "power-component-renewable-vs-nonrenewable-energy": (10, 5, 5),
    "test-conductivity": (450, 225, 225),
    "test-conductivity-of-unknown-substances": (300, 150, 150),
    "use-thermometer": (270, 135, 135),
}
TASKS = tuple(VARIATIONS)
ALL = "all"
_ID = re.compile(r"(.+)-(0|[1-9][0-9]*)")


def variations(task: str, split: str) -> range:
    """The variation numbers of `task` in `split` (ScienceWorld's own ranges)."""
    train, dev, test = VARIATIONS[task]
    start = {"train": 0, "dev": train, "test": train + dev}[split]
    return range(start, start + {"train": train, "dev": dev, "test": test}[split])


def task_id(task: str, variation: int) -> str:
    """The playground id of one variation of a task: `<task>-<variation>`."""
    return f"{task}-{variation}"


def parse_task_id(task: str) -> tuple[str, int] | None:
    """`(task name, variation)` of an id such as "boil-21", or None when it names no variation."""
    match = _ID.fullmatch(task)
    if match is None or match.group(1) not in VARIATIONS:
        return None
    name, variation = match.group(1), int(match.group(2))
    return (name, variation) if variation < sum(VARIATIONS[name]) else None


def split_ids(tasks: tuple[str, ...], split: str) -> tuple[str, ...]:
    """The ids of `split` over `tasks`, interleaved: every task's first variation, then every second, ..."""
    ranges = [list(variations(t, split)) for t in tasks]
    return tuple(task_id(t, r[i]) for i in range(max(map(len, ranges))) for t, r in zip(tasks, ranges) if i < len(r))


def _task_set(name: str, tasks: tuple[str, ...], description: str) -> TaskSet:
    splits = {split: split_ids(tasks, split) for split in SPLITS}
    return TaskSet(name, description, splits, default_split=DEFAULT_SPLIT, default_count=DEFAULT_COUNT,
                   task_form=f"'<task>-<variation>' of {name!r} (e.g. {splits['test'][0]!r})")


TASK_SETS: dict[str, TaskSet] = {
    ALL: _task_set(ALL, TASKS, "all 30 ScienceWorld tasks, their variations interleaved"),
    **{t: _task_set(t, (t,), f"ScienceWorld task {t!r}") for t in TASKS},
}
