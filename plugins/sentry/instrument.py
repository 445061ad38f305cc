"""How the failure-injection instrument answers Sentry's judge roles (`register_instrument_judges`).

Each answerer reads the request Sentry's role wrote (`judges.py`) and the instrument's state, and returns the
answer key (`JudgeAnswer`): the reply a right judge gives, a realistic mistake, the truth, and a grader. This
code runs on the instrument's side only: Sentry's decision code never sees the state.

The truth of each role:

- **detector**: the proposal being judged makes an injected progress or grounding failure, with its label. A
  mistake misses it or names a wrong label (half each); on a clean step it is a false alarm with a random label.
- **need check**: intervene exactly when the proposal makes an injected failure; a mistake says the opposite.
- **verifier**: resolved exactly when the repaired proposal made the injected failure the repair names (its
  label), that streak ended since the repair, and no new streak of its label started (as `truth.VerdictTruth`);
  a repair of a proposal that made no failure, or another failure than the one diagnosed, has nothing to verify,
  so "unresolved" is right (a lesson stored from it would be filed under the wrong failure). A mistake says the
  opposite ("resolved" for an unresolved failure, and the reverse).
- **summariser**: the lesson names what resolved the failure: the first action after the repair that was the
  expert's plan (quoted, so an agent reading the lesson can take it); a mistake names the failing action or
  another action the episode took instead. Not graded as right or wrong beyond that choice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from playground.core.instrument import InstrumentState, JudgeAnswer, JudgeRequest, StepRecord
from playground.host_api import default_labels

REPAIR_STEP = re.compile(r"repaired at step (\d+)")
SCREENED = ("progress", "grounding")  # the failure types the detector is asked about (validity is a rule's)


def _labels(schema: Mapping[str, Any]) -> list[str]:
    """The labels the detector's schema allows (in its detection branch, where the schema has two)."""
    for branch in schema.get("anyOf", [schema]):
        if "labels" in branch.get("properties", {}):
            return list(branch["properties"]["labels"]["items"]["enum"])
    return []


def _screened(record: StepRecord | None) -> Mapping[str, Any] | None:
    """The injected progress or grounding failure the step's proposal makes, or None."""
    if record is None or record.injected is None or record.injected.get("failure_type") not in SCREENED:
        return None
    return record.injected


def answer_detection(request: JudgeRequest) -> JudgeAnswer:
    """Sentry's detector: does the proposal show a progress or grounding failure, and which?"""
    labels = _labels(request.schema)
    failure = _screened(request.state.proposal)
    rng = request.rng

    def detection(label: str) -> dict[str, Any]:
        declared = default_labels().get(label)
        failure_type = declared.failure_type if declared is not None else "progress"
        return {"failure": True, "failure_type": failure_type, "labels": [label], "confidence": 0.9,
                "evidence": f"the proposed action shows {label.replace('_', ' ')}"}

    clear = {"failure": False}
    if failure is None:
        return JudgeAnswer(clear, detection(rng.choice(labels)), {"failure": False},
                           lambda reply: not reply["failure"])
    label = str(failure["label"])
    others = [x for x in labels if x != label] or labels
    wrong = clear if rng.random() < 0.5 else detection(rng.choice(others))
    correct = detection(label) if label in labels else clear  # a label the judge cannot name: it sees none
    return JudgeAnswer(correct, wrong, {"failure": True, "label": label},
                       lambda reply: bool(reply["failure"]) and label in reply["labels"])


def answer_need(request: JudgeRequest) -> JudgeAnswer:
    """Sentry's need check: intervene now? Exactly when the proposal makes an injected failure."""
    real = _screened(request.state.proposal) is not None
    why = "the flagged failure is real" if real else "the action follows the task"
    return JudgeAnswer({"intervene": real, "why": why}, {"intervene": not real, "why": why}, {"intervene": real},
                       lambda reply: bool(reply["intervene"]) == real)


def repair_resolved(state: InstrumentState, repair_step: int, diagnosed: str | None = None) -> bool:
    """Whether the failure the repair at `repair_step` was about really was resolved by now: it was an injected
    failure (of the `diagnosed` label, where one is given), its streak is no longer being made at some step since
    (the action sent), and no proposal since (a re-asked one too) started a new streak of its label."""
    repaired = state.repair_at(repair_step)
    failure = repaired.failure if repaired is not None else None
    if failure is None:
        flagged = next((s for s in state.steps if s.step == repair_step), None)
        failure = flagged.injected if flagged is not None else None
    if failure is None or (diagnosed is not None and failure.get("label") != diagnosed):
        return False
    streak, label = failure.get("streak"), failure.get("label")
    since = state.since(repair_step)
    ended = any(s.injected is None or s.injected.get("streak") != streak for s in since)
    recurred = any(p.injected is not None and p.injected.get("label") == label and p.injected.get("streak") != streak
                   for p in state.proposals if p.step > repair_step)
    return ended and not recurred


DIAGNOSED = re.compile(r"Diagnosed failure: (\w+)")


def _repair_step(request: JudgeRequest) -> int:
    found = REPAIR_STEP.search(request.user)
    return int(found.group(1)) if found else request.state.step


def answer_verdict(request: JudgeRequest) -> JudgeAnswer:
    """Sentry's verifier: was the repaired failure resolved?"""
    step = _repair_step(request)
    diagnosed = DIAGNOSED.search(request.user)
    resolved = repair_resolved(request.state, step, diagnosed.group(1) if diagnosed else None)
    evidence = ("the failure stopped and the plan resumed" if resolved else "the failure went on or there was none")
    return JudgeAnswer({"resolved": resolved, "evidence": evidence}, {"resolved": not resolved, "evidence": evidence},
                       {"resolved": resolved, "repair_step": step}, lambda reply: bool(reply["resolved"]) == resolved)


def answer_lesson(request: JudgeRequest) -> JudgeAnswer:
    """Sentry's summariser: a lesson naming what resolved the failure (the first planned action taken after the
    repair); a mistake names the failing action or another one the episode took."""
    state, step = request.state, _repair_step(request)
    since = state.since(step)
    repaired = state.repair_at(step)
    label = ((repaired.failure if repaired is not None else None) or {}).get("label")
    failing = repaired.flagged_action if repaired is not None else ""
    resolving = next((s.action for s in since if s.injected is None and not s.finish and s.action), None)
    others = sorted({s.action for s in state.steps if s.action and s.action != resolving})
    decoy = failing if failing and failing != resolving else None
    decoy = decoy or (request.rng.choice(others) if others else None)
    trigger = f"when {str(label or 'the failure').replace('_', ' ')} shows"

    def lesson(action: str | None) -> dict[str, str]:
        principle = f"What resolved it: '{action}'." if action else "Change course and follow the plan."
        return {"trigger": trigger[:160], "principle": principle[:240]}

    return JudgeAnswer(lesson(resolving), lesson(decoy), {"resolving": resolving},
                       lambda reply: bool(resolving) and f"'{resolving}'" in str(reply.get("principle", "")))
