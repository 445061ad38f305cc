"""The progress bar of `playground run`: episodes finished, and within them steps, model calls and an ETA."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from playground.cli.terminal import visible
from playground.run.progress import ProgressEvent, RunMessage, RunProgress, StepNote

REDRAW_EVERY = 0.25  # seconds between redraws for steps (a scripted agent plays thousands of steps a second)


class ProgressDisplay:
    """A click progress bar over a run's episodes whose text says steps and model calls played and the ETA from
    the step rate (`playground.run.progress.RunProgress`); use it as a context manager and hand its `progress`
    to `playground.run.runner.run` (the run's one progress channel). When stderr is not a terminal (a log file, a
    pipe) it prints one line per finished episode instead of a bar, which a log could not redraw."""

    def __init__(self, episodes: int, max_steps: int, hidden: bool, terminal: bool | None = None) -> None:
        self.tally = RunProgress(episodes, max_steps)
        self.last = ""  # the last episode finished, and how
        self._drawn = 0.0
        self.lines = not hidden and not (sys.stderr.isatty() if terminal is None else terminal)
        self._bar = click.progressbar(length=episodes, label="episodes", file=sys.stderr, show_pos=True,
                                      show_eta=False, item_show_func=lambda text: text, hidden=hidden or self.lines)

    def __enter__(self) -> ProgressDisplay:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)

    def text(self) -> str:
        """What the bar shows after it: the run's step tally and ETA, and the last episode finished (its task id made
        safe for a terminal, `visible`)."""
        return visible(self.tally.describe(time.monotonic()) + (f" · {self.last}" if self.last else ""))

    def progress(self, event: ProgressEvent) -> None:
        """The run's progress listener: a step moves the tally (`on_step`), a recorded episode the bar, a message is
        printed. Each may quote a task id, a plugin's or env's exception or a model server's error body: each is
        shown through `visible`."""
        if isinstance(event, StepNote):
            self.on_step(event)
            return
        if isinstance(event, RunMessage):
            click.echo(f"  {visible(event.text)}", err=True)
            return
        self.tally.finished(event.record)
        self.last = f"{visible(event.label)}: {event.record.status}"
        if self.lines:
            click.echo(f"episode {self.tally.done}/{self.tally.episodes} · {self.text()}", err=True)
        self._bar.update(1, self.text())
        self._drawn = time.monotonic()

    def on_step(self, note: StepNote) -> None:
        """Count a step and redraw the bar (at most every REDRAW_EVERY seconds)."""
        now = time.monotonic()
        self.tally.step(note, now)
        if not self.lines and now - self._drawn >= REDRAW_EVERY:
            self._drawn = now
            self._bar.current_item = self.text()
            self._bar.render_progress()
