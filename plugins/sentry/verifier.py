"""Sentry's recovery verifier: did the diagnosed failure stop and grounded progress resume?

After a soft repair the verifier watches the next H cycles. It never reads the task
reward, `won`, or any success label: only the actions, observations, visible score and
later detections. A repair is *resolved* once the failure's labels have not been
detected again for `quiet_steps` steps and progress has resumed (a valid action that
changes the world and brings an observation not seen before in the episode, or a higher
visible score); *unresolved* when the pattern recurs or H cycles pass without that.
Repairs still pending when the episode ends get no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.core.payloads import Detection, StepOutcome

from playground.plugins.sentry.detectors import action_kind


@dataclass
class Watch:
    """One soft repair being watched."""

    repair_step: int
    detection: Detection
    lesson_ids: tuple[int, ...]
    start_score: float | None
    cycles: int = 0
    quiet: int = 0
    progress_action: str | None = None
    recurred_at: int | None = None


@dataclass
class Verdict:
    """The verifier's decision on one watched repair."""

    watch: Watch
    resolved: bool
    evidence: str


@dataclass
class RecoveryVerifier:
    """Watches soft repairs over the next `horizon` cycles (see module docstring)."""

    horizon: int = 10
    quiet_steps: int = 3
    watches: list[Watch] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def start_episode(self, first_observation: str) -> None:
        """Remember the first observation as already seen."""
        self.seen = {first_observation.strip()}
        self.watches = []

    def watch(self, step: int, detection: Detection, lesson_ids: tuple[int, ...], score: float | None) -> None:
        """Start watching a soft repair made at `step` for `detection`."""
        self.watches.append(Watch(step, detection, lesson_ids, score))

    def note_detections(self, step: int, detections: list[Detection]) -> None:
        """Mark watched repairs whose failure labels were detected again at a later step."""
        for w in self.watches:
            if step > w.repair_step and any(set(d.labels) & set(w.detection.labels) for d in detections):
                w.recurred_at = step if w.recurred_at is None else w.recurred_at

    def observe(self, outcome: StepOutcome) -> list[Verdict]:
        """Update every watch with the latest step; return the verdicts reached now."""
        observation = outcome.observation.strip()
        new_information = observation not in self.seen
        self.seen.add(observation)
        action = outcome.proposal.action
        changed_world = (outcome.valid_action and not outcome.proposal.finish
                         and action_kind(action, outcome.context.action_kinds) != "look")
        verdicts, still_open = [], []
        for w in self.watches:
            if outcome.context.step < w.repair_step:
                still_open.append(w)
                continue
            w.cycles += 1
            score_rose = outcome.score is not None and w.start_score is not None and outcome.score > w.start_score
            if w.progress_action is None and ((changed_world and new_information) or score_rose):
                w.progress_action = action
            w.quiet = 0 if w.recurred_at is not None else w.quiet + 1
            if w.recurred_at is not None:
                verdicts.append(Verdict(w, False, f"{'/'.join(w.detection.labels)} detected again at step {w.recurred_at}"))
            elif w.quiet >= self.quiet_steps and w.progress_action is not None:
                verdicts.append(Verdict(w, True, f"no {'/'.join(w.detection.labels)} for {w.quiet} steps; "
                                                  f"progress resumed with {w.progress_action!r}"))
            elif w.cycles >= self.horizon:
                verdicts.append(Verdict(w, False, f"no grounded progress within {self.horizon} cycles"))
            else:
                still_open.append(w)
        self.watches = still_open
        return verdicts
