"""Local recovery on a fork's continuation, judged blind by Sentry's own detectors and verifier.

`LocalRecoveryJudge` is an observer (it implements only `episode_started`, `step_completed`
and `episode_finished`, so it can watch a fork but never intervene). Given the episode's
prefix before the fork point T and the failure Sentry detected at T, it runs Sentry's rule
detectors on every action of the continuation (over a window that includes the prefix)
and feeds Sentry's `RecoveryVerifier` (`admission="window"`) exactly as the `sentry`
harness does after a soft repair:

- the watch opens at T: the action played at T is its first cycle;
- **recurrence**: a detection sharing a label with the failure at T, at a step after T;
- **resolved** when, after `horizon` H cycles (or at the fork's end, judged on what was
  seen), the failure did not recur and grounded, task-relevant progress happened (a valid,
  non-look action whose observation was not seen before in the episode, prefix included,
  naming or mentioning one of the goal's entities); **unresolved** otherwise.

Blind: every payload is reduced to what the agent sees (`blind.py`) before any part reads
it; the reward, score, `won` and the episode's status are never read. Every observation goes
through the env's `remove_grade_text` first (score lines, win and loss banners removed): the
prefix and the first observation, given from the recorded trace, through the one given at
construction (the env provider's); the fork's own outcomes through the live env's
(`EpisodeStart.remove_grade_text`, taken when the fork starts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Detection, EpisodeEnd, EpisodeStart, StepOutcome, keep_text
from playground.plugins.sentry.blind import BlindOutcome, BlindTurn, BlindView, blind_outcome, blind_turn
from playground.plugins.sentry.detectors import object_words, run_detectors
from playground.plugins.sentry.harness import OWN_DETECTORS
from playground.plugins.sentry.verifier import RecoveryVerifier, Verdict


class LocalRecoveryJudge:
    """Observer judging whether the failure detected at fork point `point` was locally recovered from.

    `prefix` and `first_observation` (what the episode showed before T) are cleaned with `remove_grade_text`
    (the env's; give the env provider's where they come from a trace) before anything reads them."""

    def __init__(self, point: int, detection: Detection, prefix: tuple[BlindTurn, ...], goal: str,
                 first_observation: str, seen_actions: tuple[str, ...] = (), horizon: int = 10,
                 window: int = 5, *, remove_grade_text: Callable[[str], str] = keep_text) -> None:
        self.remove_grade_text = remove_grade_text  # the live env's once the fork starts (`episode_started`)
        prefix = tuple(blind_turn(turn, remove_grade_text=remove_grade_text) for turn in prefix)
        first_observation = remove_grade_text(first_observation)
        self.point, self.detection, self.prefix, self.window = point, detection, prefix, window
        self.first_observation = first_observation
        self.verifier = RecoveryVerifier(horizon, admission="window")
        self.verifier.start_episode(first_observation, goal)
        self.verifier.seen |= {turn.observation.strip() for turn in prefix}
        for action in (*seen_actions, *(turn.action for turn in prefix)):
            self.verifier.objects |= object_words(action)
        self.verifier.watch(point, detection, ())
        self.verdict: Verdict | None = None
        self.detections: list[tuple[int, Detection]] = []

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Take the env's `remove_grade_text`, through which every outcome of the fork is read; nothing else (the
        prefix was given at construction, and the start payload carries the env's info)."""
        self.remove_grade_text = start.remove_grade_text

    @hookimpl
    def step_completed(self, outcome: StepOutcome) -> None:
        """Detect on the action just played (window over prefix + continuation), then let the verifier watch."""
        seen = blind_outcome(outcome, remove_grade_text=self.remove_grade_text)
        view = self._shifted(seen.view)
        found = run_detectors(view, outcome.proposal, self.window, screen=True,
                              first_observation=self.first_observation)
        own = [d for d in found if d.detector in OWN_DETECTORS]
        self.detections.extend((view.step, d) for d in own)
        self.verifier.note_detections(view.step, own)
        self._take(self.verifier.observe(BlindOutcome(view, seen.thought, seen.action, seen.finish, seen.observation,
                                                      seen.valid_action, seen.admissible_actions)))

    @hookimpl
    def episode_finished(self, end: EpisodeEnd) -> None:
        """The fork ended: judge the watch on what was seen (never `end.won` or `end.status`)."""
        self._take(self.verifier.finish())

    @property
    def recovered(self) -> bool:
        """True when the verifier resolved the watch (a fork that never started is not a recovery)."""
        return bool(self.verdict is not None and self.verdict.resolved)

    @property
    def evidence(self) -> str:
        """The verifier's evidence for its verdict, or why there is none."""
        return self.verdict.evidence if self.verdict is not None else "no verdict (the fork did not finish)"

    def _take(self, verdicts: list[Verdict]) -> None:
        if verdicts and self.verdict is None:
            self.verdict = verdicts[0]

    def _shifted(self, view: BlindView) -> BlindView:
        """The fork's view as the original episode numbers it: steps from T, the prefix in the history."""
        history = self.prefix + tuple(replace(turn, step=turn.step + self.point) for turn in view.history)
        return replace(view, step=view.step + self.point, history=history)
