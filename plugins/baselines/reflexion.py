"""Reflexion: after a failed trial, a verbal self-reflection goes to episodic memory and the task is tried again.

The harness `reflexion` is a cascade of N trials of this intervention (`reflexion:N` for
another N): the runner resets the env to the same initial state for each trial and stops at
the first trial the env reports as won. A trial fails by the task's success signal
(`EpisodeEnd.won`), as in the paper, where the evaluator is the environment's binary reward
or a heuristic; this is a baseline, not a recovery verifier. When a trial fails, the
self-reflection (the judge model's, or the rule-based `rule_reflection`) is stored in
`<playbook>.reflections.jsonl`, keyed by run, episode and trial; the next trial of the same
episode shows the last `reflexion_memory` reflections to the agent as a standing note.
Reflections never leave their task: the next task starts with an empty memory.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from playground import EpisodeEnd, EpisodeStart
from playground.host_api import episode_key
from playground.plugins.baselines.episode import MemoryBaseline
from playground.plugins.baselines.judge import Judge, object_schema, string_schema
from playground.plugins.baselines.memory import REFLECTIONS, memory_for
from playground.plugins.baselines.params import ReflexionParams, defaults_of
from playground.plugins.baselines.trajectory import Trajectory, words

NAME = "reflexion"
DEFAULTS: dict[str, Any] = defaults_of(ReflexionParams)  # declared in params.py: types, ranges, meanings
TRIALS = 3  # the `reflexion` harness's trials
MAX_TRIALS = 20


def rule_reflection(trajectory: Trajectory, trial: int) -> str:
    """The rule-based self-reflection on a failed trial: what went wrong, and a plan for the next trial.

    It names the actions repeated without effect, the invalid actions, a long stall, a stop
    with no completion message, running out of steps, the env's reported failures, the goal's
    words no action named, and the last step that brought something new.
    """
    wrong: list[str] = []
    plan: list[str] = []
    for action, times in trajectory.repeats()[:2]:
        wrong.append(f"I repeated '{action}' {times} times and it changed nothing")
        plan.append(f"do not repeat '{action}'")
    invalid = trajectory.invalid_actions()[:3]
    if invalid:
        wrong.append("these actions were not valid: " + ", ".join(f"'{a}'" for a in invalid))
        plan.append("use only actions from the admissible list, exactly as written")
    if trajectory.longest_stall() >= 4:
        wrong.append(f"{trajectory.longest_stall()} steps in a row brought nothing new")
    if trajectory.failures():
        wrong.append("the environment reported " + ", ".join(trajectory.failures()[:3]))
    if trajectory.stopped_early:
        wrong.append("I stopped before any observation said the task was done")
        plan.append("keep acting until an observation confirms the task is done")
    elif trajectory.ending == "out_of_steps":
        wrong.append(f"I ran out of steps after {len(trajectory.steps)} steps")
        plan.append("waste no steps on looking around")
    named = set().union(*(words(s.action) for s in trajectory.steps)) if trajectory.steps else set()
    untouched = sorted(words(trajectory.goal) - named - STOP_WORDS)[:6]
    if untouched:
        plan.append("act on what the goal names that my actions never named: " + ", ".join(untouched))
    useful = trajectory.useful_steps()
    if useful:
        plan.append(f"the last step that brought something new was '{useful[-1].action}'; get there quickly")
    if not wrong:
        wrong.append("the actions I took did not complete the task")
    return (f"Trial {trial} failed ({trajectory.summary()}): " + "; ".join(wrong) + ". Plan for the next trial: "
            + "; ".join(plan or ["try a different approach from the start"]) + ".")


STOP_WORDS = {"the", "and", "for", "you", "your", "with", "that", "this", "from", "into", "then", "please", "are",
              "its", "need", "want", "has", "have", "was", "not", "but", "can", "all", "any", "than", "lower",
              "price", "dollars", "over", "thanks", "coming", "hey", "here", "there", "let", "get", "put"}

SYSTEM = ("You are an agent reflecting on a failed attempt at a task (Reflexion). From your goal and your "
          "trajectory, diagnose in a few sentences why the attempt failed, and write a concise, concrete plan for "
          'the next attempt. Answer with one JSON object: {"reflection": "..."}.')
SCHEMA = object_schema({"reflection": string_schema(800, 1)})


def model_reflection(judge: Judge, trajectory: Trajectory, trial: int, earlier: list[str]) -> str | None:
    """The judge model's self-reflection (None when the reply is unusable)."""
    memory = "\n".join(earlier) or "(none)"
    answer = judge.ask("reflexion.reflector", SYSTEM,
                       f"Goal: {trajectory.goal}\nTrial {trial} ({trajectory.summary()}):\n{trajectory.text()}\n"
                       f"Earlier reflections:\n{memory}", SCHEMA)
    text = " ".join(str((answer or {}).get("reflection", "")).split())
    return f"Trial {trial}: {text[:1500]}" if text else None


class ReflexionPlugin(MemoryBaseline):
    """One trial: the earlier trials' reflections as a note; a reflection of its own when it fails."""

    NAME, PARAMS = NAME, ReflexionParams

    def __init__(self, params: ReflexionParams | Mapping[str, Any]) -> None:
        super().__init__(params)
        self.reflections: list[str] = []

    def begin(self, start: EpisodeStart) -> None:
        """Read this episode's earlier trials' reflections into the note."""
        self.memory = memory_for(start, REFLECTIONS)
        ids = start.ids
        latest: dict[int, str] = {}  # trial -> its reflection (the last written, should a trial be replayed)
        for record in self.memory.records() if self.memory else []:
            if (record.get("run"), record.get("episode")) == (ids.run_id, ids.episode_id) \
                    and isinstance(record.get("attempt"), int) and record["attempt"] < ids.attempt:
                latest[record["attempt"]] = str(record.get("reflection", ""))
        keep = int(self.p["reflexion_memory"])
        self.reflections = [latest[t] for t in sorted(latest)][-keep:] if keep else []
        if self.reflections:
            self.note = ("Reflections on your earlier trials at this same task (use them to do better this time):\n"
                         + "\n".join(f"- {r}" for r in self.reflections))

    def learn(self, end: EpisodeEnd) -> None:
        """A failed trial (the env's success signal, as in the paper) writes its reflection."""
        if end.won or end.status == "error" or self.memory is None:
            return
        trial = end.ids.attempt
        text = model_reflection(self.judge, self.trajectory, trial, self.reflections) if self.judge.configured \
            else None
        by = "model" if text else "rules"
        text = text or rule_reflection(self.trajectory, trial)
        with self.memory.locked():
            self.memory.append({**episode_key(end.ids), "task": end.ids.task_id, "reflection": text, "by": by,
                                "at": time.time()})


def trials_harness(name: str, rest: str):
    """The harness `reflexion:N`: a cascade of N Reflexion trials (1 to MAX_TRIALS)."""
    from playground.host_api import HarnessSpec

    if not rest.isdigit() or not 1 <= int(rest) <= MAX_TRIALS:
        raise ValueError(f"harness {name!r}: reflexion:N takes a number of trials from 1 to {MAX_TRIALS}, "
                         f"got {rest!r}")
    return HarnessSpec(name, cascade=(NAME,) * int(rest),
                       description=f"Reflexion: up to {rest} trials, a self-reflection after each failed one")
