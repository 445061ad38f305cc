"""The ALFWorld env provider: the `generated` and `official` task sets and the env factory.

- `generated`: games from the embedded generator (no download), cached as an
  official-layout tree under `$PLAYGROUND_CACHE/alfworld/`.
- `official`: the real games under `$ALFWORLD_DATA/json_2.1.1/` (alfworld's download
  folder ~/.cache/alfworld when the variable is unset).

The default task set is `official` when `ALFWORLD_DATA` is set and `generated` otherwise,
so `playground run --env alfworld` plays real games as soon as the user points
ALFWORLD_DATA at them. Importing this module imports neither alfworld nor textworld.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any, Callable, Mapping

from playground.core.env import EnvProvider, TextEnv
from playground.core.task_sets import TaskSet
from playground.envs.alfworld.data import (
    GAME_FILE,
    SPLITS,
    AlfWorldDataError,
    check_root,
    env_data_root,
    list_tasks,
    trial_dir,
)
from playground.envs.alfworld.engine import INSTALL_HINT
from playground.envs.alfworld.problems import SPLIT_SIZE  # the seeds of a generated split: the most games it lists

DEFAULT_SPLIT = "valid_unseen"
ALFWORLD_DOWNLOAD_DIR = Path("~/.cache/alfworld").expanduser()


def official_root() -> Path:
    """Return the official data folder: `$ALFWORLD_DATA`, else alfworld's download folder (checked)."""
    return check_root(env_data_root() or ALFWORLD_DOWNLOAD_DIR)


def _official_split(split: str) -> Callable[[int], list[str]]:
    return lambda count: list_tasks(official_root(), split, count)


def _generated_split(split: str) -> Callable[[int], list[str]]:
    def ids(count: int) -> list[str]:
        """The first `count` winnable games of the split (generated on first listing)."""
        from playground.envs.alfworld.generate import list_generated, stderr_progress

        return list_generated(split, count, stderr_progress)

    return ids


def _is_generated_task(task_id: str) -> bool:
    """True for the id of a generated game (its seed in its split's range, the folder the seed gives)."""
    from playground.envs.alfworld.generate import split_seed
    from playground.envs.alfworld.problems import sample_problem

    try:
        split, seed = split_seed(task_id)
    except AlfWorldDataError:
        return False
    return sample_problem(seed, split).task_id == task_id


def _is_official_task(task_id: str) -> bool:
    """True for the id of a game file under the official data root (a missing root is an error)."""
    root = official_root()
    try:
        return (trial_dir(root, task_id) / GAME_FILE).is_file()
    except AlfWorldDataError:
        return False


TASK_SETS: dict[str, TaskSet] = {
    "generated": TaskSet("generated", "ALFWorld games from the embedded generator (six task types, no download)",
                         {s: _generated_split(s) for s in SPLITS}, default_split=DEFAULT_SPLIT, default_count=10,
                         is_task=_is_generated_task, max_counts=dict.fromkeys(SPLITS, SPLIT_SIZE),
                         task_form="'<split>/<task folder>/trial_<seed>' of a generated game, e.g. one listed by "
                                   "the task set's tasks()"),
    "official": TaskSet("official", "the official ALFWorld games under $ALFWORLD_DATA/json_2.1.1",
                        {s: _official_split(s) for s in SPLITS}, default_split=DEFAULT_SPLIT, default_count=10,
                        is_task=_is_official_task,
                        task_form="'<split>/<task folder>/<trial>' with a game file under $ALFWORLD_DATA/json_2.1.1"),
}


def get_task_set(name: str) -> TaskSet:
    """Return the task set called `name`; ValueError names the valid choices."""
    try:
        return TASK_SETS[name]
    except KeyError:
        raise ValueError(f"alfworld: unknown task set {name!r}; choose from: {', '.join(TASK_SETS)}") from None


def locate_game(task_set: str, task_id: str) -> Path:
    """Return the game file of `task_id` in `task_set` (generating it if it is a missing generated game)."""
    if task_set == "generated":
        from playground.envs.alfworld.generate import ensure_game

        return ensure_game(task_id)
    game = trial_dir(official_root(), task_id) / GAME_FILE
    if not game.is_file():
        raise AlfWorldDataError(f"alfworld: no game file for task {task_id!r} at {game}")
    return game


class AlfWorldProvider(EnvProvider):
    """Provides ALFWorld on the real engine: task sets `generated` and `official`."""

    name = "alfworld"
    thread_safe = False  # the engine is textworld's (a shared tatsu parser) and the planner's
    description = "ALFWorld household tasks on the real engine (generated games, or $ALFWORLD_DATA)"

    def missing(self) -> str | None:
        """The install command when the `alfworld` package is absent."""
        import importlib.util

        return None if importlib.util.find_spec("alfworld") is not None else INSTALL_HINT

    @property
    def default_task_set(self) -> str:  # type: ignore[override]
        """`official` when ALFWORLD_DATA is set, else `generated`."""
        return "official" if env_data_root() is not None else "generated"

    def task_sets(self) -> Mapping[str, TaskSet]:
        """Return the task sets, by name."""
        return TASK_SETS

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> TextEnv:
        """Build a fresh `AlfWorldEnv` for `task_set` (imports textworld and alfworld)."""
        from playground.envs.alfworld.env import AlfWorldEnv

        return AlfWorldEnv(lambda task: locate_game(task_set, task), get_task_set(task_set), expert=expert)

    def prepare(self, task_set: str, task_ids: list[str], progress: Callable[[str], None] | None = None) -> None:
        """Make sure every task's game exists (generated games are made when listed; this checks them)."""
        get_task_set(task_set)
        for task_id in task_ids:
            locate_game(task_set, task_id)

    def describe(self, task_set: str) -> dict:
        """Return the env, task set, versions, and the data root or generator hash and seeds."""
        header = {"env": self.name, "task_set": task_set, "version": _version("alfworld"),
                  "textworld": _version("textworld")}
        if task_set == "generated":
            from playground.envs.alfworld.generate import SEEDS_TEXT, generated_root, generator_hash
            from playground.envs.alfworld.problems import GENERATOR_VERSION

            header.update(generator_version=GENERATOR_VERSION, generator_hash=generator_hash(), seeds=SEEDS_TEXT,
                          data_root=str(generated_root()))
        else:
            header.update(data_root=str(official_root()))
        return header


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
