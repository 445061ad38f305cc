"""A runtime monitor: corrective feedback at every step where one of its rules fires; no memory.

Three rules, checked on the agent's first proposal of each step, in this order:

- **invalid**: the env will not accept the proposed action (`env_accepts`): it is not
  admissible (where the env's list is complete) or it fails the env's check;
- **repeat**: the proposed action was already taken, within the last `monitor_window` steps,
  from the same observation, and that brought nothing new;
- **stall**: the last `monitor_stall` steps brought no observation not seen before.

When one fires, the agent is asked again with a short corrective message naming what the
rule saw (the message's labels: `invalid_action`, `repetition_or_looping`, `planning_stall`).
It offers no actions, retrieves nothing and stores nothing: each episode starts blank. It
reads only what the agent sees.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground import Decision, Detection, EpisodeStart, InterventionMessage, Proposal, StepContext, hookimpl
from playground.core.actions import env_accepts
from playground.plugins.baselines.params import MonitorParams, defaults_of, parse_params

NAME = "monitor"
DEFAULTS: dict[str, Any] = defaults_of(MonitorParams)  # declared in params.py: types, ranges, meanings
RULES = {  # rule -> (failure type, label)
    "invalid": ("action_validity", "invalid_action"),
    "repeat": ("progress", "repetition_or_looping"),
    "stall": ("progress", "planning_stall"),
}


def _observations_before(first: str, context: StepContext) -> list[str]:
    """The observation each step of the history was taken from (the one before it)."""
    history = context.history
    return [first if i == 0 else history[i - 1].observation for i in range(len(history))]


def check(context: StepContext, proposal: Proposal, first_observation: str, window: int, stall: int) -> str | None:
    """The rule that fires on this proposal ("invalid", "repeat", "stall"), or None."""
    if proposal.finish:
        return None
    if env_accepts(proposal.action, context.admissible_actions, context.schema_problems,
                   context.admissible_complete) is False:
        return "invalid"
    history = context.history
    before = _observations_before(first_observation, context)
    here, action = context.observation.strip(), " ".join(proposal.action.split()).lower()
    for turn, state in list(zip(history, before))[-window:] if window else []:
        if state.strip() == here and " ".join(turn.action.split()).lower() == action \
                and turn.observation.strip() in {here, *(b.strip() for b in before)}:
            return "repeat"
    if stall and len(history) >= stall:
        seen = {first_observation.strip()}
        fresh = []
        for turn in history:
            fresh.append(turn.observation.strip() not in seen)
            seen.add(turn.observation.strip())
        if not any(fresh[-stall:]):
            return "stall"
    return None


def feedback(rule: str, proposal: Proposal, stall: int) -> str:
    """The corrective message of a rule."""
    if rule == "invalid":
        return (f"Monitor: {proposal.action!r} is not a valid action here. Use one of the admissible actions, "
                "exactly as written.")
    if rule == "repeat":
        return (f"Monitor: you already did {proposal.action!r} in this same situation and it changed nothing. "
                "Do something else that moves the task forward.")
    return (f"Monitor: your last {stall} actions brought nothing new. Change your approach: act on something the "
            "goal names that you have not acted on yet.")


class MonitorPlugin:
    """The monitor for one episode (it keeps only the first observation, to tell what is new)."""

    def __init__(self, params: MonitorParams | Mapping[str, Any]) -> None:
        """`params`: a `MonitorParams` (the host validated it), or a dict validated by it."""
        self.p = parse_params(NAME, MonitorParams, params)
        self.first_observation = ""

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        self.first_observation = start.observation

    @hookimpl
    def detect_failures(self, context: StepContext, proposal: Proposal):
        if context.attempt:
            return None  # feedback once per step: on the agent's first proposal
        rule = check(context, proposal, self.first_observation, int(self.p["monitor_window"]),
                     int(self.p["monitor_stall"]))
        if rule is None:
            return None
        failure_type, label = RULES[rule]
        return Detection(NAME, failure_type, (label,), 1.0, evidence=f"{rule}: {proposal.action!r}", subtype=rule)

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections):
        mine = [d for d in detections if d.detector == NAME]
        if not mine or context.attempt:
            return None
        detection = mine[0]
        text = feedback(detection.subtype, proposal, int(self.p["monitor_stall"]))
        return Decision(NAME, "monitor_feedback", detections=(detection,),
                        message=InterventionMessage("feedback", text, detection.failure_type,
                                                    labels=detection.labels))
