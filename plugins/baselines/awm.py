"""AWM (Agent Workflow Memory): workflows induced from successful trajectories, given to the agent on later tasks.

Online, as in the paper's online setting: after each episode judged successful (`awm_success`,
see `success.py`), a workflow is induced from its trajectory and added to the memory file
`<playbook>.workflows.jsonl`; every episode starts with the memory's workflows in the agent's
context as a standing note (the most often induced first, within `awm_budget` tokens).

Induction: with a judge model, the model writes the workflow (a title for the kind of task,
steps with the task's values replaced by descriptive variables); without one, the rule
`rule_workflow`: the valid steps that brought something new, each action with its entities
abstracted into slots named by the action's kind (`take {object from the goal}`,
`click[{option}]`), consecutive repeats collapsed; its title is the action-kind path.
The same steps induced again count as one workflow seen more often.
"""

from __future__ import annotations

import time
from typing import Any

from playground import EpisodeEnd, EpisodeStart
from playground.host_api import episode_key
from playground.plugins.baselines.episode import MemoryBaseline
from playground.plugins.baselines.judge import Judge, array_schema, object_schema, string_schema
from playground.plugins.baselines.memory import WORKFLOWS, append_once, memory_for
from playground.plugins.baselines.params import AwmParams, defaults_of
from playground.plugins.baselines.success import succeeded
from playground.plugins.baselines.trajectory import Trajectory, approx_tokens, goal_gist

NAME = "awm"
DEFAULTS: dict[str, Any] = defaults_of(AwmParams)  # declared in params.py: types, ranges, meanings


def rule_workflow(trajectory: Trajectory, max_steps: int) -> dict | None:
    """The rule-induced workflow of a trajectory: {"title", "steps"}, or None when no step is left."""
    steps = trajectory.abstract_steps()[:max_steps]
    if not steps:
        return None
    return {"title": " -> ".join(trajectory.kind_path()) + f" (as for: {goal_gist(trajectory.goal, 10)})",
            "steps": steps}


SYSTEM = ("You induce reusable workflows from an agent's successful trajectory (Agent Workflow Memory). Write one "
          "workflow: a title that describes the kind of task, and the steps that solved it, with every value specific "
          "to this task replaced by a descriptive variable in braces, e.g. {product-name}. Leave out steps that did "
          'not help. Answer with one JSON object: {"title": "...", "steps": ["...", "..."]}.')
SCHEMA = object_schema({"title": string_schema(120, 1), "steps": array_schema(string_schema(160, 1), 8, 1)})


def model_workflow(judge: Judge, trajectory: Trajectory, max_steps: int) -> dict | None:
    """The judge model's workflow (None when the reply is unusable)."""
    answer = judge.ask("awm.inducer", SYSTEM, f"Goal: {trajectory.goal}\nTrajectory:\n{trajectory.text()}", SCHEMA)
    if not answer:
        return None
    steps = [" ".join(str(s).split())[:300] for s in answer["steps"] if str(s).strip()][:max_steps]
    title = " ".join(str(answer.get("title", "")).split())[:200]
    return {"title": title, "steps": steps} if steps and title else None


def workflows(records: list[dict]) -> list[dict]:
    """The memory's workflows, once each (by their steps), with how often each was induced; most often first."""
    seen: dict[tuple, dict] = {}
    for number, record in enumerate(records):
        steps = tuple(record.get("steps") or ())
        if not steps:
            continue
        entry = seen.setdefault(steps, {"title": "", "steps": list(steps), "count": 0, "last": 0})
        entry.update(title=str(record.get("title", "")), count=entry["count"] + 1, last=number)
    return sorted(seen.values(), key=lambda w: (-w["count"], -w["last"]))


def render(found: list[dict], budget: int) -> str:
    """The workflows as a note, most often induced first, within `budget` tokens ("" when none fits)."""
    header = "Workflows that solved earlier tasks (fill the {slots} from your goal):"
    lines, used = [header], approx_tokens(header)
    for number, workflow in enumerate(found, 1):
        block = f"Workflow {number}: {workflow['title']}\n" + "\n".join(
            f"  {i}. {step}" for i, step in enumerate(workflow["steps"], 1))
        if used + approx_tokens(block) > budget:
            continue
        lines.append(block)
        used += approx_tokens(block)
    return "\n".join(lines) if len(lines) > 1 else ""


class AwmPlugin(MemoryBaseline):
    """AWM for one episode: the memory's workflows as a note; a new workflow when the episode succeeded."""

    NAME, PARAMS = NAME, AwmParams
    SUCCESS_PARAM, MEMORY_PARAM = "awm_success", "awm_memory"

    def begin(self, start: EpisodeStart) -> None:
        """Read the memory's workflows into the note."""
        self.memory = memory_for(start, WORKFLOWS, str(self.p["awm_memory"]), "awm_memory")
        self.note = render(workflows(self.memory.records() if self.memory else []), int(self.p["awm_budget"]))

    def learn(self, end: EpisodeEnd) -> None:
        """Induce a workflow from a successful episode and add it to the memory."""
        if end.status == "error" or self.memory is None:
            return
        success, judged_by = succeeded(str(self.p["awm_success"]), self.judge, self.trajectory, end)
        if not success:
            return
        max_steps = int(self.p["awm_max_steps"])
        workflow = model_workflow(self.judge, self.trajectory, max_steps) if self.judge.configured else None
        by = "model" if workflow else "rules"
        workflow = workflow or rule_workflow(self.trajectory, max_steps)
        if workflow is None:
            return
        append_once(self.memory, episode_key(end.ids), [{"task": end.ids.task_id, **workflow, "induced_by": by,
                                                       "success_by": judged_by, "at": time.time()}])
