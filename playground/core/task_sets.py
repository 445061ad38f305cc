"""Where an env's tasks come from: task sets and their splits, generated seed ranges, and where task data lives.

A `TaskSet` names an env's tasks by split (listed ids, or a function `count -> ids`; `seed_range` builds the
function for a generated split). `cache_root` and `path_from_env` locate the files envs generate or read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, cast


@dataclass(frozen=True)
class TaskSet:
    """A named set of tasks with disjoint splits.

    `splits` maps a split name to its task ids, or to a function `count -> ids` for
    generated sets whose splits are open-ended ranges of seeds (`seed_range`). Which ids
    belong to the set (`has_task`) is known for listed ids and seed ranges; a split given
    as another function needs `is_task` (task id -> bool) and `task_form` (the expected
    ids, in words, for error messages), else any id is taken as the set's.

    How many tasks a split has (`available`): listed ids are counted, a seed range has its
    size; a split given as another function declares its cap in `max_counts` (e.g. the
    seeds a generator may use), else it is known only once listed. The runner refuses a
    count beyond it before anything is generated or played.
    """

    name: str
    description: str
    splits: Mapping[str, tuple[str, ...] | Callable[[int], list[str]]]
    default_split: str = "test"
    default_count: int = 10
    params: Mapping[str, Any] = field(default_factory=dict)
    is_task: Callable[[str], bool] | None = None
    task_form: str = ""
    default_max_steps: int | None = None  # a step budget that fits the tasks (`playground run` without --max-steps)
    max_counts: Mapping[str, int] = field(default_factory=dict)  # split -> at most this many tasks (a function's cap)

    def exact_count(self, split: str) -> bool:
        """True when `available(split)` is the split's exact count (listed ids, a seed range), not a cap."""
        source = self.splits[split]
        return isinstance(source, SeedRange) or not callable(source)

    def available(self, split: str) -> int | None:
        """How many tasks `split` has (at most, for a generated split); None when only listing them tells."""
        source = self.splits[split]
        if isinstance(source, SeedRange):
            return source.size
        if not callable(source):
            return len(source)
        return self.max_counts.get(split)

    def has_task(self, task_id: str) -> bool:
        """True when `task_id` is a task of one of the splits."""
        if self.is_task is not None:
            return bool(self.is_task(task_id))
        sources = list(self.splits.values())
        if any(callable(s) and not isinstance(s, SeedRange) for s in sources):
            return True  # an opaque split function: the env finds out
        # the other callables returned above: what is left are tuples and seed ranges
        return any(task_id in cast("tuple[str, ...] | SeedRange", source) for source in sources)

    def expected_ids(self) -> str:
        """The task ids of this set, in words (for error messages)."""
        if self.task_form:
            return self.task_form
        ranges: dict[str, list[str]] = {}
        parts = []
        for split, source in self.splits.items():
            if isinstance(source, SeedRange):
                ranges.setdefault(source.prefix, []).append(
                    f"{source.start}-{source.start + source.size - 1} ({split})")
            elif not callable(source):
                examples = ", ".join(repr(t) for t in list(source)[:2])
                parts.append(f"one of the {len(source)} ids of {split} "
                             f"({examples}{', ...' if len(source) > 2 else ''})")
        parts[:0] = [f"'{prefix}-<n>' with n in {', '.join(spans)}" for prefix, spans in ranges.items()]
        return "; ".join(parts) or "a task id of one of its splits"

    def tasks(self, split: str, count: int | None = None) -> list[str]:
        """Return the ids of the first `count` tasks of `split` (all for a fixed split)."""
        if split not in self.splits:
            raise KeyError(split)
        source = self.splits[split]
        if callable(source):
            return list(source(count if count is not None else self.default_count))
        ids = list(source)
        return ids if count is None else ids[:count]



@dataclass(frozen=True)
class SeedRange:
    """A generated split: called with `count`, the ids `<prefix>-<start>`, `<prefix>-<start+1>`, ...
    (at most `size`); `task_id in split` says whether an id is one of its `size` ids."""

    prefix: str
    start: int
    size: int = 10_000

    def __call__(self, count: int) -> list[str]:
        if count > self.size:
            raise ValueError(f"{self.prefix}: at most {self.size} tasks per split, asked for {count}")
        return [f"{self.prefix}-{self.start + i}" for i in range(count)]

    def __contains__(self, task_id: object) -> bool:
        match = re.fullmatch(rf"{re.escape(self.prefix)}-(0|[1-9][0-9]*)", str(task_id))
        return match is not None and self.start <= int(match.group(1)) < self.start + self.size



def seed_range(prefix: str, start: int, size: int = 10_000) -> SeedRange:
    """A generated split: `count -> ["<prefix>-<start>", "<prefix>-<start+1>", ...]`, at most `size` ids.

    Splits built with disjoint `start`s of the same `size` never share a task.
    """
    return SeedRange(prefix, start, size)


def cache_root() -> Path:
    """Return the playground cache folder (`$PLAYGROUND_CACHE`, else ~/.cache/playground)."""
    return Path(os.environ.get("PLAYGROUND_CACHE") or Path.home() / ".cache" / "playground")


def path_from_env(variable: str) -> Path | None:
    """The path an environment variable names (`~` expanded), or None when it is unset or empty."""
    value = os.environ.get(variable, "").strip()
    return Path(value).expanduser() if value else None
