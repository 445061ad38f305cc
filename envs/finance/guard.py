"""`format-guard`: detect format-precision failures, re-ask with the exact format, verify the fix.

One object per episode. The detector checks each proposed answer against the format the
question asks for (`format_check`); a failure is reported as a `format_precision`
Detection with its labels and quoted evidence. The decision re-asks the agent with a
`format_repair` message that says what was wrong and states the exact expected format
(up to `max_reasks_per_step` times; then the answer goes to the env as it is). The
verifier re-checks the format of the answer finally sent after a repair: `resolved` when
it is well-formed, `unresolved` otherwise. Nothing here reads the gold answer, the score
or `won`.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, Detection, InterventionMessage, StepContext, StepOutcome, Verification
from playground.envs.finance.format_check import FAILURE_TYPE, check, expected_format
from playground.envs.finance.params import FormatGuardParams

NAME = "format-guard"


def format_detection(context: str, answer: str) -> Detection | None:
    """Return the format_precision Detection for `answer` to question `context`, or None when well-formed."""
    problems = check(context, answer)
    if not problems:
        return None
    return Detection(NAME, FAILURE_TYPE, tuple(p.label for p in problems), 1.0,
                     evidence="; ".join(p.evidence for p in problems))


def repair_message(context: str, detection: Detection) -> InterventionMessage:
    """The re-ask: what was wrong with the answer, and the exact format expected."""
    text = (f"Your answer is not in the required format ({', '.join(detection.labels)}): {detection.evidence}.\n"
            f"Reply with {expected_format(context).describe()}.")
    return InterventionMessage("format_repair", text, FAILURE_TYPE, labels=detection.labels)


class FormatGuard:
    """Episode plugin: format detector, format re-ask and format verifier (see module docstring)."""

    def __init__(self, params: FormatGuardParams | Mapping[str, Any]) -> None:
        """`params`: a `FormatGuardParams` (the host validated it), or a dict validated by it (strictly)."""
        if not isinstance(params, FormatGuardParams):
            params = FormatGuardParams.model_validate(dict(params), strict=True)
        self.max_reasks = params.max_reasks_per_step
        self.repairs: dict[int, Detection] = {}  # step -> the first detection repaired at that step

    @hookimpl
    def detect_failures(self, context: StepContext, proposal) -> Detection | None:
        """Report the proposed answer's format failures (None when well-formed)."""
        if proposal.finish:
            return None
        return format_detection(context.observation, proposal.action)

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal, detections: list[Detection]) -> Decision | None:
        """Re-ask with the exact expected format while the re-ask budget lasts."""
        mine = [d for d in detections if d.detector == NAME]
        if not mine or context.attempt >= self.max_reasks:
            return None
        self.repairs.setdefault(context.step, mine[0])
        return Decision(NAME, "format_repair", message=repair_message(context.observation, mine[0]),
                        detections=(mine[0],))

    @hookimpl
    def verify_recovery(self, outcome: StepOutcome) -> Verification | None:
        """After a repaired step: resolved if the answer sent is well-formed, else unresolved."""
        detection = self.repairs.pop(outcome.context.step, None)
        if detection is None:
            return None
        still = format_detection(outcome.context.observation, outcome.proposal.action)
        if still is None:
            return Verification(NAME, outcome.context.step, FAILURE_TYPE, "resolved",
                                f"after the re-ask the answer is well-formed (was: {', '.join(detection.labels)})")
        return Verification(NAME, outcome.context.step, FAILURE_TYPE, "unresolved",
                            f"still malformed after the re-ask: {still.evidence}")
