"""Ground truth and detections read back from a run directory of a failure-injection agent.

The agent (`noisy`) records each failure it injects in `Proposal.injected`; the loop writes
that into the trace's `proposal` events and hides it from every plugin. This module reads
it back, and replays Sentry's rule detectors (and, on a sample, the LLM judge) offline over
the same steps: each step's `StepContext` is rebuilt by replaying the env from reset
(`playground.run.forks.replay_contexts`, observations checked), reduced to Sentry's blind
view, and handed with a proposal made of the recorded thought, action and finish flag only.
The injection never enters what a detector is given, nor does the grade text the env prints:
every observation of the view, and the first observation, goes through the env provider's
`remove_grade_text` (the env the trace header names), as Sentry reads them live through
`EpisodeStart.remove_grade_text`, so the replayed detections are the live ones.

For the verifier it pairs each verdict of a Sentry run with whether the injected failure
the repair was about really ended within the verifier's horizon (`verdict_truths`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.core.events import InterventionEvent, ProposalEvent, VerificationEvent
from playground.core.payloads import Proposal
from playground.host_api import (
    EpisodeTrace,
    ForkError,
    Host,
    RecordedStep,
    RunDirError,
    load_episode,
    load_records,
    record_trace,
    replay_contexts,
)
from playground.plugins.sentry.blind import BlindView, GradeTextRemover, blind_view
from playground.plugins.sentry.detectors import make_window, named_detections
from playground.plugins.sentry.harness import DEFAULTS
from playground.plugins.sentry.measure import Hit, Matcher, StepTruth

ALL_RULES = "sentry"  # the name of all of Sentry's rules together, as Sentry runs them
JUDGE = "llm-judge"


class TruthError(PlaygroundError, ValueError):
    """A run directory cannot be measured: no such harness, no injected failures, a trace that does not replay."""


@dataclass
class ReplayedStep:
    """One step as a detector receives it: the blind view and a proposal without any injection."""

    episode: str
    step: int
    view: BlindView
    proposal: Proposal
    first_observation: str
    invalid: bool  # the validity rule fired (then Sentry asks no judge, and neither does the sample)


@dataclass
class EpisodeEvidence:
    """One replayed episode: its injected failures per step, its steps and the rules' detections."""

    episode: str
    injected: list[tuple[str, int, str, int]]  # (episode, step, label, streak) of every injected proposal
    steps: list[ReplayedStep] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)


def traces(run_dir: str | Path, harness: str, required: bool = True) -> list[EpisodeTrace]:
    """The episodes `harness` played in `run_dir` (errored ones left out), in record order; with `required`
    False, none is an empty list rather than a TruthError."""
    try:
        records = load_records(run_dir)
        mine = [r for r in records if r.harness == harness and r.status != "error"]
        paths = [record_trace(run_dir, r) for r in mine]
    except RunDirError as exc:
        raise TruthError(str(exc)) from None
    if not paths and not required:
        return []
    if not paths:
        harnesses = sorted({r.harness for r in records})
        raise TruthError(f"{run_dir}: no finished episode of harness {harness!r}; the run has: "
                         f"{', '.join(harnesses) or '(none)'}")
    try:
        return [load_episode(path) for path in paths]
    except ForkError as exc:
        raise TruthError(str(exc)) from None


def _path(episode: EpisodeTrace) -> list[RecordedStep]:
    """The steps of the surviving path, and the tail (proposals with no action) where there is one."""
    return [*episode.steps, *([episode.tail] if episode.tail is not None else [])]


def _episode_id(episode: EpisodeTrace) -> str:
    return episode.header.episode_id or str(episode.path)


def injected_at(proposal: ProposalEvent) -> tuple[str, int] | None:
    """(label, streak) a proposal event says was injected, or None (no injection, or an unusable record)."""
    record = proposal.injected
    if not isinstance(record, Mapping) or not record.get("label"):
        return None
    return str(record["label"]), int(record.get("streak") or 0)


def injections(episode: EpisodeTrace) -> list[tuple[str, int, str, int]]:
    """(episode, step, label, streak) for each step whose executed (last) proposal was injected."""
    found = []
    for recorded in _path(episode):
        if recorded.proposals and (mark := injected_at(recorded.proposals[-1])) is not None:
            found.append((_episode_id(episode), recorded.step, *mark))
    return found


def detector_proposal(event: ProposalEvent) -> Proposal:
    """What a detector is given of a recorded proposal event: its thought, action and finish flag, never
    the injection."""
    return Proposal(event.thought, event.action, event.finish)


def grade_text_remover(host: Host, episode: EpisodeTrace) -> GradeTextRemover:
    """The `remove_grade_text` of the env the episode's trace header names (its provider's, through the host's
    registry); `TruthError` for a trace that names none the host has."""
    try:
        return host.grade_text_remover(episode.header.env)
    except KeyError as exc:
        raise TruthError(f"{episode.path}: {exc.args[0]}") from None


