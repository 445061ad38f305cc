"""What the `playground playbook` commands print: lesson lines, the preview of a merge or a prune, how to restore a
backup, and an import's progress."""

from __future__ import annotations

import math
import shlex
import sys
import time
from collections import defaultdict
from pathlib import Path

import click

from playground.host_api import visible

MERGE_EXAMPLES = 3  # merges shown per group in a preview (`--dry-run`: all)
PRUNE_EXAMPLES = 10  # lessons shown in a prune preview
PROGRESS_INTERVAL_S = 1.0  # at most one progress report per interval, besides a stage's first and last


def lesson_line(lesson) -> str:
    """One lesson on one line: id, type, labels, subtype, trigger, principle and counters."""
    return visible(f"#{lesson.id} [{lesson.failure_type}: {', '.join(lesson.labels)}] ({lesson.subtype}) "
                   f"when {lesson.trigger}: {lesson.principle}  "
                   f"[retrieved {lesson.retrieved}, verified {lesson.verified}, helped {lesson.helped}]")


def show_merge_plan(plan: list[tuple[int, int, float]], lessons: dict, every: bool = False) -> None:
    """Print what a merge would do, group by group (failure type and labels): how many of the group's lessons
    would be merged away, a few merges (`every`: all), a note on a group that would lose most of its lessons, and
    a last line saying that nothing changed and how to merge."""
    groups: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for item in plan:
        groups[_group(lessons[item[0]])].append(item)
    sizes: dict[str, int] = defaultdict(int)
    for lesson in lessons.values():
        sizes[_group(lesson)] += 1
    for group, merges in groups.items():
        click.echo(visible(f"{group}: {len(merges)} of {sizes[group]} lessons would be merged away, "
                           f"{sizes[group] - len(merges)} kept"))
        shown = merges if every else merges[:MERGE_EXAMPLES]
        for duplicate, keep, ratio in shown:
            click.echo(f"  #{duplicate} -> #{keep} (similarity {ratio:.2f})\n     {lesson_line(lessons[duplicate])}\n"
                       f"     into {lesson_line(lessons[keep])}")
        if len(shown) < len(merges):
            click.echo(f"  ... and {len(merges) - len(shown)} more (--dry-run lists every merge)")
        if len(merges) >= 5 and 2 * len(merges) > sizes[group]:
            low, high = min(r for *_, r in merges), max(r for *_, r in merges)
            above = min(math.floor(high * 100 + 1e-9) / 100 + 0.01, 1.0)  # the least 2-decimal value over `high`
            apart = f"; --similarity {above:.2f} merges none of them" if high < 1.0 else ""
            click.echo(visible(f"  note: {group} would keep {sizes[group] - len(merges)} of {sizes[group]} lessons "
                               f"(similarity {low:.2f} to {high:.2f}): lessons written from one template look "
                               f"alike{apart}"))
    click.echo(f"would merge away {len(plan)} of {len(lessons)} lessons (nothing changed)"
               + ("; run again with --apply to merge them, after a backup" if plan else ""))


def _group(lesson) -> str:
    return f"{lesson.failure_type}/{','.join(lesson.labels)}"


def show_prune_plan(plan: list[tuple], total: int) -> None:
    """Print what a prune would remove: a few of the lessons, each with the limit that removes it, and a last
    line saying that nothing changed and how to prune."""
    for lesson, reason in plan[:PRUNE_EXAMPLES]:
        why = (f"beyond --max-count {reason['max_count']}, among the least helpful" if "max_count" in reason else
               " and ".join(text for text, given in (
                   (f"older than {reason['max_age_days']:g} days", reason["max_age_days"] is not None),
                   (f"helped fewer than {reason['min_helped']} times", reason["min_helped"] is not None)) if given))
        click.echo(f"{lesson_line(lesson)}\n   would go: {why}")
    if len(plan) > PRUNE_EXAMPLES:
        click.echo(f"... and {len(plan) - PRUNE_EXAMPLES} more")
    click.echo(f"would prune {len(plan)} of {total} lessons (nothing changed)"
               + ("; run again with --apply to remove them, after a backup" if plan else ""))


def restore_hint(path: str, backup: Path | str, what: str) -> str:
    """How to put the playbook back as the backup holds it (a PostgreSQL playbook's backup is another schema)."""
    if isinstance(backup, str) and "://" in backup:  # (a schema is not renamed: its triggers name it)
        from playground.plugins.playbook.postgres import Location

        book, kept = Location(path), Location(backup)
        return (f"to undo the {what}, with nothing using the playbook: DROP SCHEMA \"{book.schema}\" CASCADE in "
                f"its database (psql), then: playground playbook copy {shlex.quote(kept.shown)} "
                f"{shlex.quote(book.shown)} (with your user in place of ***)")
    live = " ".join(shlex.quote(f"{path}{side}") for side in ("-wal", "-shm"))
    return (f"to undo the {what}, with nothing using the playbook: rm -f {live} && "
            f"mv {shlex.quote(str(backup))} {shlex.quote(path)}")


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (False for a captured stream without `isatty`)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class ImportProgress:
    """An import's progress on stderr (a `store.Progress`): lines read, then lessons done, each stage's first
    and last count and at most one in between per PROGRESS_INTERVAL_S. On a terminal, one line rewritten in
    place; elsewhere (when asked for) a line each time. Nothing when not `enabled`."""

    def __init__(self, source: str, enabled: bool):
        self.source, self.enabled = source, enabled
        self.live = enabled and stderr_is_terminal()
        self.started = time.monotonic()
        self.stage, self.last, self.open = "", 0.0, False

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """Report `done` of `total` (None: not known) in `stage` ("read" or "write"), when it is time to."""
        if not self.enabled:
            return
        now = time.monotonic()
        if stage == self.stage and done != total and now - self.last < PROGRESS_INTERVAL_S:
            return
        self.stage, self.last = stage, now
        of = f" of {total:,}" if total is not None else ""
        text = (f"import: {done:,}{of} lines of {self.source} read" if stage == "read" else
                f"import: {done:,}{of} lessons done" + (f" ({100 * done // total}%)" if total else ""))
        text = visible(f"{text}, {now - self.started:.0f} s")
        if self.live:
            click.echo(f"\r{text}\x1b[K", err=True, nl=False)
            self.open = True
        else:
            click.echo(text, err=True)

    def end(self) -> None:
        """End the line rewritten in place, if there is one."""
        if self.open:
            click.echo("", err=True)
            self.open = False
