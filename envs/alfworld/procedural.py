"""ALFWorld's procedural interventions (DARC's procedure-breadth family) and the guard's top-1 agent.

The counterparts of AppWorld's `local_induction`, `auto_knowledge` and
`retrieval_fallback`, for text commands instead of code cells. Each watches for a
command the env rejected (the last step's `valid_action` is False: "Nothing happens."),
and asks the agent for the next command again with procedural help; it verifies the next
command: `resolved` when the env accepts it, `unresolved` otherwise. No reward is read.

- `alfworld_induction`: a rule induced from this failure alone: the verb is not a command
  here, or these admissible commands are the closest to what was tried. Cheapest.
- `alfworld_knowledge`: the manual: ALFWorld's command forms and the procedure of the
  task's type (parsed from the goal), as auto-knowledge gives the relevant docs.
- `alfworld_retrieval_fallback`: the rule first; if the next command fails again, the
  manual; if it fails a third time, every admissible command as text. Richer context only
  after the cheaper sources fail.

Unlike the action-validity guard they act after the env rejected a command, never on the
proposal itself, and offer no list to choose from (`InterventionMessage.actions` is
empty): they inform, they do not prune.

`GuardTop1Agent` (agent `guard-top1`) plays the guard's best-ranked command every step,
with no model: the forced top-1 row of the ranked-view factorial.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from playground.core.hookspecs import hookimpl
from playground.core.payloads import (
    AgentView,
    Decision,
    Detection,
    EpisodeStart,
    InterventionMessage,
    Proposal,
    StepContext,
    StepOutcome,
    Verification,
    invalid_streak,
)
from playground.envs.alfworld.goals import Goal
from playground.envs.alfworld.guard import TOP_K, Guard, parse_command
from playground.envs.alfworld.params import ProceduralParams

SOURCES = ("alfworld_induction", "alfworld_knowledge", "alfworld_retrieval_fallback")
FAILURE_TYPE = "action_validity"
COMMAND_FORMS = ("go to RECEPTACLE", "open RECEPTACLE", "close RECEPTACLE", "take OBJECT from RECEPTACLE",
                 "move OBJECT to RECEPTACLE", "heat OBJECT with microwave", "cool OBJECT with fridge",
                 "clean OBJECT with sinkbasin", "use LAMP", "examine THING", "look", "inventory")


def induced_rule(action: str, admissible: tuple[str, ...]) -> str:
    """A rule for this rejected command alone (local induction)."""
    verb = parse_command(action).verb
    verbs = sorted({parse_command(a).verb for a in admissible})
    if verb not in verbs:
        return (f"'{verb}' is not a command here. Commands here start with: {', '.join(verbs)}. "
                "Send one command exactly as the env spells it.")
    close = difflib.get_close_matches(action.lower(), [a.lower() for a in admissible], n=3, cutoff=0.3)
    hint = f" The closest valid commands: {'; '.join(close)}." if close else ""
    return f"'{action}' is not possible in this state (wrong object, place or precondition).{hint}"


def task_procedure(goal: Goal) -> str:
    """The procedure of the goal's task type, step by step."""
    target = goal.target or "the object"
    if goal.is_look:
        return (f"Find a {target} (go to places, open closed ones), take it, find a {goal.destination} "
                f"(desks, side tables, dressers), go there and use the {goal.destination}.")
    steps = [f"find a {target} (go to places where it may be, open closed ones)", f"take {target} from where it is"]
    if goal.transform_verb:
        steps += [f"go to the {goal.appliance}", f"{goal.transform_verb} the {target} with the {goal.appliance}"]
    destination = goal.destination or "destination"
    steps += [f"go to a {destination}", f"move the {target} to the {destination}"]
    if goal.task_type == "pick_two_obj_and_place":
        steps.append(f"then do the same for a second {target}")
    return "Procedure: " + "; ".join(f"({i}) {step}" for i, step in enumerate(steps, 1)) + "."


def manual(goal: Goal) -> str:
    """The command forms and the task's procedure (auto knowledge)."""
    return "Command forms: " + "; ".join(COMMAND_FORMS) + ".\n" + task_procedure(goal)


