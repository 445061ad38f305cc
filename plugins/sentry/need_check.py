"""Sentry's intervention-need check with rules: is a detection strong enough to interrupt the agent?

A detector's confidence is a prior for how often its rule is right. The need check turns
it into a need score from the evidence the episode holds, so that the threshold
(`threshold`, default 0.6) filters detections instead of passing every one:

- a first sighting of a failure costs `FIRST_SIGHTING` (0.2): one weak signal (a single
  repeat, one off-goal action, one unseen word) is not yet worth an interruption;
- each earlier detection of the same failure type and label within the last W steps adds
  `PER_RECURRENCE` (0.1): a failure that persists is worth one;
- a proposal that ends the episode (a stop) keeps its full confidence: stopping cannot be
  undone, so the need is never discounted.

With an LLM need check (`need_judge=llm`, the default for model agents) the model's
judgment decides instead, and this score is used only when its reply is unusable.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from playground.core.payloads import Detection

FIRST_SIGHTING = 0.2
PER_RECURRENCE = 0.1


def need_score(detection: Detection, recurrences: int, stopping: bool) -> float:
    """The need to intervene on `detection`, given how often its failure was detected in the last W steps."""
    if stopping:
        return detection.confidence
    return max(0.0, min(1.0, detection.confidence - FIRST_SIGHTING + PER_RECURRENCE * recurrences))


@dataclass
class DetectionMemory:
    """The (step, failure type, label) of Sentry's detections on first proposals, over the last `window` steps."""

    window: int = 5
    seen: deque = field(default_factory=deque)

    def recurrences(self, step: int, detection: Detection) -> int:
        """How many earlier steps in the window detected this failure type with one of its labels."""
        labels = set(detection.labels)
        steps = {s for s, failure_type, label in self.seen
                 if s < step and step - s <= self.window and failure_type == detection.failure_type and label in labels}
        return len(steps)

    def note(self, step: int, detections: list[Detection]) -> None:
        """Remember this step's detections (call once per step, on its first proposal)."""
        for detection in detections:
            for label in detection.labels or ("",):
                self.seen.append((step, detection.failure_type, label))
        while self.seen and step - self.seen[0][0] > self.window:
            self.seen.popleft()
