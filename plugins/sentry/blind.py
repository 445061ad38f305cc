"""What Sentry's detectors, repairs, verifier and judges may read: what the agent sees, nothing more.

Sentry's promise is that the playbook grows only on recoveries it verified *without*
benchmark rewards or success labels. The hook payloads carry those (`StepContext.score`
and `max_score`, `Turn.reward` and `score`, `StepOutcome.reward`, `score` and `won`,
`EpisodeEnd.won` and `status`, the env's reset info), so the Sentry plugin never hands a
payload on: it copies what the agent sees into the records below and passes only those to
its parts. A part that wants a score cannot get one, except where the env prints it in
the observation text, which the agent reads too.

- `BlindView`: the goal, the current observation, the admissible actions, the history
  (actions, thoughts, observations, validity, action kinds; no reward, no score), the
  env's action kinds and open choices (what the page shows as still to choose), the
  action format, and the env's schema problems with the proposed action (derived from the
  action and the env's schema, like the admissible list: never from a grade), and whether the
  admissible list is complete (where it is a cut, the env's check is its validity verdict).
- `BlindOutcome`: the view before a step, the action sent (or the stop), and what came
  back: the observation, whether the action was valid, the admissible actions after it.
- `blind_proposal`: the proposal's thought, action and finish flag; never the ground truth a
  failure-injection instrument records (`Proposal.injected`, which the loop already removes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from playground.core.payloads import Proposal, SchemaProblem, StepContext, StepOutcome, Turn


@dataclass(frozen=True)
class BlindTurn:
    """One finished step as the agent sees it: no reward, no score."""

    step: int
    thought: str
    action: str
    observation: str
    valid_action: bool
    kind: str = ""


@dataclass(frozen=True)
class BlindView:
    """The state before an action, as the agent sees it (see module docstring)."""

    step: int
    goal: str
    observation: str
    admissible_actions: tuple[str, ...] | None
    history: tuple[BlindTurn, ...]
    attempt: int = 0
    action_kinds: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    open_choices: tuple[str, ...] = ()
    action_format: str = "command"
    schema_problems: tuple[SchemaProblem, ...] | None = None  # None where the env has no schema check
    admissible_complete: bool = True  # False where the admissible list is a cut of what the env accepts


@dataclass(frozen=True)
class BlindOutcome:
    """A step's result as the agent sees it: no reward, no score, no `won`, no termination flags."""

    view: BlindView
    thought: str
    action: str
    finish: bool
    observation: str
    valid_action: bool
    admissible_actions: tuple[str, ...] | None

    @property
    def step(self) -> int:
        """The step this outcome finished."""
        return self.view.step


def blind_turn(turn: Turn | BlindTurn) -> BlindTurn:
    """A turn without its reward and score."""
    if isinstance(turn, BlindTurn):
        return turn
    return BlindTurn(turn.step, turn.thought, turn.action, turn.observation, turn.valid_action, turn.kind)


def blind_view(context: StepContext | BlindView) -> BlindView:
    """What the agent sees of a step context (a `BlindView` is returned as it is)."""
    if isinstance(context, BlindView):
        return context
    admissible = tuple(context.admissible_actions) if context.admissible_actions is not None else None
    return BlindView(context.step, context.goal, context.observation, admissible,
                     tuple(blind_turn(t) for t in context.history), context.attempt,
                     MappingProxyType(dict(context.action_kinds)), tuple(context.open_choices), context.action_format,
                     context.schema_problems, context.admissible_complete)


def blind_proposal(proposal: Proposal) -> Proposal:
    """A proposal reduced to its thought, action and finish flag: no injected ground truth, no prompt."""
    return Proposal(proposal.thought, proposal.action, proposal.finish)


def blind_outcome(outcome: StepOutcome) -> BlindOutcome:
    """What the agent sees of a step's outcome."""
    admissible = tuple(outcome.admissible_actions) if outcome.admissible_actions is not None else None
    return BlindOutcome(blind_view(outcome.context), outcome.proposal.thought, outcome.proposal.action,
                        outcome.proposal.finish, outcome.observation, outcome.valid_action, admissible)
