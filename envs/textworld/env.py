"""A gymnasium adapter over a TextWorld game (imports textworld).

Actions are checked against the game's admissible commands before they reach the
game: an inadmissible action changes nothing and gets `valid_action=False`. Matching
ignores case and extra spaces ("Take Apple" plays "take apple"). Observations keep the
game's score lines and end banners, which the agent reads; `remove_grade_text` removes
them for judges (`grades.py`).
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import textworld
from textworld import EnvInfos

from playground.core.actions import command_kinds, match_admissible
from playground.core.env import EnvInfo, TextEnv
from playground.core.task_sets import TaskSet
from playground.envs.textworld.games import ensure_game
from playground.envs.textworld.grades import without_grade_text

INVALID_ACTION_TEXT = "That is not something you can do here."
GAME_OVER_TEXT = "The game is over."

_BANNER_LINE = re.compile(r"[ _|\\$/<>]*[_|\\$/<>][ _|\\$/<>]*")  # a line of the ASCII-art title
_STATUS_LINE = re.compile(r"\n>[^\n]*\Z")  # trailing prompt + "-= Room =-score/moves"
_END_PROMPT = "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"


def clean_feedback(text: str) -> str:
    """Return the game's text without the title art, status line and end-of-game prompt."""
    text = _STATUS_LINE.sub("", text).replace(_END_PROMPT, "")
    lines = [line.strip() for line in text.splitlines() if not _BANNER_LINE.fullmatch(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


@contextmanager
def _quiet_jericho():
    """Hide jericho's "game not fully supported" warning: textworld keeps the score itself."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Game .* is not fully supported")
        yield


@dataclass(frozen=True)
class _Status:
    """What the adapter remembers about the game between steps."""

    goal: str = ""
    admissible: tuple[str, ...] = ()
    score: float = 0.0
    max_score: float = 0.0
    won: bool = False
    lost: bool = False
    plan: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.won or self.lost


@dataclass(frozen=True)
class TextWorldSnapshot:
    """A saved adapter state: a copy of the textworld env plus what the adapter tracks."""

    game_env: Any
    game: Path
    task: str
    status: _Status


class TextWorldEnv(TextEnv):
    """One TextWorld game per task of a task set, behind the playground env API.

    `reset(options={"task": "custom-20000"})` loads (generating if needed) and resets
    that game; `step` returns gymnasium's 5-tuple with reward = score gained.
    """

    can_snapshot = True
    env_name = "textworld"

    def __init__(self, task_set: TaskSet, expert: bool = False) -> None:
        super().__init__(task_set)
        self.expert = expert
        self._infos = EnvInfos(admissible_commands=True, objective=True, score=True, max_score=True,
                               won=True, lost=True, policy_commands=expert)
        self._env: Any = None
        self._game: Path | None = None
        self._task = ""
        self._status = _Status()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start the task in `options["task"]` (default: one of the default split's, by seed) afresh."""
        super().reset(seed=seed)
        task = self.task_for_reset(seed, options)
        assert self.task_set is not None  # the provider makes every TextWorld env with its task set
        game = ensure_game(self.task_set, task)
        if game != self._game:
            self.close()
            with _quiet_jericho():
                self._env = textworld.start(str(game), request_infos=self._infos)
            self._game = game
        self._task = task
        state = self._env.reset()
        self._status = self._read(state)
        return clean_feedback(state.feedback), self._info(valid=True)

    def step(self, action: str):
        """Play `action`; an inadmissible one is not sent to the game and changes nothing."""
        if self._env is None:
            raise RuntimeError("textworld: call reset() before step()")
        command = match_admissible(action, self._admissible())
        if command is None:
            text = GAME_OVER_TEXT if self._status.ended else INVALID_ACTION_TEXT
            return text, 0.0, self._status.ended, False, self._info(valid=False)
        state, _, _ = self._env.step(command)
        before = self._status.score
        self._status = self._read(state)
        reward = self._status.score - before
        return clean_feedback(state.feedback), reward, self._status.ended, False, self._info(valid=True)

    def remove_grade_text(self, text: str) -> str:
        """`text` without the game's score lines and end banners ("Your score has just gone up by one point.",
        "*** The End ***", "You scored 1 out of a possible 1, in 5 turns."; `grades.without_grade_text`)."""
        return without_grade_text(text)

    def snapshot(self) -> TextWorldSnapshot:
        """Return a copy of the current game state that later steps do not change."""
        if self._env is None:
            raise RuntimeError("textworld: call reset() before snapshot()")
        assert self._game is not None  # set with self._env
        with _quiet_jericho():
            return TextWorldSnapshot(self._env.copy(), self._game, self._task, self._status)

    def restore(self, snapshot: TextWorldSnapshot) -> None:
        """Return to the state saved by `snapshot()`; the snapshot stays reusable."""
        with _quiet_jericho():
            game_env = snapshot.game_env.copy()
        self.close()
        self._env, self._game, self._task, self._status = game_env, snapshot.game, snapshot.task, snapshot.status

    def close(self) -> None:
        """Release the game interpreter."""
        if self._env is not None:
            self._env.close()
        self._env, self._game = None, None

    def _read(self, state) -> _Status:
        return _Status(
            goal=state["objective"] or "",
            admissible=tuple(sorted(set(state["admissible_commands"] or []))),
            score=float(state["score"] or 0),
            max_score=float(state["max_score"] or 0),
            won=bool(state["won"]),
            lost=bool(state["lost"]),
            plan=tuple(state["policy_commands"] or []) if self.expert else (),
        )

    def _admissible(self) -> list[str]:
        return [] if self._status.ended else list(self._status.admissible)

    def _info(self, valid: bool) -> EnvInfo:
        s = self._status
        admissible = self._admissible()
        info: EnvInfo = {
            "task": self._task,
            "goal": s.goal,
            "admissible_actions": admissible,
            "action_kinds": command_kinds(admissible),
            "valid_action": valid,
            "won": s.won,
            "lost": s.lost,
            "score": s.score,
            "max_score": s.max_score,
        }
        if self.expert:
            info["expert_plan"] = [] if s.ended else list(s.plan)
        return info
