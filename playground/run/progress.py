"""A run's progress, on one channel: each step played (`StepNote`), each episode recorded (`EpisodeDone`) and each
message (`RunMessage`) reach the run's one listener (`ProgressListener`); a run's ETA comes from the rate of work.

While an episode plays, its attempt reports each step (`report_step`) to the listener that
whoever plays it set (`steps_reported`): the run itself, a thread that passes the note on to
the run's thread, or a worker process that sends it over its pipe. A note is small and
picklable. `RunProgress` adds the notes and finished episodes up for a display: steps and
model calls played, and an ETA from the rate of work (model calls, judges' included, or steps
in a run that makes none) and the work expected of the episodes left.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

from playground.core.events import EndEvent, Event, JudgeCallEvent, ProposalEvent, StepEvent
from playground.core.records import EpisodeRecord
from playground.run.report import asked_a_model


@dataclass(frozen=True)
class StepNote:
    """What one episode played since its last note: `steps` (1 for a step, 0 at its end) and `model_calls`."""

    key: str  # the episode's key (`core.records.episode_key`)
    steps: int
    model_calls: int


StepListener = Callable[[StepNote], None]


@dataclass(frozen=True)
class RunMessage:
    """A line the run has for its user (a repair, a warning, an episode left unfinished, a stop)."""

    text: str


@dataclass(frozen=True)
class EpisodeDone:
    """An episode recorded: `label` says which (its key, "KEY (done before)" for one a resume found finished)."""

    label: str
    record: EpisodeRecord


# The one progress channel of a run (`playground.run.runner.run(progress=...)`): each step played, each episode
# recorded, each message, in the order they happen.
ProgressEvent = StepNote | RunMessage | EpisodeDone
ProgressListener = Callable[[ProgressEvent], None]
_listener: ContextVar[StepListener | None] = ContextVar("step_listener", default=None)


@contextmanager
def steps_reported(listener: StepListener | None) -> Iterator[None]:
    """While the block runs (in this thread), hand each step note reported in it to `listener` (None: drop them)."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def report_step(note: StepNote) -> None:
    """Hand `note` to the listener of this thread's block, if any."""
    listener = _listener.get()
    if listener is not None:
        listener(note)


