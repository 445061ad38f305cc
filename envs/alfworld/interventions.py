"""The guard's interventions: episode plugins DARC can choose among (all for action validity).

- `action_pruning`: DARC's ALFWorld operator, as the paper credits it (Tables 7 and 13): the
  agent sees only the guard's top 12 admissible commands (`view=top`, through the
  `agent_actions` hook) with a recovery prompt for the current phase every step
  (`recovery_prompt=always`). An invalid or unparseable action still gets a hard repair: the
  agent is asked again with the top 12 (`InterventionMessage.actions`) and the phase prompt;
  still invalid after `max_reasks_per_step` re-asks, the `fallback` applies ("best": play the
  top-ranked command; "give_up": stop; "reask": let it through). `view=full` shows the whole
  admissible list (`view=random`: 12 at random, a control); `prune_every_step=true` adds the
  ranked commands as a standing note (a hint). `recovery_prompt` puts the phase prompt every
  step (`always`), only in re-asks (`repair`), or nowhere (`off`); `repair=false` turns the
  repair off (only the view and the prompt act). The harnesses `alfworld-guard` and
  `alfworld-sentry` pin `view=full, recovery_prompt=repair`: the guard as a repair only.
- `type_saturation`: an invalid action, or a valid one that does not fit the parsed
  task type (another transformation, another object, idle commands), gets a re-ask
  restricted to the task-relevant commands (ranked by the guard). A valid action still
  off-task after the re-asks goes through; an invalid one gets the fallback.
- `loop_fallback`: a valid action that repeats itself (tried before from this same
  observation, an A-B-A-B cycle, or three times in the last few steps) is replaced by
  the best-ranked command not yet explored from here.

They are decision plugins: each checks the proposal itself in `decide_intervention`
and attaches its evidence to the `Decision` (no separate detections, so a harness that
combines them with Sentry does not count a failure twice). The harnesses list
`action_pruning` first, so it decides first and under Sentry invalid actions get the
guard's ranked view. The guard
reads only the goal, the observations, the history and the admissible commands.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any, Mapping

from playground.api import declared_values
from playground.core.errors import PlaygroundError
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, Detection, EpisodeStart, InterventionMessage, Proposal, StepContext
from playground.envs.alfworld.goals import Goal
from playground.envs.alfworld.guard import NO_PRIORS, Guard, Priors, relevant_to
from playground.envs.alfworld.params import GuardParams

MAX_ACTION_WORDS = 12
DEFAULTS: dict[str, Any] = GuardParams().model_dump()  # declared in params.py: types, ranges, choices, meanings


class GuardConfigError(PlaygroundError, ValueError):
    """A guard parameter has a bad value."""


def parse_params(params: Mapping[str, Any] | GuardParams) -> dict[str, Any]:
    """The guard's parameters as a dict: a `GuardParams` instance's values as they are (the host validated them),
    else the keys of `params` that `GuardParams` declares (others ignored) validated by it, strictly (as a run
    checks them: a bool is true or false, a whole number is not 2.5 or a string), the defaults filled in.
    GuardConfigError names the parameter, the rule it breaks and the value."""
    return declared_values(GuardParams, params, "guard", GuardConfigError)


@lru_cache(maxsize=4)
def cached_priors(games: int) -> Priors:
    """The train priors from `games` generated train games (estimated once per cache, then read from disk)."""
    if games == 0:
        return NO_PRIORS
    from playground.envs.alfworld.priors import load_priors

    return load_priors(games)


def steps_of(context: StepContext) -> list[tuple[str, str, bool]]:
    """The episode so far as (action, observation, valid) triples."""
    return [(t.action, t.observation, t.valid_action) for t in context.history]


def invalid_reason(context: StepContext, proposal: Proposal) -> tuple[str, str] | None:
    """Return (label, evidence) when the proposal is unparseable or not admissible, else None."""
    if proposal.finish or context.admissible_actions is None:
        return None
    action = " ".join(proposal.action.split())
    if not action or "\n" in proposal.action.strip() or len(action.split()) > MAX_ACTION_WORDS:
        return "unparseable_action", f"unparseable action {proposal.action!r}"
    if action.lower() not in {a.lower() for a in context.admissible_actions}:
        return "invalid_action", f"{action!r} is not among the {len(context.admissible_actions)} admissible commands"
    return None


PHASE_PROMPTS = {
    "search": "You are looking for {a} {target}. Go to a place you have not checked yet, or open a closed one here.",
    "take": "{A} {target} is right here: take it.",
    "transform": "You hold the {held}. It must be {verb}ed with the {appliance} "
                 "before you put it in the {destination}.",
    "place": "You hold the {held}, ready to go: bring it to the {destination} and put it there.",
    "light": "You hold the {held}: go to the {destination} and use it.",
    "clear": "You are holding the {held}, which the task does not need: put it down first.",
}


def phase_prompt(goal: Goal, phase: str, held: str) -> str:
    """The recovery prompt for the current phase of the task."""
    return PHASE_PROMPTS[phase].format(a="a", A="A", target=goal.target or "target object", held=held or "object",
                                       verb=goal.transform_verb, appliance=goal.appliance,
                                       destination=goal.destination)


class _GuardPlugin:
    """What the three interventions share: parameters, the guard, ranking a step."""

    name = ""

    def __init__(self, params: GuardParams | Mapping[str, Any]) -> None:
        """`params`: a `GuardParams` (the host validated it), or a dict validated by it (`parse_params`)."""
        self.p = parse_params(params)
        self._guard: Guard | None = None
        self.first_observation = ""

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Remember the observation after reset (the state before the first action)."""
        self.first_observation = start.observation

    @property
    def guard(self) -> Guard:
        """The scorer (priors are loaded on first use, not when the harness is checked)."""
        if self._guard is None:
            self._guard = Guard(cached_priors(int(self.p["prior_games"])), int(self.p["top_actions"]))
        return self._guard

    def ranked(self, context: StepContext, keep=lambda action: True) -> list[str]:
        """The admissible commands the filter keeps, best first."""
        scored = self.guard.score(context.goal, context.admissible_actions or (), steps_of(context),
                                  context.observation, self.first_observation)
        return [s.action for s in scored if keep(s.action)]

    def message(self, context: StepContext, evidence: str, label: str, actions: list[str],
                intro: str = "") -> InterventionMessage:
        """A hard-repair message: why, the phase prompt, and the offered commands."""
        lines = [f"{intro or 'Your action was rejected'}: {evidence}."]
        if self.p["recovery_prompt"] != "off":
            lines.append(self.prompt(context))
        lines += ["Choose exactly one of these commands, most promising first:", *(f"- {a}" for a in actions)]
        return InterventionMessage("hard_repair", "\n".join(lines), "action_validity", tuple(actions), (label,))

    def prompt(self, context: StepContext) -> str:
        """The recovery prompt for the current phase of the task."""
        goal, track, phase = self.guard.state(context.goal, context.admissible_actions or (), steps_of(context))
        return phase_prompt(goal, phase, track.holding)

    def fallback(self, detection: Detection, ranked: list[str]) -> Decision | None:
        """What happens when the re-asks are used up and the action is still invalid."""
        if self.p["fallback"] == "best" and ranked:
            return Decision(self.name, "hard_repair_fallback", action=ranked[0], detections=(detection,))
        if self.p["fallback"] == "give_up":
            return Decision(self.name, "give_up", stop=True, detections=(detection,))
        return None