def replay_rules(host: Host, episode: EpisodeTrace, window_size: int = int(DEFAULTS["window"])) -> EpisodeEvidence:
    """Replay Sentry's rules over the episode's first proposal of every step (`TruthError` if it does not replay),
    every observation read through the env provider's `remove_grade_text`, as Sentry reads them live."""
    name = _episode_id(episode)
    evidence = EpisodeEvidence(name, injections(episode))
    try:
        contexts = replay_contexts(host, episode)
    except ForkError as exc:
        raise TruthError(str(exc)) from None
    remove_grade_text = grade_text_remover(host, episode)
    first = remove_grade_text(episode.reset.observation)
    for recorded, context in zip(_path(episode), contexts):
        if not recorded.proposals:
            continue
        proposal = detector_proposal(recorded.proposals[0])
        view = blind_view(context, remove_grade_text=remove_grade_text)
        found = named_detections(view, proposal, window_size, first_observation=first)
        evidence.steps.append(ReplayedStep(name, recorded.step, view, proposal, first,
                                           any(d.failure_type == "action_validity" for _, d in found)))
        labels = sorted({label for _, d in found for label in d.labels})
        evidence.hits += [Hit(name, recorded.step, label, ALL_RULES) for label in labels]
        evidence.hits += [Hit(name, recorded.step, label, rule) for rule, d in found for label in d.labels]
    return evidence


def step_truth(evidence: EpisodeEvidence, step: int, window: int,
               keep: Callable[[str], bool] = lambda label: True) -> StepTruth:
    """The labels injected at `step` or within `window` steps before it (those `keep` accepts)."""
    labels = frozenset(label for _, at, label, _ in evidence.injected if step - window <= at <= step and keep(label))
    return StepTruth(evidence.episode, step, labels)


def sample_steps(evidence: list[EpisodeEvidence], size: int, window: int, keep: Callable[[str], bool] = lambda _: True,
                 seed: str = "judge") -> list[tuple[ReplayedStep, StepTruth]]:
    """A seeded sample of `size` steps the judge would be asked about (no validity detection): half with
    an injected failure (a label `keep` accepts) at or shortly before them where there are enough, the
    rest clean."""
    candidates = [(s, step_truth(e, s.step, window, keep)) for e in evidence for s in e.steps if not s.invalid]
    rng = random.Random(seed)
    positive = [c for c in candidates if c[1].labels]
    clean = [c for c in candidates if not c[1].labels]
    rng.shuffle(positive)
    rng.shuffle(clean)
    half = min(len(positive), (size + 1) // 2)
    taken = positive[:half] + clean[:size - half]
    taken += positive[half:half + size - len(taken)]  # too few clean steps: more with failures
    return sorted(taken, key=lambda c: (c[0].episode, c[0].step))


def judge_hits(judge: Any, sampled: list[tuple[ReplayedStep, StepTruth]],
               window_size: int = int(DEFAULTS["window"])) -> list[Hit]:
    """Ask the LLM judge (`LLMDetector`) about each sampled step; its detections as hits."""
    hits = []
    for step, _ in sampled:
        detection = judge.detect(step.view, step.proposal, make_window(step.view, window_size, step.first_observation))
        if detection is not None:
            hits += [Hit(step.episode, step.step, label, JUDGE) for label in detection.labels]
    return hits


@dataclass
class VerdictTruth:
    """A Sentry verdict on a soft repair, and what the injected failure it repaired really did."""

    episode: str
    repair_step: int
    labels: tuple[str, ...]
    verdict: str  # "resolved" or "unresolved" (or "unverified", where asked for)
    injected_label: str | None = None  # None: the repair was about no injected failure
    ended: bool | None = None  # the injected streak was no longer being made within the horizon
    recurred: bool | None = None  # a new streak of the same label started within the horizon
    lesson: bool = False  # the verdict stored a lesson

    @property
    def truth(self) -> bool | None:
        """Whether the injected failure really was resolved: it ended and did not recur (None: no failure)."""
        return None if self.injected_label is None else bool(self.ended and not self.recurred)


def verdict_truths(episode: EpisodeTrace, window: int, matches: Matcher, horizon: int,
                   verdicts: tuple[str, ...] = ("resolved", "unresolved")) -> list[VerdictTruth]:
    """Each verdict of the episode (those named in `verdicts`: resolved and unresolved by default; add
    "unverified" for a run that admits lessons unverified) with its ground truth.

    The repaired failure is the injected streak (a label matching the repair's) made at the repair
    step or within `window` steps before it, the latest such (an exact label first). Over the
    verifier's `horizon` cycles (the repair step and the H - 1 after it) it **ended** when the
    executed proposal of some step no longer belongs to it, and **recurred** when a proposal of a
    later step makes a new streak of the same label.
    """
    steps = {r.step: r.proposals for r in _path(episode)}
    repairs = {e.step: tuple(e.detections[0].get("labels") or ()) for e in episode.events
               if isinstance(e, InterventionEvent) and e.kind == "soft_repair" and e.detections}
    found = []
    for event in episode.events:
        if not isinstance(event, VerificationEvent) or event.verdict not in verdicts:
            continue
        r = event.repair_step
        labels = repairs.get(r, ())
        truth = VerdictTruth(_episode_id(episode), r, labels, event.verdict, lesson=event.lesson is not None)
        made = [(at, *mark) for at in range(r - window, r + 1) for p in steps.get(at, ())
                if (mark := injected_at(p)) is not None and any(matches(label, mark[0]) for label in labels)]
        if made:
            _, truth.injected_label, streak = max(made, key=lambda m: (m[1] in labels, m[0]))
            span = [steps[at] for at in range(r, r + horizon) if at in steps and steps[at]]
            truth.ended = any(injected_at(proposals[-1]) != (truth.injected_label, streak) for proposals in span)
            later = [mark for at in range(r + 1, r + horizon) for p in steps.get(at, ())
                     if (mark := injected_at(p)) is not None]
            truth.recurred = any(label == truth.injected_label and s != streak for label, s in later)
        found.append(truth)
    return found
