"""The gymnasium adapter over ALFWorld's real engine (imports textworld and alfworld).

A game runs in textworld's PDDL env behind alfworld's wrappers: `AlfredDemangler`
(readable names such as "apple 1"), `AlfredInfos`, and, only when the env is made with
`expert=True`, `AlfredExpert` with the planner expert. The planner expert is passed by
keyword (`AlfredTWEnv.init_env` passes it positionally, which silently selects the
hand-coded expert).

An inadmissible action never reaches the engine: it changes nothing and returns
"Nothing happens." (ALFWorld's own text) with `valid_action=False`. Matching ignores case
and extra spaces. PDDL games cannot be copied, so a snapshot is the action history and
restoring is reset + replay; the global `random` the engine uses is seeded from the task
id at every reset and kept private to the env, so the same reset gives the same state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from playground.core.actions import command_kinds, match_admissible
from playground.core.env import EnvInfo, TextEnv
from playground.core.task_sets import TaskSet
from playground.envs.alfworld.data import task_type_of
from playground.envs.alfworld.engine import IsolatedRandom, alfworld_module

INVALID_ACTION_TEXT = "Nothing happens."
GAME_OVER_TEXT = "The task is over."
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
_GOAL = re.compile(r"Your task is to:\s*(.+?)\s*$", re.S)


def goal_of(intro: str) -> str:
    """Return the task sentence of a game's first observation ("put a clean apple in fridge.")."""
    match = _GOAL.search(intro)
    return match.group(1).strip() if match else ""


def clean_text(text: str) -> str:
    """Return the engine's text without the welcome banner."""
    return text.replace(WELCOME, "").strip()


@dataclass(frozen=True)
class GameState:
    """What the adapter keeps from the engine after a reset or a step."""

    text: str
    admissible: tuple[str, ...]
    won: bool
    plan: tuple[str, ...] = ()


@lru_cache(maxsize=1)
def _demangler_class() -> type:
    tw_env: Any = alfworld_module("agents.environment.alfred_tw_env")  # a base class mypy cannot see

    class Demangler(tw_env.AlfredDemangler):
        """alfworld's demangler, with names trimmed (ids without '_bar_' get a trailing space)."""

        def load(self, *args, **kwargs):
            """Load the game and demangle its names."""
            super().load(*args, **kwargs)
            for info in self._entity_infos.values():
                if isinstance(info.name, str):
                    info.name = info.name.strip()

    return Demangler


def _wrappers(expert: bool) -> list:
    """alfworld's wrappers: demangler, infos, and (only for `expert`) the planner expert, by keyword."""
    tw_env = alfworld_module("agents.environment.alfred_tw_env")
    wrappers = [_demangler_class()(shuffle=False), tw_env.AlfredInfos]
    if expert:
        wrappers.append(tw_env.AlfredExpert(expert_type=tw_env.AlfredExpertType.PLANNER))
    return wrappers


class GameSession:
    """One game file loaded in the real engine, with a private `random` state."""

    def __init__(self, game_file: Path, expert: bool = False) -> None:
        import textworld

        self.game_file = Path(game_file)
        self.expert = expert
        self.random = IsolatedRandom()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        if expert:
            infos.extras.append("expert_plan")
        with self.random.active():
            self._env = textworld.start(str(self.game_file), request_infos=infos, wrappers=_wrappers(expert))

    def reset(self, seed: Any) -> GameState:
        """Start the game afresh with the engine's randomness seeded from `seed`."""
        self.random.seed(seed)
        with self.random.active():
            return self._read(self._env.reset())

    def step(self, command: str) -> GameState:
        """Send an admissible command to the engine."""
        with self.random.active():
            state, _, _ = self._env.step(command)
        return self._read(state)

    def close(self) -> None:
        """Release the engine."""
        self._env.close()

    def _read(self, state) -> GameState:
        plan = tuple(state.get("extra.expert_plan") or ()) if self.expert else ()
        return GameState(clean_text(state.feedback or ""), tuple(sorted(set(state["admissible_commands"] or ()))),
                         bool(state["won"]), plan)


