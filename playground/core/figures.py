"""A plugin's column in study tables (`register_figures`): a number per cell, from the cell's episode records and,
where it needs them, their typed trace events, or from the files a study's pipeline steps wrote into the cell's run
directory. The study layer (`playground.run.study`) computes it; a plugin ships no table code of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from playground.core.events import Event
from playground.core.records import EpisodeRecord

EventsOf = Callable[[EpisodeRecord], list[Event]]  # one episode's trace events ([] where the run left traces out)
# a cell's value, or one value per key (a column per key: `NAME[KEY]`)
FigureFunction = Callable[[Sequence[EpisodeRecord], EventsOf], "float | None | Mapping[str, float | None]"]
# a value from the files in a cell's run directory (what a pipeline step wrote there) about the cell's episodes
FolderFigureFunction = Callable[[Path, Sequence[EpisodeRecord]], "float | None | Mapping[str, float | None]"]


@dataclass(frozen=True)
class Figure:
    """A column a plugin adds to study tables.

    `of(records, events)` gives one cell's value from its finished episodes' records (`events(record)` reads an
    episode's trace events), or None where the figure does not apply to the cell. A figure with rows of its own
    (per label, per step budget) returns a mapping {key: value}: the table gets a column `NAME[KEY]` per key some
    cell has (None in the cells without it). `share`: the value is a share in [0, 1] and shows as a percentage;
    otherwise it shows with two decimals. The table shows a figure a study names (`figures = [...]`), or, for a
    study that names none, every figure some cell has a value for other than 0. `plugin` is filled in by the
    host.

    A figure of what a study's pipeline steps computed (`register_pipeline_steps`: a diagnosis, a replay) gives
    `of_folder(run_dir, records)` instead of `of`: the value from the files in the cell's run directory about
    the cell's episodes (`records`: a step's output covers every harness of the folder), None where they are not
    there.
    """

    name: str
    description: str
    of: FigureFunction | None = None
    share: bool = False
    plugin: str = ""
    of_folder: FolderFigureFunction | None = None

    def __post_init__(self) -> None:
        if (self.of is None) == (self.of_folder is None):
            raise ValueError(f"figure {self.name!r}: give `of` (from records and events) or `of_folder` (from the "
                             f"run directory's files), one of them")

    def value(self, records: Sequence[EpisodeRecord], events: EventsOf,
              folder: Path) -> float | None | Mapping[str, float | None]:
        """One cell's value: from its records and events (`of`), or from the files in its run directory `folder`
        (`of_folder`)."""
        if self.of is not None:
            return self.of(records, events)
        assert self.of_folder is not None  # __post_init__: one of the two
        return self.of_folder(folder, records)


TABLE_SHARES = ("success", "ci_low", "ci_high", "diff", "resolved")  # the study table's own columns that are shares


def shown_value(column: str, value: float | None, share: bool = False) -> str:
    """How a study table shows one number of `column` (`paper X` as X): a share (the table's own, or a figure's
    with `share`) as a percentage, `diff` signed; a p-value to two significant digits; `tokens` and anything of
    1,000 or more as a whole number; anything else to two decimals; "-" for none."""
    if value is None:
        return "-"
    name = column.removeprefix("paper ")
    if share or name in TABLE_SHARES:
        return f"{value:+.0%}" if name == "diff" else f"{value:.0%}"
    if name == "p":
        return f"{value:.2g}"
    return f"{value:,.0f}" if name == "tokens" or abs(value) >= 1000 else f"{value:.2f}"


def column_figure(column: str) -> str:
    """The figure a table column shows: `NAME` for `NAME` and for a keyed column `NAME[KEY]`."""
    return column.split("[", 1)[0]


def column_key(column: str) -> str:
    """The key of a keyed column `NAME[KEY]`."""
    return column[len(column_figure(column)) + 1:-1]


def keyed_columns(columns: Sequence[str]) -> dict[str, list[str]]:
    """The keyed figures among a table's columns: {NAME: its `NAME[KEY]` columns}, in column order."""
    keyed: dict[str, list[str]] = {}
    for column in columns:
        if "[" in column:
            keyed.setdefault(column_figure(column), []).append(column)
    return keyed


def per_episode(count: Callable[[EpisodeRecord], float]) -> FigureFunction:
    """A figure function for a count per episode: the mean of `count(record)` over the cell's episodes."""

    def mean(records: Sequence[EpisodeRecord], events: EventsOf) -> float | None:
        return sum(count(record) for record in records) / len(records) if records else None

    return mean


def per_episode_from_events(count: Callable[[list[Event]], float]) -> FigureFunction:
    """A figure function for a count read from each episode's trace: the mean of `count(events)` over the cell's
    episodes whose trace is there (None when none is)."""

    def mean(records: Sequence[EpisodeRecord], events: EventsOf) -> float | None:
        traces = [events(record) for record in records]
        read = [trace for trace in traces if trace]
        return sum(count(trace) for trace in read) / len(read) if read else None

    return mean