class ProceduralHelp:
    """After a rejected command, ask again with this source's procedural help (see the module docstring)."""

    def __init__(self, source: str, params: ProceduralParams | Mapping[str, Any]) -> None:
        """`params`: a `ProceduralParams` (the host validated it), or a dict validated by it (strictly)."""
        if source not in SOURCES:
            raise ValueError(f"unknown procedural source {source!r}; choose from: {', '.join(SOURCES)}")
        if not isinstance(params, ProceduralParams):
            params = ProceduralParams.model_validate(dict(params), strict=True)
        self.source = source
        self.max_reasks = params.max_reasks_per_step
        self.guard = Guard()
        self.pending: dict[int, str] = {}  # step -> the rejected command the help was about
        self.streak = 0

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Nothing is pending at the start."""
        self.pending.clear()

    @staticmethod
    def _rejected(context: StepContext) -> str | None:
        if not context.history or context.history[-1].valid_action:
            return None
        return context.history[-1].action

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections) -> Decision | None:
        """After a rejected command, ask for the next command again with this source's help."""
        action = self._rejected(context)
        if action is None or context.attempt > 0 or self.max_reasks < 1:
            return None
        self.streak = invalid_streak(context.history)
        text = self.help_text(context, action)
        self.pending[context.step] = action
        detection = Detection(self.source, FAILURE_TYPE, ("invalid_action",), 1.0,
                              f"the env rejected {action!r}", subtype="rejected")
        message = InterventionMessage("soft_repair", f"Your last command {action!r} did nothing.\n{text}",
                                      FAILURE_TYPE, labels=("invalid_action",))
        return Decision(self.source, self.source, message=message, detections=(detection,),
                        details={"chars": len(text), "tier": self._tier()})

    def help_text(self, context: StepContext, action: str) -> str:
        """The help this source gives after `action` was rejected."""
        admissible = tuple(context.admissible_actions or ())
        goal = self.guard.goal(context.goal, admissible)
        if self.source == "alfworld_induction":
            return induced_rule(action, admissible)
        if self.source == "alfworld_knowledge":
            return manual(goal)
        tier = self._tier()
        text = induced_rule(action, admissible)
        if tier >= 2:
            text += "\n" + manual(goal)
        if tier >= 3:
            text += "\nEvery command possible now: " + "; ".join(admissible) + "."
        return text

    def _tier(self) -> int:
        return min(3, max(1, self.streak))

    @hookimpl
    def verify_recovery(self, outcome: StepOutcome) -> Verification | None:
        """Resolved when the command sent after the help is accepted."""
        action = self.pending.pop(outcome.context.step, None)
        if action is None:
            return None
        verdict = "resolved" if outcome.valid_action else "unresolved"
        return Verification(self.source, outcome.context.step, FAILURE_TYPE, verdict,
                            f"after the help for {action!r} the next command was "
                            f"{'accepted' if outcome.valid_action else 'rejected too'}")


class GuardTop1Agent:
    """Plays the guard's best-ranked admissible command every step: no model (the factorial's forced top-1)."""

    def __init__(self, **options: Any) -> None:
        from playground.envs.alfworld.priors import PRIOR_GAMES
        from playground.host_api import parse_options

        self.options = parse_options({"prior_games": PRIOR_GAMES, "top_actions": TOP_K}, options, "guard-top1")
        self._guard: Guard | None = None
        self.first_observation = ""

    @property
    def guard(self) -> Guard:
        """The scorer (priors loaded on first use)."""
        if self._guard is None:
            from playground.envs.alfworld.interventions import cached_priors

            self._guard = Guard(cached_priors(int(self.options["prior_games"])), int(self.options["top_actions"]))
        return self._guard

    def reset(self, task_id: str, seed: int) -> None:
        self.first_observation = ""

    def propose(self, view: AgentView) -> Proposal:
        if not view.admissible_actions:
            raise RuntimeError("agent 'guard-top1' needs an env that lists admissible actions")
        if not view.history:
            self.first_observation = view.observation
        steps = [(t.action, t.observation, t.valid_action) for t in view.history]
        best = self.guard.top(view.goal, view.admissible_actions, steps, view.observation, self.first_observation, k=1)
        return Proposal(thought="The guard's top-ranked command.", action=best[0])
