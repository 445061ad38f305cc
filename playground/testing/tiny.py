"""`tiny`: a small in-memory fetch-and-return world, for tests and plugin authors.

A corridor of rooms; the goal names one object somewhere in the corridor that must be
brought back to the first room and dropped there. Other objects are distractors.
Everything is generated from the task's seed, so it needs no files and resets in
microseconds, yet it behaves like the real envs: sorted admissible actions, invalid
actions that change nothing, an expert plan, won/lost, a score, and snapshots. The drop
that solves the task prints a win banner ("Well done: ..."), which `remove_grade_text`
removes for judges, as the real envs' score lines and banners.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from playground.core.actions import command_kinds
from playground.core.env import EnvInfo, EnvProvider, TextEnv, cut_grade_text, grade_text_pattern
from playground.core.hookspecs import hookimpl
from playground.core.task_sets import TaskSet, seed_range

ROOMS = ["hall", "kitchen", "study", "garden", "cellar", "attic"]
OBJECTS = ["red key", "blue mug", "old map", "silver coin", "green apple", "brass lamp", "paper note"]


# the win banner after the drop that solves the task: "Well done: the red key is back in the hall."
GRADE_TEXT = grade_text_pattern(r"Well done: the [^.\n]+ is back in the [^.\n]+\.")


def without_grade_text(text: str) -> str:
    """An observation without the win banner ("You drop the red key. Well done: the red key is back in the hall."
    -> "You drop the red key."): `TinyEnv.remove_grade_text`, `TinyProvider`'s too."""
    return cut_grade_text(text, GRADE_TEXT)


def _world(seed: int) -> dict:
    rng = random.Random(f"tiny:{seed}")
    rooms = ROOMS[: rng.randint(2, 4)]
    objects = rng.sample(OBJECTS, k=3)
    placement = {obj: rng.randrange(1, len(rooms)) for obj in objects}
    return {"rooms": rooms, "target": objects[0], "placement": placement}


TASK_SET = TaskSet("default", "2-4 rooms, 3 objects, fetch one back",
                   {"train": seed_range("tiny", 0), "dev": seed_range("tiny", 10_000),
                    "test": seed_range("tiny", 20_000)})


class TinyInfo(EnvInfo, total=False):
    """`EnvInfo` plus the moves made so far."""

    moves: int


class TinyEnv(TextEnv):
    """The fetch-and-return world for one task (see module docstring)."""

    can_snapshot = True
    env_name = "tiny"

    def __init__(self, expert: bool = False, task_set: TaskSet = TASK_SET) -> None:
        super().__init__(task_set)
        self.expert = expert
        self.state: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start the task in `options["task"]` (default: one of the default split's, by seed) afresh."""
        super().reset(seed=seed)
        task = self.task_for_reset(seed, options)
        world = _world(int(task.rsplit("-", 1)[-1]))
        self.state = {"task": task, **world, "where": 0, "carrying": None, "done": False, "moves": 0}
        return self._describe(), self._info(valid=True)

    def step(self, action: str):
        s = self.state
        valid = action in self._admissible()
        reward = 0.0
        if not valid:
            text = "That is not something you can do here."
        else:
            text = self._apply(action)
            if s["done"]:
                reward = 1.0
        s["moves"] += 1
        return text, reward, s["done"], False, self._info(valid=valid)

    def _apply(self, action: str) -> str:
        s = self.state
        verb, _, obj = action.partition(" ")
        if action == "go east":
            s["where"] += 1
        elif action == "go west":
            s["where"] -= 1
        elif verb == "take":
            s["placement"].pop(obj)
            s["carrying"] = obj
            return f"You take the {obj}."
        elif verb == "drop":
            s["carrying"] = None
            s["placement"][obj] = s["where"]
            if obj == s["target"] and s["where"] == 0:
                s["done"] = True
                return f"You drop the {obj}. Well done: the {obj} is back in the {s['rooms'][0]}."
            return f"You drop the {obj}."
        elif verb == "inventory":
            return f"You carry: {s['carrying'] or 'nothing'}."
        elif verb == "examine":
            return f"A perfectly ordinary {obj}."
        return self._describe()

    def _here(self) -> list[str]:
        s = self.state
        return sorted(o for o, r in s["placement"].items() if r == s["where"])

    def _describe(self) -> str:
        s = self.state
        things = ", ".join(f"a {o}" for o in self._here()) or "nothing of note"
        return f"You are in the {s['rooms'][s['where']]}. You see {things}."

    def _admissible(self) -> list[str]:
        s = self.state
        actions = ["look", "inventory"]
        if s["where"] > 0:
            actions.append("go west")
        if s["where"] < len(s["rooms"]) - 1:
            actions.append("go east")
        if s["carrying"]:
            actions += [f"drop {s['carrying']}", f"examine {s['carrying']}"]
        else:
            actions += [f"take {o}" for o in self._here()]
        actions += [f"examine {o}" for o in self._here()]
        return sorted(set(actions))

    def _plan(self) -> list[str]:
        s = self.state
        if s["done"]:
            return []
        plan: list[str] = []
        where, target = s["where"], s["target"]
        if s["carrying"] and s["carrying"] != target:
            plan.append(f"drop {s['carrying']}")
        if s["carrying"] != target:
            room = s["placement"][target]
            step = "go east" if room > where else "go west"
            plan += [step] * abs(room - where)
            plan.append(f"take {target}")
            where = room
        plan += ["go west"] * where
        plan.append(f"drop {target}")
        return plan

    def _info(self, valid: bool) -> TinyInfo:
        s = self.state
        admissible = self._admissible()
        info: TinyInfo = {
            "goal": f"Bring the {s['target']} to the {s['rooms'][0]} and drop it there.",
            "admissible_actions": admissible,
            "action_kinds": command_kinds(admissible),
            "valid_action": valid,
            "won": s["done"],
            "lost": False,
            "score": 1.0 if s["done"] else 0.0,
            "max_score": 1.0,
            "moves": s["moves"],
        }
        if self.expert:
            info["expert_plan"] = self._plan()
        return info

    def remove_grade_text(self, text: str) -> str:
        """The observation without the win banner ("Well done: the red key is back in the hall.")."""
        return without_grade_text(text)

    def snapshot(self) -> dict:
        """Return a deep copy of the world state."""
        return copy.deepcopy(self.state)

    def restore(self, snapshot: dict) -> None:
        """Restore a state returned by `snapshot()`."""
        self.state = copy.deepcopy(snapshot)


class TinyProvider(EnvProvider):
    """Provides the `tiny` env with one task set, `default`, split by seed ranges."""

    name = "tiny"
    description = "in-memory fetch-and-return corridor (tests, plugin authors)"
    default_task_set = "default"

    def task_sets(self):
        return {"default": TASK_SET}

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> TinyEnv:
        if task_set not in self.task_sets():
            raise ValueError(f"tiny: unknown task set {task_set!r}; choose from: default")
        return TinyEnv(expert=expert, task_set=self.task_sets()[task_set])

    def remove_grade_text(self, text: str) -> str:
        """An observation without the win banner (the env's own function)."""
        return without_grade_text(text)

    def describe(self, task_set: str) -> dict:
        return {"env": "tiny", "task_set": task_set, "version": "1", "seeds": "train 0+, dev 10000+, test 20000+"}


@hookimpl
def register_envs(register) -> None:
    """Register the `tiny` env."""
    register(TinyProvider())
