"""TextWorld task sets and task ids (no textworld import here).

A task id is `<task set>-<seed>`, e.g. `custom-20000`. The seed picks the game; its
range picks the split: train 0-9999, dev 10000-19999, test 20000 and up.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from playground.core.task_sets import TaskSet, seed_range

SPLIT_STARTS = {"train": 0, "dev": 10_000, "test": 20_000}
SPLIT_SIZE = 10_000
SEEDS_TEXT = "train 0-9999, dev 10000-19999, test 20000+"

# tw-cooking has its own food splits; each of our splits uses the matching one.
COOKING_SPLITS = {"train": "train", "dev": "valid", "test": "test"}


def _task_set(name: str, description: str, params: dict[str, Any], max_steps: int | None = None,
              count: int = 10) -> TaskSet:
    splits = {split: seed_range(name, start, SPLIT_SIZE) for split, start in SPLIT_STARTS.items()}
    return TaskSet(name, description, splits, default_split="test", default_count=count, params=params,
                   default_max_steps=max_steps)


TASK_SETS: dict[str, TaskSet] = {
    "custom": _task_set(
        "custom", "5 rooms, 10 objects, quest length 5",
        {"challenge": "custom", "nb_rooms": 5, "nb_objects": 10, "quest_length": 5},
    ),
    "easy": _task_set(
        "easy", "2 rooms, 4 objects, one-step quest (for small LLMs)",
        {"challenge": "custom", "nb_rooms": 2, "nb_objects": 4, "quest_length": 1},
        max_steps=15,  # a one-step quest: 15 steps leave room to explore and recover (docs/results.md)
        # the default job's games (`playground run`): with the paper's configuration every step of `sentry` also
        # asks the embedded model as its detector (about 100 s a game on 2 idle cores, against 15 s for `base`),
        # so 2 games keep the job within 5 minutes (README)
        count=2,
    ),
    "cooking": _task_set(
        "cooking", "tw-cooking: 2-ingredient recipe, fetch 1, 6 rooms, open containers",
        {"challenge": "tw-cooking", "recipe": 2, "take": 1, "go": 6, "open": True,
         "cook": False, "cut": False, "drop": False, "recipe_seed": 0},
    ),
}


def params_hash(task_set: TaskSet) -> str:
    """Return a short hash of the generator settings (games with other settings are other games)."""
    text = json.dumps(dict(task_set.params), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def get_task_set(name: str) -> TaskSet:
    """Return the task set called `name`; ValueError names the valid choices."""
    try:
        return TASK_SETS[name]
    except KeyError:
        raise ValueError(f"textworld: unknown task set {name!r}; choose from: {', '.join(sorted(TASK_SETS))}") from None


def task_seed(task_set: str, task_id: str) -> int:
    """Return the game seed of `task_id`; ValueError if it is not a task of `task_set`."""
    match = re.fullmatch(rf"{re.escape(task_set)}-(0|[1-9][0-9]*)", str(task_id))
    if match is None:
        raise ValueError(f"textworld: unknown task id {task_id!r} for task set {task_set!r} "
                         f"(expected '{task_set}-<seed>', e.g. '{task_set}-{SPLIT_STARTS['test']}')")
    return int(match.group(1))


def split_of(seed: int) -> str:
    """Return the split a seed belongs to."""
    return max((start, split) for split, start in SPLIT_STARTS.items() if seed >= start)[1]


def generator_params(task_set: TaskSet, seed: int) -> dict[str, Any]:
    """Return the generator settings for one game of `task_set`."""
    params = dict(task_set.params)
    if params["challenge"] == "tw-cooking":
        params["split"] = COOKING_SPLITS[split_of(seed)]
    return params