class ActionPruning(_GuardPlugin):
    """Hard repair of invalid actions with the guard's top-12 view (see module docstring)."""

    name = "action_pruning"

    @hookimpl
    def agent_notes(self, context: StepContext):
        """Standing notes: the phase prompt (`recovery_prompt=always`) and the ranked hint (`prune_every_step`)."""
        if not context.admissible_actions:
            return None
        notes = []
        if self.p["recovery_prompt"] == "always":
            notes.append(self.prompt(context))
        if self.p["prune_every_step"]:
            top = self.ranked(context)[: int(self.p["top_actions"])]
            notes.append("Most promising commands now:\n" + "\n".join(f"- {a}" for a in top))
        return notes or None

    @hookimpl
    def agent_actions(self, context: StepContext):
        """`view=top`: the agent sees only the guard's top commands; `view=random`: as many at random (a control)."""
        if self.p["view"] == "full" or not context.admissible_actions:
            return None
        k = int(self.p["top_actions"])
        if self.p["view"] == "top":
            return tuple(self.ranked(context)[:k])
        rng = random.Random(f"random-view:{context.ids.task_id}:{context.step}")
        pool = sorted(context.admissible_actions)
        return tuple(sorted(rng.sample(pool, min(k, len(pool)))))

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections):
        """Invalid action: re-ask with the top commands; after the re-asks, the fallback."""
        reason = invalid_reason(context, proposal) if self.p["repair"] else None
        if reason is None:
            return None
        label, evidence = reason
        detection = Detection(self.name, "action_validity", (label,), 1.0, evidence,
                              subtype="unparseable" if label == "unparseable_action" else "not_admissible")
        ranked = self.ranked(context)[: int(self.p["top_actions"])]
        if context.attempt >= int(self.p["max_reasks_per_step"]):
            return self.fallback(detection, ranked)
        return Decision(self.name, "hard_repair", message=self.message(context, evidence, label, ranked),
                        detections=(detection,))


