"""Deployment verifiers a DARC cascade can stop on instead of the benchmark's grade (`env:won`).

A deployed agent has no grade. These decide from what the agent saw (`AttemptView`: goal, actions,
observations without the env's grade text, whether it declared itself done):

- `agent:done`: the attempt passes when the agent itself declared the task done (its own stop).
- `agent:self-check`: the agent's own model is asked, in a schema-checked reply, whether the attempt
  accomplished the goal; an unusable reply, or no model to ask (a scripted agent), is a failed check.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground.core.payloads import AttemptVerdict, AttemptView
from playground.host_api import ask_structured, shared_agent_model

SELF_CHECK_ROLE = "self_check"
SELF_CHECK_SCHEMA = {
    "type": "object",
    "properties": {"done": {"type": "boolean"}, "why": {"type": "string", "maxLength": 300}},
    "required": ["done", "why"],
    "additionalProperties": False,
}
SELF_CHECK_SYSTEM = ("You check an agent's attempt at a task. From the goal and the steps it took, decide whether "
                     "the attempt accomplished the goal. Answer with one JSON object.")
TAIL_STEPS = 12  # the steps shown to the self-check: the last ones, where the outcome is


def agent_done(params: Mapping[str, Any]):
    """`agent:done`: passed when the agent's last proposal declared the task done."""

    def verify(view: AttemptView) -> AttemptVerdict:
        return AttemptVerdict(view.agent_finished, "the agent declared the task done" if view.agent_finished
                              else "the agent did not declare the task done")

    return verify


def attempt_text(view: AttemptView) -> str:
    """The goal and the attempt's last steps (action and the observation's first line), as the self-check reads."""
    shown = view.steps[-TAIL_STEPS:]
    skipped = len(view.steps) - len(shown)
    lines = [f"Goal: {view.goal}", f"Steps taken: {len(view.steps)} of at most {view.max_steps}"
             + (f" (the first {skipped} not shown)" if skipped else "")]
    for number, step in enumerate(shown, start=skipped + 1):
        first = step.observation.strip().splitlines()[0][:200] if step.observation.strip() else ""
        lines.append(f"{number}. {step.action} -> {first}" + ("" if step.valid_action else " (not accepted)"))
    lines.append("The agent " + ("declared the task done." if view.agent_finished else "did not declare it done."))
    return "\n".join(lines)


def agent_self_check(params: Mapping[str, Any]):
    """`agent:self-check`: the agent's own model judges whether the attempt accomplished the goal."""

    def verify(view: AttemptView) -> AttemptVerdict:
        model = shared_agent_model()
        if model is None:
            return AttemptVerdict(False, "no model to ask: agent:self-check needs a model agent (--agent local or llm)")
        reply = ask_structured(model, SELF_CHECK_ROLE, SELF_CHECK_SYSTEM, attempt_text(view), SELF_CHECK_SCHEMA)
        if reply.value is None:
            return AttemptVerdict(False, f"unusable self-check reply: {reply.error}")
        return AttemptVerdict(bool(reply.value["done"]), str(reply.value["why"]))

    return verify
