"""ALFWorld games in the official on-disk layout: splits, task folders, task ids.

The layout (what `alfworld-download` writes, and what the embedded generator writes):

    <root>/json_2.1.1/<split>/<task type>-<object>-<mrecep>-<parent>-<scene>/<trial>/
        game.tw-pddl        JSON: pddl_domain, grammar, pddl_problem, solvable
        traj_data.json      task_type, pddl_params, ...
        initial_state.pddl  the problem alone

Splits are `train`, `valid_seen` and `valid_unseen`. A task id is the trial folder's
path below the split root, `<split>/<task folder>/<trial>`. As alfworld itself does,
only games of the six task types with `solvable: true` are played (no movable-receptacle
or sliced-object tasks). Tasks of a split are listed round-robin over the task types
(each type in name order), so the first N tasks cover every type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from playground.core.errors import PlaygroundError
from playground.core.task_sets import path_from_env

LAYOUT_DIR = "json_2.1.1"
SPLITS = ("train", "valid_seen", "valid_unseen")
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
PROBLEM_FILE = "initial_state.pddl"
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
DATA_HELP = ("get the official games with `pip install alfworld && alfworld-download` (into ~/.cache/alfworld), "
             "then `export ALFWORLD_DATA=~/.cache/alfworld`")


class AlfWorldDataError(PlaygroundError, ValueError):
    """The ALFWorld data folder or a task id is not usable; the message says why."""


@dataclass(frozen=True)
class TaskFolder:
    """What a task folder's name says: `<task type>-<object>-<mrecep>-<parent>-<scene>`."""

    task_type: str
    object_target: str
    mrecep_target: str
    parent_target: str
    scene: str

    @property
    def name(self) -> str:
        """The folder name."""
        return "-".join([self.task_type, self.object_target, self.mrecep_target or "None", self.parent_target,
                         self.scene])


def parse_task_folder(name: str) -> TaskFolder | None:
    """Return the parts of a task folder name, or None if it is not one of the six task types."""
    parts = name.split("-")
    if len(parts) != 5 or parts[0] not in TASK_TYPES:
        return None
    task_type, obj, mrecep, parent, scene = parts
    return TaskFolder(task_type, obj, "" if mrecep == "None" else mrecep, parent, scene)


def env_data_root() -> Path | None:
    """Return `$ALFWORLD_DATA` as a path, or None when it is unset or empty."""
    return path_from_env("ALFWORLD_DATA")


def check_root(root: Path | None) -> Path:
    """Return `root` if it holds the official layout, else raise AlfWorldDataError saying how to get it."""
    if root is None:
        raise AlfWorldDataError(f"alfworld: ALFWORLD_DATA is not set; {DATA_HELP}")
    if not (root / LAYOUT_DIR).is_dir():
        raise AlfWorldDataError(f"alfworld: {root} has no {LAYOUT_DIR}/ folder (official layout: "
                                f"{LAYOUT_DIR}/{{{','.join(SPLITS)}}}/<task>/<trial>/game.tw-pddl); {DATA_HELP}")
    return root


def split_dir(root: Path, split: str) -> Path:
    """Return the folder of `split` below `root`."""
    if split not in SPLITS:
        raise AlfWorldDataError(f"alfworld: unknown split {split!r}; choose from: {', '.join(SPLITS)}")
    return root / LAYOUT_DIR / split


def is_playable(trial: Path) -> bool:
    """True when the trial folder has a game file marked solvable and a traj_data.json."""
    game, traj = trial / GAME_FILE, trial / TRAJ_FILE
    if not (game.is_file() and traj.is_file()):
        return False
    try:
        return json.loads(game.read_text()).get("solvable") is True
    except (OSError, ValueError):
        return False


def _candidates(root: Path, split: str) -> dict[str, list[str]]:
    """Task ids of `split` by task type (folder names only, nothing read yet), each list sorted."""
    by_type: dict[str, list[str]] = {t: [] for t in TASK_TYPES}
    base = split_dir(root, split)
    if not base.is_dir():
        return by_type
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        parsed = parse_task_folder(folder.name)
        if parsed is None or "Sliced" in folder.name:
            continue
        for trial in sorted(p for p in folder.iterdir() if p.is_dir()):
            by_type[parsed.task_type].append(f"{split}/{folder.name}/{trial.name}")
    return by_type


def _round_robin(groups: Iterable[Iterator[str]]) -> Iterator[str]:
    """Take one item from each group in turn, skipping groups that have run out."""
    active = list(groups)
    while active:
        for group in list(active):
            item = next(group, None)
            if item is None:
                active.remove(group)
            else:
                yield item


def list_tasks(root: Path, split: str, count: int | None = None) -> list[str]:
    """Return the ids of the first `count` playable tasks of `split` (all when None), round-robin over task types.

    Unplayable trials are dropped before the round-robin, so they never shift the order of the others.
    """
    by_type = _candidates(root, split)
    playable = [(t for t in by_type[task_type] if is_playable(root / LAYOUT_DIR / t)) for task_type in TASK_TYPES]
    found: list[str] = []
    for task_id in _round_robin(playable):
        if count is not None and len(found) >= count:
            break
        found.append(task_id)
    return found


def trial_dir(root: Path, task_id: str) -> Path:
    """Return the trial folder of `task_id`; AlfWorldDataError for a malformed id."""
    parts = str(task_id).split("/")
    if len(parts) != 3 or parts[0] not in SPLITS or parse_task_folder(parts[1]) is None or parts[2] in ("", ".", ".."):
        raise AlfWorldDataError(f"alfworld: bad task id {task_id!r} (expected '<split>/<task folder>/<trial>', e.g. "
                                "'valid_unseen/pick_and_place_simple-Apple-None-Fridge-10/trial_T20190908_...')")
    return root / LAYOUT_DIR / task_id


def task_type_of(task_id: str) -> str:
    """Return the task type named by a task id's folder ("" when it names none)."""
    parts = str(task_id).split("/")
    parsed = parse_task_folder(parts[1]) if len(parts) == 3 else None
    return parsed.task_type if parsed else ""


def read_traj(trial: Path) -> dict:
    """Return the trial's traj_data.json."""
    return json.loads((trial / TRAJ_FILE).read_text())