def play_expert(game_file: Path, seed: Any, max_steps: int = 60) -> list[tuple[str, str]] | None:
    """Follow the planner expert from the start; return its (command, observation) steps if it wins, else None.

    `seed` seeds the engine's randomness as `AlfWorldEnv.reset` does (with the task id).
    """
    session = GameSession(game_file, expert=True)
    try:
        state = session.reset(seed)
        steps: list[tuple[str, str]] = []
        while not state.won:
            if len(steps) >= max_steps or not state.plan or state.plan[0] not in state.admissible:
                return None
            command = state.plan[0]
            state = session.step(command)
            steps.append((command, state.text))
        return steps
    finally:
        session.close()


@dataclass(frozen=True)
class AlfWorldSnapshot:
    """A saved position: the task and the admissible actions played since its reset."""

    task: str
    actions: tuple[str, ...]


class AlfWorldInfo(EnvInfo, total=False):
    """`EnvInfo` plus the ALFRED task type."""

    task_type: str


class AlfWorldEnv(TextEnv):
    """ALFWorld games behind the playground env API (see module docstring).

    `locate(task_id)` returns the game file of a task (generating it first if needed);
    `task_set` checks task ids and gives the tasks played when reset names none.
    """

    can_snapshot = True
    env_name = "alfworld"

    def __init__(self, locate: Callable[[str], Path], task_set: TaskSet | None = None, expert: bool = False) -> None:
        super().__init__(task_set)
        self.locate = locate
        self.expert = expert
        self._session: GameSession | None = None
        self._task = ""
        self._task_type = ""
        self._goal = ""
        self._state = GameState("", (), False)
        self._actions: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start the task in `options["task"]` (default: one of the default split's, by seed) afresh."""
        super().reset(seed=seed)
        task = self.task_for_reset(seed, options)
        game_file = self.locate(task)
        if self._session is None or self._session.game_file != game_file:
            self.close()
            self._session = GameSession(game_file, expert=self.expert)
        self._task = task
        self._task_type = task_type_of(task)
        self._state = self._session.reset(task)
        self._goal = goal_of(self._state.text)
        self._actions = []
        return self._state.text, self._info(valid=True)

    def step(self, action: str):
        """Play `action`; an inadmissible one is not sent to the engine and changes nothing."""
        if self._session is None:
            raise RuntimeError("alfworld: call reset() before step()")
        command = match_admissible(action, self._admissible())
        if command is None:
            text = GAME_OVER_TEXT if self._state.won else INVALID_ACTION_TEXT
            return text, 0.0, self._state.won, False, self._info(valid=False)
        self._state = self._session.step(command)
        self._actions.append(command)
        reward = 1.0 if self._state.won else 0.0
        return self._state.text, reward, self._state.won, False, self._info(valid=True)

    def snapshot(self) -> AlfWorldSnapshot:
        """Return the current position as the task plus the actions played since reset."""
        if self._session is None:
            raise RuntimeError("alfworld: call reset() before snapshot()")
        return AlfWorldSnapshot(self._task, tuple(self._actions))

    def restore(self, snapshot: AlfWorldSnapshot) -> None:
        """Return to a snapshot's position: reset its task, then replay its actions."""
        self.reset(options={"task": snapshot.task})
        for action in snapshot.actions:
            self.step(action)

    def close(self) -> None:
        """Release the engine."""
        if self._session is not None:
            self._session.close()
        self._session = None

    def _admissible(self) -> list[str]:
        return [] if self._state.won else list(self._state.admissible)

    def _info(self, valid: bool) -> AlfWorldInfo:
        won = self._state.won
        admissible = self._admissible()
        info: AlfWorldInfo = {
            "task": self._task,
            "task_type": self._task_type,
            "goal": self._goal,
            "admissible_actions": admissible,
            "action_kinds": command_kinds(admissible),
            "valid_action": valid,
            "won": won,
            "lost": False,
            "score": 1.0 if won else 0.0,
            "max_score": 1.0,
        }
        if self.expert:
            info["expert_plan"] = [] if won else list(self._state.plan)
        return info