class StepCounter:
    """Turns one attempt's trace events into step notes: a note for each step, and one at the end for model calls
    made after the last step."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._calls = 0  # model calls since the last note

    def add(self, event: Event) -> None:
        """Count one event; report a step, or the end of the attempt."""
        if isinstance(event, JudgeCallEvent) or (isinstance(event, ProposalEvent) and asked_a_model(event)):
            self._calls += 1
        elif isinstance(event, StepEvent) or (isinstance(event, EndEvent) and self._calls):
            report_step(StepNote(self.key, int(isinstance(event, StepEvent)), self._calls))
            self._calls = 0


class RunProgress:
    """The progress of a run, for a display: episodes finished, steps and model calls played, and an ETA.

    Feed it each step note (`step`) and each finished episode's record (`finished`), with the time each came
    (`now`, seconds on any clock). The ETA counts work: model calls once the run has made any (judge calls
    included, which come after an episode's last step), steps otherwise. The rate is that of the work done since
    the first note of this session. The work left is, for each episode waiting, the mean of the finished
    episodes' totals (from the step budget while none has finished), and for each episode in play, the mean
    of what the finished episodes that went further than it did beyond that point (their mean residual), or
    one more step's work when none went that far: an episode still in play always has work left, so the ETA
    never reads 0:00 while the run has work to do.
    """

    def __init__(self, episodes: int, max_steps: int) -> None:
        self.episodes, self.max_steps = episodes, max_steps
        self.steps = 0  # played in this session
        self.model_calls = 0
        self.done = 0
        # how many finished episodes took each total, in steps and in model calls, and those totals' sums: the
        # means and residuals read a few hundred distinct totals, not every episode, on each redraw
        self._totals: tuple[Counter[int], Counter[int]] = (Counter(), Counter())
        self._sums = [0, 0]
        self._playing: dict[str, tuple[int, int]] = {}  # (steps, model calls) so far of each episode in play
        self._first: float | None = None  # when the first step of this session was reported
        self._work_at_first = (0, 0)  # (steps, model calls) counted by then

    def step(self, note: StepNote, now: float) -> None:
        """Count a step note that came at `now`."""
        self.steps += note.steps
        self.model_calls += note.model_calls
        steps, calls = self._playing.get(note.key, (0, 0))
        self._playing[note.key] = (steps + note.steps, calls + note.model_calls)
        if note.steps and self._first is None:
            self._first, self._work_at_first = now, (self.steps, self.model_calls)

    def finished(self, record: EpisodeRecord) -> None:
        """Count a finished episode (played now, or before a resume)."""
        self.done += 1
        for unit, total in enumerate((record.steps, record.model_calls)):
            self._totals[unit][total] += 1
            self._sums[unit] += total
        self._playing.pop(record.key, None)

    def by_model_calls(self) -> bool:
        """Whether the ETA counts model calls (the run has made some) rather than steps."""
        return self.model_calls > 0 or self._sums[1] > 0

    def _unit(self) -> int:
        return 1 if self.by_model_calls() else 0

    def work_per_step(self) -> float:
        """The work one step costs: 1 when counting steps, else the model calls per step seen so far."""
        if not self.by_model_calls():
            return 1.0
        steps = self._sums[0] + sum(steps for steps, _ in self._playing.values())
        calls = self._sums[1] + sum(calls for _, calls in self._playing.values())
        return calls / steps if steps else 1.0

    def expected_per_episode(self) -> float:
        """The work an episode is expected to take: the mean of the finished ones, else the step budget's."""
        if self.done:
            return self._sums[self._unit()] / self.done
        return self.max_steps * self.work_per_step()

    def expected_left(self, done_so_far: int) -> float:
        """The work expected of an episode in play that has done `done_so_far`: the mean residual of the finished
        episodes that went further, else the budget's share left, else one more step's work (never 0)."""
        further = [(total - done_so_far, count) for total, count in self._totals[self._unit()].items()
                   if total > done_so_far]
        if further:
            return sum(left * count for left, count in further) / sum(count for _, count in further)
        if not self.done and done_so_far < self.max_steps * self.work_per_step():
            return self.max_steps * self.work_per_step() - done_so_far
        return self.work_per_step()

    def work_left(self) -> float:
        """The work (model calls, or steps) expected before the run ends."""
        unit = self._unit()
        waiting = max(self.episodes - self.done - len(self._playing), 0)
        in_play = sum(self.expected_left(done[unit]) for done in self._playing.values())
        return waiting * self.expected_per_episode() + in_play

    def rate(self, now: float) -> float | None:
        """Work per second done since the first step of this session (None before any work after it)."""
        if self._first is None or now <= self._first:
            return None
        unit = self._unit()
        done = (self.steps, self.model_calls)[unit] - self._work_at_first[unit]
        return done / (now - self._first) if done > 0 else None

    def step_rate(self, now: float) -> float | None:
        """Steps per second played since the first step of this session (None before two steps apart in time)."""
        if self._first is None or now <= self._first or self.steps < 2:
            return None
        return (self.steps - self._work_at_first[0]) / (now - self._first) or None

    def eta(self, now: float) -> float | None:
        """Seconds until the run ends at the present rate, or None while there is no rate yet."""
        rate = self.rate(now)
        return self.work_left() / rate if rate else None

    def describe(self, now: float) -> str:
        """One line for the display: steps, model calls, steps per second and the ETA."""
        rate, eta = self.step_rate(now), self.eta(now)
        parts = [f"steps {self.steps}", f"model calls {self.model_calls}"]
        if rate is not None:
            parts.append(f"{rate:.2f} steps/s" if rate < 10 else f"{rate:.0f} steps/s")
        parts.append(f"ETA {format_seconds(eta)}" if eta is not None else "ETA --")
        return " · ".join(parts)


def format_seconds(seconds: float) -> str:
    """`seconds` as H:MM:SS (M:SS under an hour)."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
