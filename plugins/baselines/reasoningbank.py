"""ReasoningBank: memory items distilled from successes and failures, retrieved by similarity to the task.

Each episode starts by retrieving the `rb_k` memory items most similar to its goal and
showing them to the agent as a standing note. When it ends, the episode is judged a success
or a failure (`rb_success`, see `success.py`: the judge model, as the paper's LLM-as-a-judge,
or the rule fallback, a completion message observed), and up to `rb_items` memory items
(title, description, content) are distilled from its trajectory: strategies that worked
from a success, preventive lessons from a failure. With a judge model the model writes them;
without one, `rule_items` does. Items are appended to `<playbook>.memory.jsonl`, as the
paper's memory grows by simple addition.

Retrieval is BM25 (`bm25s`, through `playground.text_index`) over each item's task, title,
description and content, with the goal as the query: the paper embeds the task and compares
embeddings; no embedding model ships with playground, so BM25 takes its place.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from playground import EpisodeEnd, EpisodeStart
from playground.host_api import episode_key
from playground.plugins.baselines.episode import MemoryBaseline
from playground.plugins.baselines.judge import Judge, array_schema, object_schema, string_schema
from playground.plugins.baselines.memory import RB_ITEMS, append_once, memory_for
from playground.plugins.baselines.params import ReasoningBankParams, defaults_of
from playground.plugins.baselines.success import succeeded
from playground.plugins.baselines.trajectory import Trajectory, goal_gist

NAME = "reasoningbank"
DEFAULTS: dict[str, Any] = defaults_of(ReasoningBankParams)  # declared in params.py: types, ranges, meanings
FIELDS = ("title", "description", "content")


def rule_items(trajectory: Trajectory, success: bool, limit: int) -> list[dict]:
    """The rule-distilled memory items of an episode: a strategy from a success, preventive lessons from a failure."""
    gist = goal_gist(trajectory.goal, 10)
    steps = trajectory.abstract_steps()
    if success:
        if not steps:
            return []
        return [{"title": "A sequence that completed a similar task",
                 "description": f"What worked for '{gist}'.",
                 "content": "Steps: " + " -> ".join(steps[:12]) + ". Fill the slots from the goal and check what "
                            "each step shows before the next."}][:limit]
    items = []
    for action, times in trajectory.repeats()[:1]:
        items.append({"title": "Do not repeat an action that changes nothing",
                      "description": f"A failure on '{gist}': '{action}' repeated {times} times.",
                      "content": "When an action brings the same observation again, switch to an action of another "
                                 "kind that the goal needs instead of repeating it."})
    if trajectory.invalid_actions():
        items.append({"title": "Use the admissible actions exactly",
                      "description": f"A failure on '{gist}': actions were rejected as invalid.",
                      "content": "Pick actions from the admissible list and copy their wording; invented or "
                                 "rephrased actions are rejected and waste steps."})
    if trajectory.stopped_early:
        items.append({"title": "Do not stop before the task is confirmed",
                      "description": f"A failure on '{gist}': the agent stopped early.",
                      "content": "Declare the task done only after an observation confirms it; until then keep "
                                 "acting on the goal's objects."})
    if trajectory.ending == "out_of_steps" or trajectory.longest_stall() >= 4:
        items.append({"title": "Make progress every step",
                      "description": f"A failure on '{gist}': the steps ran out or several brought nothing new.",
                      "content": "Act on the objects the goal names first; avoid looking around once the needed "
                                 "objects are known."})
    if not items:
        items.append({"title": "Check the goal's constraints before finishing",
                      "description": f"A failure on '{gist}' with no loop, invalid action or early stop.",
                      "content": "Before the final action, compare what you did or chose with every constraint "
                                 "the goal states."})
    return items[:limit]


SUCCESS_SYSTEM = ("You distil memory items from an agent's successful trajectory (ReasoningBank): generalisable "
                  "strategies that led to success. Each item has a title, a one-sentence description and content "
                  '(1-3 sentences). Answer with one JSON object: {"memory_items": [{"title": "...", '
                  '"description": "...", "content": "..."}]}.')
FAILURE_SYSTEM = ("You distil memory items from an agent's failed trajectory (ReasoningBank): reflect on why it "
                  "failed and write preventive lessons that would avoid the failure. Each item has a title, a "
                  'one-sentence description and content (1-3 sentences). Answer with one JSON object: '
                  '{"memory_items": [{"title": "...", "description": "...", "content": "..."}]}.')
SCHEMA = object_schema({"memory_items": array_schema(object_schema({
    "title": string_schema(80, 1), "description": string_schema(150, 1), "content": string_schema(250, 1)}), 3, 1)})


def model_items(judge: Judge, trajectory: Trajectory, success: bool, limit: int) -> list[dict] | None:
    """The judge model's memory items (None when the reply is unusable)."""
    answer = judge.ask("reasoningbank.extractor", SUCCESS_SYSTEM if success else FAILURE_SYSTEM,
                       f"Goal: {trajectory.goal}\nTrajectory ({trajectory.summary()}):\n{trajectory.text()}", SCHEMA)
    if not answer:
        return None
    items = [{f: " ".join(str(item.get(f, "")).split())[:600] for f in FIELDS}
             for item in answer["memory_items"] if isinstance(item, dict)]
    items = [item for item in items if all(item.values())][:limit]
    return items or None


