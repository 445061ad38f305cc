"""The gymnasium adapter over ScienceWorld's engine (the process's one JVM, see engine.py).

- reset loads the task's variation with ScienceWorld's gold path (the same world with or
  without the expert) and returns the engine's first "look around".
- step sends the action to the engine. One the engine's parser does not know ("No known
  action matches that input.") changes nothing ScienceWorld shows (its move counter aside)
  and gives `valid_action=False`; nor does an empty one or any action after the end.
- `score` is ScienceWorld's 0-100 progress score (negative when a wrong focus failed the
  task); `won` is completion with a non-negative score, `lost` a negative score. The
  observation is the engine's text, which never prints the score.
- `admissible_actions` is a bounded view of ScienceWorld's valid actions
  (`admissible_view`) plus the door actions the room shows (`door_actions`: ScienceWorld's
  list leaves out "open door to X" and "go to X"): the engine accepts many more, and
  every one it parses is played. So `admissible_complete` is False, and `check_action` is the
  engine's verdict: its parser's reply to the command in the current world, without running it
  (`engine.parser_reply`).
  While the engine asks which of several objects was meant, the view is the numbers it offers
  (then the list is complete).
- `expert_plan` (expert=True): the rest of the gold action sequence, advanced as the
  actions played match it (skipping its answers to ambiguity questions the engine did not
  ask this time, and its commands the engine's parser rejects here: see `_skip_stale_gold`;
  a question it does not answer gets "0").
  ScienceWorld's gold path generator orders independent steps differently from load to
  load, so the first gold path of a task is kept for the process (a reset of the same task
  gives the same plan) and a restore keeps the episode's. The generator's path does not
  always win (`mendelian-genetics-known-plant-90`: 2 loads of 18 measured gave a 259-step
  path that focuses on the wrong box): a kept path that was played to its end and lost is dropped, and
  the next reset of the task takes its own load's.
- snapshot/restore: the engine has no copy of its state, so a snapshot is the task plus
  the actions played since reset and restoring is reset + replay. The same replay puts
  an env's episode back when another env of the process used the shared engine meanwhile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from playground.core.actions import command_kinds
from playground.core.env import EnvInfo, TextEnv
from playground.core.payloads import SchemaProblem
from playground.core.task_sets import TaskSet
from playground.envs.scienceworld import engine as engines
from playground.envs.scienceworld.tasks import parse_task_id

UNKNOWN_ACTION = "No known action matches that input."
GAME_OVER_TEXT = "The task is over."
AMBIGUOUS = "Ambiguous request"
ADMISSIBLE_CAP = 200
SKIPPED_VERBS = ("reset task",)  # valid, but restarts the task: never offered
TWO_OBJECT_VERBS = ("move", "pour", "use", "dunk", "connect")  # in the order they rank
_NOISE_OBJECT = re.compile(r"(?:^|\s)(?:agent|air)(?:\s|$)")
_DOOR = re.compile(r"door to (?:the )?(.+?) \(that is (open|closed)\)")
_CHOICE = re.compile(r"^\s*(\d+):", re.M)
VERB_KINDS = {
    **dict.fromkeys(("look", "examine", "inventory", "task", "read"), "look"),
    "go": "move",
    **dict.fromkeys(("open", "close"), "access"),
    "pick": "take",
    "eat": "consume",
    **dict.fromkeys(("focus", "put", "move", "pour", "dunk", "mix", "use", "activate", "deactivate", "connect",
                     "disconnect", "flush"), "use"),
}

_owner: list[Any] = [None]  # the env whose episode the shared engine holds
_gold: dict[str, tuple[str, ...]] = {}  # task id -> the first gold path the engine gave in this process


def admissible_view(valid, cap: int = ADMISSIBLE_CAP, keep=()) -> list[str]:
    """At most `cap` of ScienceWorld's valid actions, sorted: the cut shown to agents.

    `keep` (the room's door actions) is always in it. Dropped: `reset task` and actions on
    the agent itself or the air. Ranked before the cut: actions on one object (look, go,
    open, pick up, focus on, ...) before those on two, by verb: move X to Y, pour X in Y,
    use X on Y, dunk X in Y, connect X to Y (so electrical tasks see fewer connections than
    exist); then shorter first.
    """
    kept = {" ".join(a.split()) for a in keep}
    actions = {" ".join(a.split()) for a in valid} - kept
    rest = sorted((a for a in actions if a and a not in SKIPPED_VERBS and not _NOISE_OBJECT.search(a)),
                  key=lambda a: (_rank(a), len(a), a))
    return sorted([*kept, *rest[:max(0, cap - len(kept))]])


def _rank(action: str) -> int:
    verb = action.split(" ", 1)[0]
    return 1 + TWO_OBJECT_VERBS.index(verb) if verb in TWO_OBJECT_VERBS and " " in action else 0


def door_actions(look: str) -> list[str]:
    """What the doors a look shows allow (ScienceWorld's valid list leaves them out): open/close, go to."""
    actions = []
    for room, state in _DOOR.findall(look):
        actions += [f"close door to {room}", f"go to {room}"] if state == "open" else [f"open door to {room}"]
    return actions


@dataclass(frozen=True)
class ScienceWorldSnapshot:
    """A saved position: the task and the actions the engine took since its reset."""

    task: str
    actions: tuple[str, ...]


class ScienceWorldInfo(EnvInfo, total=False):
    """`EnvInfo` plus the ScienceWorld task name, variation and move count."""

    task_name: str
    variation: int
    moves: int


class ScienceWorldEnv(TextEnv):
    """ScienceWorld tasks behind the playground env API (see module docstring)."""

    can_snapshot = True
    env_name = "scienceworld"

    def __init__(self, task_set: TaskSet | None = None, expert: bool = False, cap: int = ADMISSIBLE_CAP) -> None:
        super().__init__(task_set)
        self.expert = expert
        self.cap = cap
        self._task = ""
        self._actions: list[str] = []
        self._gold: list[str] = []
        self._gold_task = ""  # the task whose gold path `_gold` is
        self._gold_at = 0
        self._text = ""
        self._goal = ""
        self._valid: list[str] = []
        self._score = 0
        self._done = False
        self._moves = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start the task in `options["task"]` (default: one of the split's, by seed) afresh."""
        super().reset(seed=seed)
        task = self.task_for_reset(seed, options)
        if parse_task_id(task) is None:
            raise ValueError(f"scienceworld: {task!r} is not '<task>-<variation>' of a ScienceWorld task")
        self._task = task
        self._load(new_episode=True)
        return self._text, self._info(valid=True)

    def step(self, action: str):
        """Send `action` to the engine; one it does not parse changes nothing (`valid_action` False)."""
        if not self._task:
            raise RuntimeError("scienceworld: call reset() before step()")
        command = " ".join(str(action).split())
        if self._done or not command:
            return (GAME_OVER_TEXT if self._done else UNKNOWN_ACTION), 0.0, self._done, False, self._info(False)
        self._ensure_loaded()
        sw = engines.engine()
        text, reward, done, info = sw.step(command)
        if text.strip() == UNKNOWN_ACTION:
            self._moves = info["moves"]
            return text, 0.0, False, False, self._info(valid=False)
        self._actions.append(command)
        self._read(text, info, bool(done))
        self._advance_gold(command)
        if self.expert and self._done and self._score < 0 and self._gold_at >= len(self._gold):
            self._drop_losing_gold()
        return text, float(reward), self._done, False, self._info(valid=True)

    def check_action(self, action: str) -> list[SchemaProblem]:
        """The engine's verdict on `action` here, without running it: [] when the engine would take it (its
        parser matches the command, or asks which object was meant), else the one problem: the parser knows
        no such command here (while it asks which object was meant: the action is not one of the numbers)."""
        if not self._task:
            raise RuntimeError("scienceworld: call reset() before check_action()")
        command = " ".join(str(action).split())
        if self._done or not command:
            why = "the task is over" if self._done else "the action is empty"
            return [SchemaProblem("syntax_error", command, f"{why}: no action reaches the engine")]
        if AMBIGUOUS in self._text:
            if command in self._valid:
                return []
            return [SchemaProblem("syntax_error", command, f"the engine asks which object was meant: answer with "
                                  f"one of the numbers {', '.join(self._valid)}", alternatives=tuple(self._valid))]
        self._ensure_loaded()
        if engines.parser_reply(engines.engine(), command).strip() != UNKNOWN_ACTION:
            return []
        return [SchemaProblem("syntax_error", command, f"the engine knows no command {command!r} here "
                              f"({UNKNOWN_ACTION})")]

    def snapshot(self) -> ScienceWorldSnapshot:
        """Return the current position as the task plus the actions played since reset."""
        if not self._task:
            raise RuntimeError("scienceworld: call reset() before snapshot()")
        return ScienceWorldSnapshot(self._task, tuple(self._actions))

    def restore(self, snapshot: ScienceWorldSnapshot) -> None:
        """Return to a snapshot's position: reset its task, then replay its actions."""
        self._task = snapshot.task
        self._load(snapshot.actions)

    def close(self) -> None:
        """Let go of the shared engine (the JVM stays for the process's other envs)."""
        if _owner[0] is self:
            _owner[0] = None

    def _load(self, actions=(), new_episode: bool = False) -> None:
        """Load and reset the task in the engine, then replay `actions` (gold path pointer included).

        The expert's gold path is the process's for the task on a `new_episode` (a reset) or when the one held is
        another task's; otherwise (a restore, or an episode put back) it stays the episode's."""
        name, variation = parse_task_id(self._task) or ("", 0)
        sw = engines.engine()
        sw.load(name, variation, "", generateGoldPath=True)
        text, info = sw.reset()
        _owner[0] = self
        self._goal = sw.get_task_description().strip()
        if self.expert and (new_episode or self._gold_task != self._task):
            self._gold = list(_gold.setdefault(self._task, tuple(sw.get_gold_action_sequence())))
            self._gold_task = self._task
        self._gold_at = 0
        self._actions = []
        self._read(text, info, False)
        self._advance_gold("")
        for command in actions:
            text, _, done, info = sw.step(command)
            self._actions.append(command)
            self._read(text, info, bool(done))
            self._advance_gold(command)

    def _ensure_loaded(self) -> None:
        """Put this env's episode back into the shared engine if another env used it since."""
        if _owner[0] is not self:
            text = self._text
            self._load(tuple(self._actions))
            self._text = text

    def _drop_losing_gold(self) -> None:
        """The episode played the gold path to its end and lost: the process stops keeping that path, so the next
        reset of the task takes the path generated on its own load (ScienceWorld's generator does not always
        give a winning one). The expert is an oracle: its plan may read the engine's score, no judge does."""
        if _gold.get(self._task) == tuple(self._gold):
            del _gold[self._task]

    def _advance_gold(self, command: str) -> None:
        """After `command` was played (or "" after the reset): the gold path moves past it (`_follow_gold`), then
        past commands the engine's parser rejects here (`_skip_stale_gold`)."""
        if self.expert:
            self._follow_gold(command)
            self._skip_stale_gold()

    def _skip_stale_gold(self) -> None:
        """Go past the gold path's next commands while the engine's parser knows no such command here.

        The gold path was generated on another load of the world, where an ambiguity answer ("0")
        may have picked another of several objects the engine lists alike (the seeds of
        Mendelian genetics: "pea seed (in pea plant, in flower pot 7, ...)" twice, for seeds of
        different traits). A later command naming an object by what that load made of it
        ("move round orange pea seed in ceramic cup to ...") then matches nothing here, and the
        expert would send it forever; the rest of the path may still win.
        """
        sw = engines.engine()
        while (not self._done and AMBIGUOUS not in self._text and self._gold_at < len(self._gold)
               and not self._gold[self._gold_at].isdigit()
               and engines.parser_reply(sw, self._gold[self._gold_at]).strip() == UNKNOWN_ACTION):
            self._gold_at += 1
            self._follow_gold("")  # and past the answers to the question it would have raised

    def _follow_gold(self, command: str) -> None:
        """Advance the gold path past `command` when it was its next step, and past the answers
        ("0", "1", ...) it gives to ambiguity questions the engine did not ask this time."""
        if self._gold_at < len(self._gold) and command == self._gold[self._gold_at]:
            self._gold_at += 1
        while (self._gold_at < len(self._gold) and self._gold[self._gold_at].isdigit()
               and AMBIGUOUS not in self._text):
            self._gold_at += 1

    def _read(self, text: str, info: dict, done: bool) -> None:
        self._text = text
        self._score = int(info["score"])
        self._moves = int(info["moves"])
        self._done = done
        if AMBIGUOUS in text:
            self._valid = sorted(set(_CHOICE.findall(text)))
        else:
            self._valid = admissible_view(info["valid"], self.cap, keep=door_actions(info["look"]))

    def _info(self, valid: bool) -> ScienceWorldInfo:
        lost = self._score < 0
        won = self._done and not lost
        admissible = [] if self._done else list(self._valid)
        name, variation = parse_task_id(self._task) or ("", 0)
        info: ScienceWorldInfo = {
            "task": self._task,
            "task_name": name,
            "variation": variation,
            "moves": self._moves,
            "goal": self._goal,
            "admissible_actions": admissible,
            "admissible_complete": self._done or AMBIGUOUS in self._text,  # else a cut of what the engine takes
            "action_kinds": command_kinds(admissible, VERB_KINDS),
            "valid_action": valid,
            "won": won,
            "lost": lost,
            "score": float(self._score),
            "max_score": 100.0,
        }
        if self.expert:
            info["expert_plan"] = [] if self._done else self._plan()
        return info

    def _plan(self) -> list[str]:
        """The rest of the gold path; "0" first where the engine asks a question the gold path does not answer
        (its own load did not raise it): ScienceWorld's gold path generator answers "0" too."""
        plan = self._gold[self._gold_at:]
        if AMBIGUOUS in self._text and not (plan and plan[0].isdigit()):
            return ["0", *plan]
        return plan
