"""Sentry's recovery verifier: did the diagnosed failure stop, and did grounded, task-relevant progress resume?

The verifier reads `BlindOutcome`s (`plugins/sentry/blind.py`): actions, observations,
validity and the admissible actions. It never sees the reward, the score, `max_score`,
`won` or any other grade. After a soft repair it watches the next `horizon` (H) cycles.

- **Recurrence**: the failure's labels detected again (by Sentry) at a later step.
- **Grounded progress**: a valid action of a kind that changes the world (not "look",
  not a stop) whose observation was not seen before in the episode.
- **Task-relevant progress**: grounded progress tied to the goal's entities (the goal's
  words that actions name as objects): the action names one, or its new observation
  mentions one.

Admission modes (`admission`):

- `window` (default, as in the paper): the verdict waits for the window to close. After H
  cycles, a repair is *resolved* when the failure did not recur and grounded, task-relevant
  progress happened; *unresolved* otherwise. A recurrence makes it unresolved at once.
  An episode that ends inside the window is judged on what was seen (`finish`).
- `early` (the rule before the window): *resolved* as soon as the failure has not recurred
  for `quiet_steps` steps and grounded progress resumed (relevance not required);
  *unresolved* on recurrence or after H cycles; repairs still open at the end get no verdict.
- `none` (the no-verification ablation): every repair gets the verdict `unverified` after
  one cycle, recording the next action as what worked, so a lesson is written from every repair.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.core.payloads import Detection
from playground.plugins.sentry.blind import BlindOutcome
from playground.plugins.sentry.detectors import action_kind, object_words, words

ADMISSIONS = ("window", "early", "none")


@dataclass
class Watch:
    """One soft repair being watched."""

    repair_step: int
    detection: Detection
    lesson_ids: tuple[int, ...]
    failing_action: str | None = None
    cycles: int = 0
    quiet: int = 0
    progress_action: str | None = None  # the first grounded progress
    relevant_action: str | None = None  # the first grounded progress tied to the goal's entities
    recurred_at: int | None = None
    progress_cycle: int = 0  # the cycle of the progress a lesson reports (the relevant one, where there is one)


@dataclass
class Verdict:
    """The verifier's decision on one watched repair: `resolved` True, False, or None (not verified)."""

    watch: Watch
    resolved: bool | None
    evidence: str

    @property
    def name(self) -> str:
        """"resolved", "unresolved" or "unverified"."""
        return "unverified" if self.resolved is None else "resolved" if self.resolved else "unresolved"


@dataclass
class RecoveryVerifier:
    """Watches soft repairs over the next `horizon` cycles (see module docstring)."""

    horizon: int = 10
    quiet_steps: int = 3
    admission: str = "window"
    watches: list[Watch] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    goal: set[str] = field(default_factory=set)
    objects: set[str] = field(default_factory=set)  # words actions on offer or taken name as objects

    def __post_init__(self) -> None:
        if self.admission not in ADMISSIONS:
            raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}, got {self.admission!r}")

    def start_episode(self, first_observation: str, goal: str = "") -> None:
        """Remember the first observation as already seen, and the goal's words."""
        self.seen = {first_observation.strip()}
        self.goal = set(words(goal))
        self.objects = set()
        self.watches = []

    def watch(self, step: int, detection: Detection, lesson_ids: tuple[int, ...],
              failing_action: str | None = None) -> None:
        """Start watching a soft repair made at `step` for `detection`."""
        self.watches.append(Watch(step, detection, lesson_ids, failing_action))

    def note_detections(self, step: int, detections: list[Detection]) -> None:
        """Mark watched repairs whose failure labels were detected again at a later step."""
        for w in self.watches:
            if step > w.repair_step and any(set(d.labels) & set(w.detection.labels) for d in detections):
                w.recurred_at = step if w.recurred_at is None else w.recurred_at

    def entities(self) -> set[str]:
        """The goal's entities seen so far (all goal words when no action was ever listed)."""
        return self.goal & self.objects if self.objects else set(self.goal)

    def observe(self, outcome: BlindOutcome) -> list[Verdict]:
        """Update every watch with the latest step; return the verdicts reached now."""
        for action in (*(outcome.view.admissible_actions or ()), *(outcome.admissible_actions or ()), outcome.action):
            self.objects |= object_words(action)
        observation = outcome.observation.strip()
        new_information = observation not in self.seen
        self.seen.add(observation)
        action = outcome.action
        grounded = (outcome.valid_action and not outcome.finish and new_information
                    and action_kind(action, outcome.view.action_kinds) != "look")
        entities = self.entities()
        relevant = grounded and bool((object_words(action) | set(words(observation))) & entities)
        verdicts, still_open = [], []
        for w in self.watches:
            if outcome.step < w.repair_step:
                still_open.append(w)
                continue
            w.cycles += 1
            if (grounded or self.admission == "none") and w.progress_action is None:
                w.progress_action, w.progress_cycle = action, w.cycles
            if relevant and w.relevant_action is None:
                w.relevant_action, w.progress_cycle = action, w.cycles
            w.quiet = 0 if w.recurred_at is not None else w.quiet + 1
            verdict = self._judge(w, closing=False)
            if verdict is None:
                still_open.append(w)
            else:
                verdicts.append(verdict)
        self.watches = still_open
        return verdicts

    def finish(self) -> list[Verdict]:
        """The episode ended: judge the repairs still watched on what was seen (window admission only)."""
        watches, self.watches = self.watches, []
        if self.admission != "window":
            return []
        # closing under window admission, _judge always gives a verdict
        return [verdict for w in watches if (verdict := self._judge(w, closing=True)) is not None]

    def _judge(self, w: Watch, closing: bool) -> Verdict | None:
        """The verdict on `w` now, or None while it stays open."""
        labels = "/".join(w.detection.labels)
        if self.admission == "none":
            if w.cycles >= 1:
                return Verdict(w, None, "not verified (every repair becomes a lesson)")
            return None
        if w.recurred_at is not None:
            return Verdict(w, False, f"{labels} detected again at step {w.recurred_at}")
        if self.admission == "early":
            if w.quiet >= self.quiet_steps and w.progress_action is not None:
                return Verdict(w, True, f"no {labels} for {w.quiet} steps; progress resumed with {w.progress_action!r}")
            if w.cycles >= self.horizon:
                return Verdict(w, False, f"no grounded progress within {self.horizon} cycles")
            return None
        if w.cycles < self.horizon and not closing:
            return None
        span = f"{w.cycles} cycle{'s' if w.cycles != 1 else ''}" + (" (the episode ended)" if closing else "")
        if w.relevant_action is not None:
            return Verdict(w, True,
                           f"no {labels} in {span}; grounded, task-relevant progress with {w.relevant_action!r}")
        if w.progress_action is not None:
            return Verdict(w, False, f"grounded progress ({w.progress_action!r}) in {span}, none tied to the goal")
        return Verdict(w, False, f"no grounded progress in {span}")
