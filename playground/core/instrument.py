"""The failure-injection instrument as the judges' model: what a plugin registers to answer its roles' requests.

A failure-injection instrument (the built-in `noisy` agent) knows, at every step, whether it is failing, with
which label, and which expert action it replaced. With a judge accuracy set it also plays "the agent's model"
for the plugins' model roles (detectors, need checks, verifiers, summarisers, diagnosers): each structured
request a role sends through `ask_structured` reaches the instrument, which answers it from its own state,
correctly with a set probability and with a realistic mistake otherwise.

The plugins stay blind: they send the requests they would send to an LLM and read the replies the same way.
How a role's request is answered is the role's business, so the plugin that owns the role registers an
*answerer* for it (`register_instrument_judges`): a function that reads the request (the role's own prompt, which
it wrote) and the instrument's state (`InstrumentState`, what the instrument did and was told) and returns a
`JudgeAnswer`: the reply a right judge gives, the reply of a realistic mistake, and how to grade any reply
against the truth (so a real model answering the same request can be graded too).

Nothing here reaches a plugin's decision code: the state is handed to answerers only, by the instrument.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# the kinds of judge role an accuracy can be set for (`--agent-option detector_accuracy=...`)
JUDGE_KINDS = ("detector", "need_check", "verifier", "summariser", "diagnoser")


@dataclass(frozen=True)
class StepRecord:
    """One step as the instrument played it: the action it sent last at that step (or a stop), what it had
    planned (the expert's action), and its injected failure (`{"mode", "failure_type", "label", "streak",
    "planned"}`, None on a clean step)."""

    step: int
    action: str
    finish: bool
    planned: str | None
    injected: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RepairRecord:
    """A soft repair the instrument received: the step, the failure the flagged proposal made (None: it was not
    failing) and that proposal's action, whether it heeded the guidance, and the action the guidance named that it
    took, if any."""

    step: int
    failure: Mapping[str, Any] | None
    heeded: bool
    took: str | None = None
    flagged_action: str = ""


@dataclass(frozen=True)
class InstrumentState:
    """What the instrument knows when a role asks: the episode's goal, the proposal being judged (the last one
    it made), the steps it played (the last proposal of each), every proposal it made (re-asked ones too, in
    order), and the soft repairs it received."""

    goal: str
    step: int
    proposal: StepRecord | None
    steps: tuple[StepRecord, ...] = ()
    repairs: tuple[RepairRecord, ...] = ()
    proposals: tuple[StepRecord, ...] = ()

    def repair_at(self, step: int) -> RepairRecord | None:
        """The soft repair received at `step` (the last one there), or None."""
        found = [r for r in self.repairs if r.step == step]
        return found[-1] if found else None

    def since(self, step: int) -> tuple[StepRecord, ...]:
        """The steps played from `step` on."""
        return tuple(s for s in self.steps if s.step >= step)


@dataclass(frozen=True)
class JudgeRequest:
    """One structured request of a role, as a model would get it, plus the instrument's state for the answerer."""

    role: str
    system: str
    user: str
    schema: Mapping[str, Any]
    state: InstrumentState
    rng: random.Random = field(compare=False, repr=False, default_factory=random.Random)


@dataclass(frozen=True)
class JudgeAnswer:
    """A role's answer key for one request: the reply a right judge gives (`correct`), a realistic mistake
    (`wrong`: a wrong label, a missed failure, a false alarm, "resolved" for an unresolved failure), the truth in a
    few fields for the trace (`truth`), and `agrees(reply)`: whether a reply (another model's) is right."""

    correct: Mapping[str, Any]
    wrong: Mapping[str, Any]
    truth: Mapping[str, Any]
    agrees: Callable[[Mapping[str, Any]], bool]


Answerer = Callable[[JudgeRequest], JudgeAnswer]


@dataclass(frozen=True)
class InstrumentJudgeSpec:
    """A registered answerer: the role it answers, the kind of judge it is (`JUDGE_KINDS`), who registered it."""

    role: str
    answer: Answerer
    kind: str
    plugin: str = ""
