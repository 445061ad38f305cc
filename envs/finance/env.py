"""The Finance env: one question, one answer, scored as the benchmark scores it.

`reset(options={"task": id})` shows the question context as the observation; `info`
carries `goal` (a short instruction), `admissible_actions=None` (free text) with
`action_kinds={}` (no answer can be named in advance; every answer ends the episode),
`valid_action`, `won`, `score`/`max_score` (Formula: 1 point; FiNER: one point per gold
tag) and, when made with `expert=True`, `expert_plan=[target]`. `step(answer)` scores the
answer and ends the episode. `valid_action` says whether the answer is well-formed for
the question (`format_check`), which never depends on the gold answer. The observation
after the answer ends with its score ("Score: 1 of 1."); `remove_grade_text` removes it for
judges.
"""

from __future__ import annotations

from typing import Any

from playground.core.env import EnvInfo, EnvProvider, TextEnv, cut_grade_text, grade_text_pattern
from playground.core.task_sets import TaskSet
from playground.envs.finance import data
from playground.envs.finance.format_check import check
from playground.envs.finance.scoring import score_answer

GOALS = {
    "formula": "Answer the financial question with one number, rounded to 2 decimal places, and nothing else.",
    "finer": "Answer with one US GAAP tag per question, from the tag list, separated by commas, in question order.",
}


# the answer's score, the last sentence of the observation after an answer: "Score: 1 of 1."
GRADE_TEXT = grade_text_pattern(r"Score: [-+]?[\d.e+]+ of [-+]?[\d.e+]+\.?(?=[ \t]*$)")


def without_grade_text(text: str) -> str:
    """An observation without the answer's score ("Answer recorded: '42.00'. Score: 1 of 1." -> "Answer recorded:
    '42.00'."): `FinanceEnv.remove_grade_text`, `FinanceProvider`'s too."""
    return cut_grade_text(text, GRADE_TEXT)


class FinanceInfo(EnvInfo, total=False):
    """`EnvInfo` plus the task's family (`formula` or `finer`)."""

    family: str


class FinanceEnv(TextEnv):
    """A single-step question-answering env over Finance tasks (see module docstring)."""

    env_name = "finance"

    def __init__(self, task_set: str | TaskSet, expert: bool = False) -> None:
        if isinstance(task_set, str):
            sets = data.task_sets()
            if task_set not in sets:
                raise ValueError(f"finance: unknown task set {task_set!r}; choose from: {', '.join(sorted(sets))}")
            task_set = sets[task_set]
        super().__init__(task_set)
        self.expert = expert
        self.task: data.Task | None = None
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Show the question of `options["task"]` (default: one of the default split's, by seed);
        return (context, info)."""
        super().reset(seed=seed)
        task_id = self.task_for_reset(seed, options)
        self.task, self.done = data.get_task(task_id), False
        return self.task.context, self._info(valid=True, score=0.0, won=False)

    def step(self, action: str):
        """Score `action` as the answer and end the episode."""
        if self.task is None or self.done:
            raise RuntimeError("finance: the episode is over (one answer per question); call reset()")
        self.done = True
        answer = str(action)
        result = score_answer(self.task.family, answer, self.task.target)
        valid = not check(self.task.context, answer)
        observation = f"Answer recorded: {answer.strip()[:200]!r}. Score: {result.score:g} of {result.max_score:g}."
        reward = result.score / result.max_score if result.max_score else 0.0
        return observation, reward, True, False, self._info(valid=valid, score=result.score, won=result.won)

    def remove_grade_text(self, text: str) -> str:
        """The observation without the answer's score ("Score: 1 of 1.")."""
        return without_grade_text(text)

    def _info(self, valid: bool, score: float, won: bool) -> FinanceInfo:
        task = self.task
        assert task is not None  # reset() has set it
        max_score = score_answer(task.family, task.target, task.target).max_score
        info: FinanceInfo = {"goal": GOALS[task.family], "admissible_actions": None, "action_kinds": {},
                         "valid_action": valid, "won": won,
                "lost": self.done and not won, "score": score, "max_score": max_score, "family": task.family}
        if self.expert:
            info["expert_plan"] = [] if self.done else [task.target]
        return info


class FinanceProvider(EnvProvider):
    """Provides the `finance` env: generated `formula` and `finer` task sets, plus benchmark files."""

    name = "finance"
    description = "XBRL Finance: formula questions and XBRL tagging (generated; benchmark files via FINANCE_DATA)"
    default_task_set = "formula"

    def task_sets(self) -> dict[str, TaskSet]:
        """Return the task sets, by name (file task sets only when FINANCE_DATA names files)."""
        return data.task_sets()

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> FinanceEnv:
        """Build a fresh env for one episode on `task_set`."""
        sets = self.task_sets()
        if task_set not in sets:
            raise ValueError(f"finance: unknown task set {task_set!r}; choose from: {', '.join(sorted(sets))}")
        return FinanceEnv(sets[task_set], expert=expert)

    def remove_grade_text(self, text: str) -> str:
        """An observation without the answer's score (the env's own function)."""
        return without_grade_text(text)

    def describe(self, task_set: str) -> dict:
        """Return the env, task set, version and the generator seeds or the files and their hash."""
        chosen = self.task_sets()[task_set]
        header = {"env": self.name, "task_set": task_set, "version": "1", "family": chosen.params["family"]}
        if chosen.params.get("generated"):
            return header | {"seeds": data.SEEDS_TEXT}
        return header | {"files": dict(chosen.params["files"]), "data_hash": data.data_hash(chosen)}

    def data_files(self, task_set: str) -> dict[str, str]:
        """The benchmark files behind a file task set (none for a generated one), hashed into a run's lock.json."""
        return {stem: str(path) for stem, path in (self.task_sets()[task_set].params.get("files") or {}).items()}
