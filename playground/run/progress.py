"""A run's progress, on one channel: each step played (`StepNote`), each episode recorded (`EpisodeDone`) and each
message (`RunMessage`) reach the run's one listener (`ProgressListener`); a run's ETA comes from step rates.

While an episode plays, its attempt reports each step (`report_step`) to the listener that
whoever plays it set (`steps_reported`): the run itself, a thread that passes the note on to
the run's thread, or a worker process that sends it over its pipe. A note is small and
picklable. `RunProgress` adds the notes and finished episodes up for a display: steps and
model calls played, and an ETA from the rate of steps (steps remaining, estimated from the
mean steps of finished episodes or the step budget, over steps per second).
"""

from __future__ import annotations

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
    (`now`, seconds on any clock). The rate is that of the steps played since the first note of this session;
    the steps remaining are, for each episode not finished, the mean steps of the finished episodes (the step
    budget `max_steps` while none is), less what an episode being played has played already.
    """

    def __init__(self, episodes: int, max_steps: int) -> None:
        self.episodes, self.max_steps = episodes, max_steps
        self.steps = 0  # played in this session
        self.model_calls = 0
        self.done = 0
        self._done_steps = 0
        self._playing: dict[str, int] = {}  # steps played so far by each episode in play
        self._first: float | None = None  # when the first step of this session was reported

    def step(self, note: StepNote, now: float) -> None:
        """Count a step note that came at `now`."""
        if note.steps and self._first is None:
            self._first = now
        self.steps += note.steps
        self.model_calls += note.model_calls
        self._playing[note.key] = self._playing.get(note.key, 0) + note.steps

    def finished(self, record: EpisodeRecord) -> None:
        """Count a finished episode (played now, or before a resume)."""
        self.done += 1
        self._done_steps += record.steps
        self._playing.pop(record.key, None)

    def steps_per_episode(self) -> float:
        """The steps an episode is expected to take: the mean of the finished ones, else the step budget."""
        return self._done_steps / self.done if self.done else float(self.max_steps)

    def steps_left(self) -> float:
        """The steps expected before the run ends."""
        expected = self.steps_per_episode()
        waiting = max(self.episodes - self.done - len(self._playing), 0)
        return waiting * expected + sum(max(expected - played, 0.0) for played in self._playing.values())

    def rate(self, now: float) -> float | None:
        """Steps per second played since the first step of this session (None before two steps apart in time)."""
        if self._first is None or now <= self._first or self.steps < 2:
            return None
        return (self.steps - 1) / (now - self._first)

    def eta(self, now: float) -> float | None:
        """Seconds until the run ends at the present rate, or None while there is no rate yet."""
        rate = self.rate(now)
        return self.steps_left() / rate if rate else None

    def describe(self, now: float) -> str:
        """One line for the display: steps, model calls, steps per second and the ETA."""
        rate, eta = self.rate(now), self.eta(now)
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
