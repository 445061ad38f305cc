"""Frozen records passed to and returned from the runtime hooks.

Every payload is a frozen dataclass whose mappings are read-only all the way down
(`freeze`), so a plugin cannot change what other plugins see, and new fields can be
added later (with defaults) without breaking existing plugins. `to_dict()` gives the
JSON form written into traces.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from playground.core.errors import PlaygroundError


def freeze(value: Any) -> Any:
    """A read-only copy of `value`: mappings become read-only mappings, lists and sets tuples, recursively."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(freeze(item) for item in value))
    return value


def thaw(value: Any) -> Any:
    """The plain JSON-ready form of a frozen value or payload (read-only mappings become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: thaw(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(thaw(item) for item in value)
    return value


def to_dict(record: Any) -> dict:
    """Return the JSON-ready form of a payload (read-only mappings become dicts)."""
    return thaw(record)


def _freeze_fields(record: Any, *names: str) -> None:
    """Replace the named fields of a frozen dataclass by frozen copies (for `__post_init__`)."""
    for name in names:
        object.__setattr__(record, name, freeze(getattr(record, name)))


def keep_text(text: str) -> str:
    """The identity on text: `EpisodeStart.remove_grade_text` of an env that prints no grade text."""
    return text


class PayloadError(PlaygroundError, ValueError):
    """A hook payload was built with values that contradict each other."""


@dataclass(frozen=True)
class EpisodeIds:
    """Which episode a payload belongs to: the same record in every runtime-hook payload of an episode."""

    run_id: str
    episode_id: str
    env: str
    task_id: str
    harness: str
    task_set: str = ""
    attempt: int = 1  # which attempt of a cascade harness this is (1 without a cascade); not StepContext.attempt


@dataclass(frozen=True)
class Turn:
    """One finished step of an episode, as the agent and the plugins see it afterwards."""

    step: int
    thought: str
    action: str
    observation: str
    valid_action: bool
    reward: float = 0.0
    score: float | None = None
    kind: str = ""  # the env's kind for the action ("look", "move", "finish", ...), where it gives kinds
    failure: Mapping[str, Any] | None = None  # the observable failure the env reported (see EnvInfo "failure")

    def __post_init__(self) -> None:
        _freeze_fields(self, "failure")


def invalid_streak(history: tuple[Turn, ...]) -> int:
    """How many of the last turns in a row the env rejected (0 when the last action was valid)."""
    streak = 0
    for turn in reversed(history):
        if turn.valid_action:
            break
        streak += 1
    return streak


SCHEMA_PROBLEM_KINDS = ("syntax_error", "unknown_api", "unknown_argument", "missing_argument", "bad_argument")


@dataclass(frozen=True)
class SchemaProblem:
    """One way a proposed action breaks the env's action schema, found before it runs (`TextEnv.check_action`).

    Derived from the action and the schema alone (never from a grade). `kind` is one of
    `SCHEMA_PROBLEM_KINDS`: "syntax_error" (the action does not parse), "unknown_api" (it
    names a tool, app or API the env does not have), "unknown_argument" (an argument the
    call does not take), "missing_argument" (a required argument left out), "bad_argument"
    (an argument given in a way the call does not take, e.g. by position where only
    keywords are taken). `text` is the offending part of the action, `message` says what
    is wrong in words, `alternatives` are the closest valid names, best first, and
    `signatures` the full signatures of the closest valid calls (one line each). `line` and
    `col` (1-based) say where, when the env knows.
    """

    kind: str
    text: str
    message: str
    alternatives: tuple[str, ...] = ()
    signatures: tuple[str, ...] = ()
    line: int | None = None
    col: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCHEMA_PROBLEM_KINDS:
            raise PayloadError(f"unknown schema problem kind {self.kind!r}; choose from: "
                               f"{', '.join(SCHEMA_PROBLEM_KINDS)}")
        _freeze_fields(self, "alternatives", "signatures")


@dataclass(frozen=True)
class InterventionMessage:
    """What an intervention shows the agent when it asks it to propose again.

    `kind` is e.g. "hard_repair" or "soft_repair"; `actions` is an optional ranked list
    of actions offered (hard repair); `labels` are the failure labels of the lessons
    included, so simple agents can react to them without parsing `text`. `restrict`
    False (the default): the offered actions are suggestions, and the agent still chooses
    from its own action space (a constrained decoder keeps decoding over the env's
    admissible actions); True: the agent must choose one of `actions` (a shortlist the
    intervention picked, e.g. a harness's shortlist variant).
    """

    kind: str
    text: str
    failure_type: str = ""
    actions: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    restrict: bool = False


@dataclass(frozen=True)
class AgentView:
    """Everything an agent may read when it proposes its next action."""

    goal: str
    observation: str
    history: tuple[Turn, ...]
    admissible_actions: tuple[str, ...] | None
    step: int
    message: InterventionMessage | None = None
    notes: tuple[str, ...] = ()  # standing text from `agent_notes` plugins
    # Env extras for non-LLM agents only (e.g. "expert_plan"); never put into a prompt.
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze_fields(self, "extras")


@dataclass(frozen=True)
class Proposal:
    """An agent's proposal: a thought and an action, or a declaration that it is done."""

    thought: str
    action: str
    finish: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # The chat messages ({"role", "content"}) a model was shown, for agents that prompt one; traces keep
    # each distinct text once per episode (event `prompt`) and the proposal refers to it by hash.
    prompt: tuple[Mapping[str, str], ...] = ()
    # Ground truth from a failure-injection instrument (e.g. {"mode", "failure_type", "label", "streak"} for the
    # failure this proposal makes), for measurement only: the loop writes it into the trace's proposal event and
    # removes it before any plugin sees the proposal, so no detector can read it.
    injected: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _freeze_fields(self, "prompt", "injected")


@dataclass(frozen=True)
class StepContext:
    """The state of an episode just before an action is sent to the env."""

    ids: EpisodeIds
    step: int
    goal: str
    observation: str
    admissible_actions: tuple[str, ...] | None
    history: tuple[Turn, ...]
    score: float | None = None
    max_score: float | None = None
    attempt: int = 0  # 0 for the first proposal of a step, then 1, 2, ... after each re-ask
    # from the env's info, where it gives them (see playground.core.env)
    action_kinds: Mapping[str, str] = field(default_factory=dict)
    open_choices: tuple[str, ...] = ()
    action_format: str = "command"  # "code" where an action is a program (a code cell)
    # the steps of the current branch that have a checkpoint a `Decision(rollback_to=...)` may name
    checkpoints: tuple[int, ...] = ()
    # the env's check of the proposal being decided on against its action schema (`TextEnv.check_action`):
    # () when it passes, None where the env has no schema check (or the proposal finishes the episode)
    schema_problems: tuple[SchemaProblem, ...] | None = None
    # False where `admissible_actions` is a cut of what the env accepts: validity is then the env's check
    # (`schema_problems`), not membership in the list (`playground.core.actions.env_accepts`)
    admissible_complete: bool = True

    def __post_init__(self) -> None:
        _freeze_fields(self, "action_kinds")


@dataclass(frozen=True)
class Detection:
    """A failure a detector sees in the proposed action or the recent window."""

    detector: str
    failure_type: str
    labels: tuple[str, ...] = ()
    confidence: float = 1.0
    evidence: str = ""
    subtype: str = ""


# The effects a Decision may have, each named by the field that sets it (see `Decision`).
EFFECTS = ("reask", "replace", "rollback", "stop")


@dataclass(frozen=True)
class Decision:
    """What a decision plugin wants done with a proposal: exactly one effect.

    - `message` set: show it to the agent and ask for a new proposal (effect "reask").
    - `action` set: replace the proposed action with this one ("replace").
    - `rollback_to` set: restore the env checkpoint taken before that step on the current
      branch (see the `want_checkpoint` hook and `StepContext.checkpoints`), rewind the
      step counter and history to it, then ask the agent again from there ("rollback").
    - `stop` set: end the episode now, the harness gives up ("stop").
    Setting none or several of them raises `PayloadError` on construction. `kind` names
    the intervention for counting ("hard_repair", "soft_repair", ...).
    """

    plugin: str
    kind: str
    message: InterventionMessage | None = None
    action: str | None = None
    stop: bool = False
    rollback_to: int | None = None
    detections: tuple[Detection, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        effects = [name for name, on in (("reask", self.message is not None), ("replace", self.action is not None),
                                         ("rollback", self.rollback_to is not None), ("stop", bool(self.stop))) if on]
        if len(effects) != 1:
            raise PayloadError(f"Decision from plugin {self.plugin!r} ({self.kind!r}) must have exactly one effect "
                               f"(message, action, rollback_to or stop); got {', '.join(effects) or 'none'}")
        _freeze_fields(self, "details")

    @property
    def effect(self) -> str:
        """The one effect: "reask", "replace", "rollback" or "stop"."""
        if self.message is not None:
            return "reask"
        if self.action is not None:
            return "replace"
        return "rollback" if self.rollback_to is not None else "stop"


@dataclass(frozen=True)
class StepOutcome:
    """An action's result: the context before it, the proposal sent and what the env returned."""

    context: StepContext
    proposal: Proposal
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    valid_action: bool
    won: bool
    score: float | None
    admissible_actions: tuple[str, ...] | None
    # an observable failure at this action boundary ({"kind", "message", ...}, see EnvInfo "failure"), else None
    failure: Mapping[str, Any] | None = None
    # the structure the env declared at this step (see EnvInfo "structure"), else None
    structure: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _freeze_fields(self, "failure", "structure")


@dataclass(frozen=True)
class Verification:
    """A verifier's verdict on an earlier repair ("resolved" or "unresolved").

    `lesson` is the lesson stored because of this verdict, if any, so the trace shows
    where every lesson comes from.
    """

    plugin: str
    repair_step: int
    failure_type: str
    verdict: str
    evidence: str = ""
    lesson: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _freeze_fields(self, "lesson")


@dataclass(frozen=True)
class EpisodeStart:
    """Sent once after reset, before the first proposal."""

    ids: EpisodeIds
    agent: str
    seed: int
    goal: str
    observation: str
    max_steps: int
    playbook: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # The env's reset info, read-only: env-specific facts a plugin may need (e.g. an API's documentation).
    env_info: Mapping[str, Any] = field(default_factory=dict)
    # The env's `remove_grade_text` (`TextEnv.remove_grade_text`): an observation without the grade text the env
    # prints in it (score lines, win/loss banners). Whatever judges a step or a recovery reads observations only
    # through it; `keep_text` (the identity) for an env that prints none. Not written to traces.
    remove_grade_text: Callable[[str], str] = keep_text

    def __post_init__(self) -> None:
        _freeze_fields(self, "params", "env_info")


@dataclass(frozen=True)
class EpisodeEnd:
    """Sent once when an episode ends, whatever the reason."""

    ids: EpisodeIds
    status: str  # "won", "lost", "stopped", "truncated", "error"
    steps: int
    won: bool
    error: str | None = None


@dataclass(frozen=True)
class AttemptStep:
    """One step of a finished attempt as the agent saw it: its action and the env's answer (grade text removed)."""

    action: str
    observation: str
    valid_action: bool = True


@dataclass(frozen=True)
class AttemptView:
    """A finished attempt of a cascade as a deployment verifier sees it: what the agent saw, never a grade.

    The goal, each step's action and observation (with the grade text the env prints removed), whether the agent
    itself declared the task done, and the step budget. No reward, score, `won` or status.
    """

    ids: EpisodeIds
    goal: str
    steps: tuple[AttemptStep, ...]
    agent_finished: bool
    max_steps: int


@dataclass(frozen=True)
class AttemptVerdict:
    """A deployment verifier's decision on an attempt: `passed` stops the cascade; `why` is written to the trace."""

    passed: bool
    why: str = ""