def retrieve(records: list[dict], goal: str, k: int) -> list[dict]:
    """The `k` memory items most similar to `goal` (BM25 over task, title, description, content), best first."""
    items = [r for r in records if all(isinstance(r.get(f), str) for f in FIELDS)]
    if not items or k <= 0:
        return []
    from playground.host_api import TextIndex

    index = TextIndex([" ".join([str(r.get("query", "")), *(r[f] for f in FIELDS)]) for r in items])
    return [items[position] for position, score in index.search(goal, k) if score > 0]


def render(items: list[dict]) -> str:
    """The retrieved items as a note ("" when none)."""
    if not items:
        return ""
    blocks = [f"# Memory item {n}\n## Title {i['title']}\n## Description {i['description']}\n## Content {i['content']}"
              for n, i in enumerate(items, 1)]
    return "Memory items from earlier tasks, retrieved for this goal (use them where they apply):\n" + "\n".join(blocks)


class ReasoningBankPlugin(MemoryBaseline):
    """ReasoningBank for one episode: retrieved items as a note; new items distilled when it ends."""

    NAME, PARAMS = NAME, ReasoningBankParams
    SUCCESS_PARAM, MEMORY_PARAM = "rb_success", "rb_memory"

    def __init__(self, params: ReasoningBankParams | Mapping[str, Any]) -> None:
        super().__init__(params)
        self.retrieved: list[dict] = []

    def begin(self, start: EpisodeStart) -> None:
        """Retrieve the memory items most similar to the goal into the note."""
        self.memory = memory_for(start, RB_ITEMS, str(self.p["rb_memory"]), "rb_memory")
        self.retrieved = retrieve(self.memory.records() if self.memory else [], start.goal, int(self.p["rb_k"]))
        self.note = render(self.retrieved)

    def learn(self, end: EpisodeEnd) -> None:
        """Distil memory items from the episode, a success or a failure, and add them to the memory."""
        if end.status == "error" or self.memory is None:
            return
        success, judged_by = succeeded(str(self.p["rb_success"]), self.judge, self.trajectory, end)
        limit = int(self.p["rb_items"])
        items = model_items(self.judge, self.trajectory, success, limit) if self.judge.configured else None
        by = "model" if items else "rules"
        items = items or rule_items(self.trajectory, success, limit)
        append_once(self.memory, episode_key(end.ids),
                    [{"task": end.ids.task_id, "query": self.trajectory.goal, **item, "success": success,
                      "success_by": judged_by, "distilled_by": by, "at": time.time()} for item in items])
