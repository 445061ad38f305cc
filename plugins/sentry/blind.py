"""What Sentry's detectors, repairs, verifier and judges may read: what the agent sees, nothing more.

Sentry's promise is that the playbook grows only on recoveries it verified *without*
benchmark rewards or success labels. The hook payloads carry those (`StepContext.score`
and `max_score`, `Turn.reward` and `score`, `StepOutcome.reward`, `score` and `won`,
`EpisodeEnd.won` and `status`, the env's reset info), so the Sentry plugin never hands a
payload on: it copies what the agent sees into the records below and passes only those to
its parts. Some envs also print grades into the observation text the agent reads (score
lines, win and loss banners: `TextEnv.remove_grade_text`); every observation copied here
goes through the env's `remove_grade_text` (`EpisodeStart.remove_grade_text`, given as the
keyword `remove_grade_text`), so a part that wants a score cannot get one, not even from
the text. Whether the task is done is judged from the agent's own stop, never from a banner.

- `BlindView`: the goal, the current observation, the admissible actions, the history
  (actions, thoughts, observations, validity, action kinds; no reward, no score; every
  observation without its grade text), the env's action kinds and open choices (what the
  page shows as still to choose), the action format, and the env's schema problems with
  the proposed action (derived from the action and the env's schema, like the admissible
  list: never from a grade), and whether the admissible list is complete (where it is a
  cut, the env's check is its validity verdict).
- `BlindOutcome`: the view before a step, the action sent (or the stop), and what came
  back: the observation (without its grade text), whether the action was valid, the
  admissible actions after it.
- `blind_proposal`: the proposal's thought, action and finish flag; never the ground truth a
  failure-injection instrument records (`Proposal.injected`, which the loop already removes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable, Mapping

from playground.core.payloads import Proposal, SchemaProblem, StepContext, StepOutcome, Turn

GradeTextRemover = Callable[[str], str]  # an env's `remove_grade_text`


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


def blind_turn(turn: Turn | BlindTurn, *, remove_grade_text: GradeTextRemover | None = None) -> BlindTurn:
    """A turn without its reward and score, its observation without its grade text (`remove_grade_text`, the
    env's; None: the observation as it is). A `BlindTurn` is returned as it is, or with its observation cleaned."""
    if isinstance(turn, BlindTurn):
        if remove_grade_text is None:
            return turn
        return replace(turn, observation=remove_grade_text(turn.observation))
    observation = remove_grade_text(turn.observation) if remove_grade_text is not None else turn.observation
    return BlindTurn(turn.step, turn.thought, turn.action, observation, turn.valid_action, turn.kind)


def blind_view(context: StepContext | BlindView, *, remove_grade_text: GradeTextRemover | None = None) -> BlindView:
    """What the agent sees of a step context, every observation (the current one, the history's) without its
    grade text (`remove_grade_text`, the env's; None: as they are). A `BlindView` is returned as it is, or with
    its observations cleaned."""
    if isinstance(context, BlindView):
        if remove_grade_text is None:
            return context
        return replace(context, observation=remove_grade_text(context.observation),
                       history=tuple(blind_turn(t, remove_grade_text=remove_grade_text) for t in context.history))
    observation = (remove_grade_text(context.observation) if remove_grade_text is not None
                   else context.observation)
    admissible = tuple(context.admissible_actions) if context.admissible_actions is not None else None
    return BlindView(context.step, context.goal, observation, admissible,
                     tuple(blind_turn(t, remove_grade_text=remove_grade_text) for t in context.history),
                     context.attempt, MappingProxyType(dict(context.action_kinds)), tuple(context.open_choices),
                     context.action_format, context.schema_problems, context.admissible_complete)


def blind_proposal(proposal: Proposal) -> Proposal:
    """A proposal reduced to its thought, action and finish flag: no injected ground truth, no prompt."""
    return Proposal(proposal.thought, proposal.action, proposal.finish)


def blind_outcome(outcome: StepOutcome, *, remove_grade_text: GradeTextRemover | None = None) -> BlindOutcome:
    """What the agent sees of a step's outcome, every observation (the outcome's, the view's) without its grade
    text (`remove_grade_text`, the env's; None: as they are)."""
    admissible = tuple(outcome.admissible_actions) if outcome.admissible_actions is not None else None
    observation = (remove_grade_text(outcome.observation) if remove_grade_text is not None
                   else outcome.observation)
    return BlindOutcome(blind_view(outcome.context, remove_grade_text=remove_grade_text), outcome.proposal.thought,
                        outcome.proposal.action, outcome.proposal.finish, observation, outcome.valid_action,
                        admissible)