class TypeSaturation(_GuardPlugin):
    """Re-ask with only the task-relevant commands (see module docstring)."""

    name = "type_saturation"

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections):
        """Invalid or off-task action: re-ask with the task-relevant commands only."""
        if proposal.finish or not context.admissible_actions:
            return None
        goal, track, _ = self.guard.state(context.goal, context.admissible_actions, steps_of(context))
        reason = invalid_reason(context, proposal)
        if reason is None and relevant_to(goal, proposal.action, track.holding):
            return None
        relevant = self.ranked(context, lambda a: relevant_to(goal, a, track.holding))[: int(self.p["top_actions"])]
        if reason is None:
            label, evidence = "off_task_action", (f"{proposal.action!r} does not serve the task "
                                                  f"({goal.task_type.replace('_', ' ')} "
                                                  f"with {goal.target or 'its object'})")
        else:
            label, evidence = reason
        detection = Detection(self.name, "action_validity", (label,), 0.8 if reason is None else 1.0, evidence,
                              subtype="off_task" if reason is None else "not_admissible")
        if not relevant:
            return None
        if context.attempt >= int(self.p["max_reasks_per_step"]):
            return None if reason is None else self.fallback(detection, relevant)
        intro = "That command does not fit this task" if reason is None else ""
        return Decision(self.name, "type_saturation", message=self.message(context, evidence, label, relevant, intro),
                        detections=(detection,))


class LoopFallback(_GuardPlugin):
    """Replace a looping action by the best-ranked unexplored command (see module docstring)."""

    name = "loop_fallback"

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections):
        """Looping action: replace it with the best-ranked unexplored command."""
        if proposal.finish or invalid_reason(context, proposal) is not None:
            return None
        evidence = self.loop_evidence(context, proposal.action)
        if evidence is None:
            return None
        tried = self.tried_here(context) | {proposal.action.lower()}
        recent = {t.action.lower() for t in context.history[-int(self.p["loop_window"]):]}
        fresh = self.ranked(context, lambda a: a.lower() not in tried and a.lower() not in recent)
        if not fresh:
            return None
        detection = Detection(self.name, "action_validity", ("repetition_or_looping",), 0.9, evidence, subtype="loop")
        return Decision(self.name, "loop_fallback", action=fresh[0], detections=(detection,),
                        details={"replaced": proposal.action})

    def tried_here(self, context: StepContext) -> set[str]:
        """Actions already tried from the current observation."""
        history = context.history
        before = [history[i - 1].observation if i > 0 else self.first_observation for i in range(len(history))]
        return {t.action.lower() for t, obs in zip(history, before) if obs == context.observation}

    def loop_evidence(self, context: StepContext, action: str) -> str | None:
        """Why the action is a loop, or None if it is not one."""
        action = action.lower()
        window = [t.action.lower() for t in context.history[-int(self.p["loop_window"]):]]
        if action in self.tried_here(context):
            return f"{action!r} was already tried from this same situation"
        if len(window) >= 3 and action == window[-2] and window[-1] == window[-3] != action:
            return f"{action!r} continues an A-B-A-B cycle ({window[-3]!r}, {window[-2]!r}, {window[-1]!r})"
        if window[-3:].count(action) >= 2:
            return f"{action!r} was done {window[-3:].count(action)} times in the last 3 steps"
        return None
