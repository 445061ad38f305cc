"""`playground playbook ...`: inspect, search, import, export, merge, prune and copy a playbook (an SQLite file, or a
PostgreSQL URL: `backend`)."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import click

from playground.core.labels import UnknownFailure
from playground.host_api import CLIError, Host, default_labels, pass_host, path_callback, visible
from playground.plugins.playbook.cli_output import (
    ImportProgress,
    lesson_line,
    restore_hint,
    show_merge_plan,
    show_prune_plan,
    stderr_is_terminal,
)

# A playbook's PATH takes a plain path, or a URL of a scheme a playbook backend registered for `--playbook`; OUT and
# SOURCE are files. A URL (`s3://...`) is refused before anything is opened or made (exit 2).
PLAYBOOK_PATH = functools.partial(path_callback, schemes_of="--playbook")


class PlaybookCLIError(CLIError):
    """A playbook command failed on bad input; exits with code 2."""


def _open(path: str, read_only: bool = False):
    """Open the existing playbook at `path` (PlaybookCLIError when there is none or it cannot be used)."""
    from playground.plugins.playbook.backend import is_database_url, location_problem, playbook_exists, shown
    from playground.plugins.playbook.store import Playbook, PlaybookError

    if is_database_url(path) and not playbook_exists(path):
        raise PlaybookCLIError(location_problem(path) or f"no playbook at {shown(path)!r}")
    if not is_database_url(path) and not Path(path).exists():
        raise PlaybookCLIError(f"no playbook at {path!r}")
    try:
        return Playbook(path, read_only=read_only)
    except PlaybookError as exc:
        raise PlaybookCLIError(str(exc)) from None


@click.group("playbook")
def playbook_group() -> None:
    """Inspect and maintain a playbook of recovery lessons (an SQLite file, or postgresql://... URL)."""


@playbook_group.command("stats")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--json", "as_json", is_flag=True, help="print the counts as JSON")
def stats_command(path: str, as_json: bool) -> None:
    """Counts by failure type and label, by the env the lessons were written on, and counter totals."""
    with _open(path, read_only=True) as playbook:
        stats = playbook.stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    counters = stats["counters"]
    click.echo(visible(f"{stats['path']}: {stats['count']} lessons, {stats['changes']} changes logged; "
                       f"retrieved {counters['retrieved']}, verified {counters['verified']}, "
                       f"helped {counters['helped']}"))
    if stats["by_env"]:
        unrecorded = stats["count"] - sum(stats["by_env"].values())
        click.echo(visible("envs (from the lessons' provenance): "
                           + ", ".join(f"{env} {count}" for env, count in stats["by_env"].items())
                           + (f", none recorded {unrecorded}" if unrecorded else "")))
    rows = [(failure_type, label, count) for failure_type, labels in stats["by_label"].items()
            for label, count in labels.items()]
    if rows:
        width = max(len(f"{t}/{label}") for t, label, _ in rows)
        click.echo(f"{'failure type/label':<{width}}  lessons")
        for failure_type, label, count in rows:
            click.echo(visible(f"{failure_type + '/' + label:<{width}}  {count:>7}"))


@playbook_group.command("show")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--type", "failure_type", default=None, help="only this failure type")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def show_command(path: str, failure_type: str | None, limit: int, as_json: bool) -> None:
    """List lessons, oldest first."""
    with _open(path, read_only=True) as playbook:
        shown = 0
        for lesson in playbook.all():
            if failure_type and lesson.failure_type != failure_type:
                continue
            click.echo(json.dumps(lesson.to_dict()) if as_json else lesson_line(lesson))
            shown += 1
            if shown >= limit:
                break


@playbook_group.command("retrieve")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--type", "failure_type", required=True, help="failure type, e.g. progress")
@click.option("--labels", required=True, help="comma-separated labels, e.g. repetition_or_looping")
@click.option("-k", type=click.IntRange(min=1), default=5, show_default=True, help="lessons at most")
@click.option("--json", "as_json", is_flag=True)
def retrieve_command(path: str, failure_type: str, labels: str, k: int, as_json: bool) -> None:
    """Show the lessons Sentry would retrieve for a failure, and why each was chosen."""
    wanted = tuple(label.strip() for label in labels.split(",") if label.strip())
    try:
        default_labels().check(failure_type, wanted)
    except UnknownFailure as exc:
        raise PlaybookCLIError(str(exc)) from None
    with _open(path, read_only=True) as playbook:
        picked = playbook.retrieve(failure_type, wanted, k, count=False)
    for rank, item in enumerate(picked, 1):
        if as_json:
            click.echo(json.dumps({"rank": rank, "reason": item.reason, "shared_labels": list(item.shared_labels),
                                   **item.lesson.to_dict()}))
        else:
            click.echo(f"{rank}. {item.reason}\n   {lesson_line(item.lesson)}")
    if not picked:
        click.echo(f"no lessons of type {failure_type!r}", err=True)


@playbook_group.command("export")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.argument("out", callback=path_callback)
@click.option("--force", is_flag=True, help="replace OUT if it exists (never the playbook itself)")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "ace"]), default="jsonl", show_default=True)
def export_command(path: str, out: str, force: bool, fmt: str) -> None:
    """Write every lesson to OUT as JSONL or an ACE playbook (a new file unless --force; written whole, then
    renamed into place)."""
    from playground.host_api import check_output

    with _open(path, read_only=True) as playbook:
        check_output(out, force=force, inputs=[path], what="export file")
        count = playbook.export_jsonl(out) if fmt == "jsonl" else playbook.export_ace(out)
    click.echo(f"exported {count} lessons to {out}")


@playbook_group.command("import")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.argument("source", callback=path_callback)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "ace"]), default="jsonl", show_default=True)
@click.option("--strict", is_flag=True,
              help="ACE: refuse the whole file over any line it cannot use (default: skip such lines, as ACE does, "
                   "with a warning naming each)")
@click.option("--progress/--no-progress", default=None,
              help="report lines read and lessons written on stderr, about once a second [default: on when stderr "
                   "is a terminal]")
def import_command(path: str, source: str, fmt: str, strict: bool, progress: bool | None) -> None:
    """Import lessons from SOURCE: JSONL (all or nothing), or an ACE playbook (unusable lines skipped, named).
    Complete or not at all: stopped midway (Ctrl-C, a kill, an error), it leaves PATH as it was, or absent."""
    from playground.plugins.playbook.backend import is_database_url, playbook_exists
    from playground.plugins.playbook.store import PlaybookError, import_file

    if not Path(source).is_file():
        raise PlaybookCLIError(f"no file at {source!r}")
    existed = playbook_exists(path) if is_database_url(path) else Path(path).exists()
    reporter = ImportProgress(source, stderr_is_terminal() if progress is None else progress)
    try:
        report = import_file(path, source, fmt=fmt, strict=strict, progress=reporter)
    except PlaybookError as exc:
        raise PlaybookCLIError(str(exc)) from None
    except KeyboardInterrupt:
        reporter.end()
        click.echo(f"import stopped: nothing imported; {path} is as it was" if existed else
                   f"import stopped: nothing imported; no playbook was made at {path}", err=True)
        raise
    finally:
        reporter.end()
    for problem in report.skipped:
        click.echo(f"warning: {source}: {problem} (skipped)", err=True)
    skipped = f" ({len(report.skipped)} line(s) skipped)" if report.skipped else ""
    held = f"; {report.already_held} already in the playbook, not added again" if report.already_held else ""
    click.echo(f"imported {report.imported} lessons from {source}{skipped}{held}")


@playbook_group.command("merge")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--similarity", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.9, show_default=True)
@click.option("--apply", "apply_", is_flag=True,
              help="merge, after writing a backup of the playbook beside it (default: only show what would merge)")
@click.option("--dry-run", is_flag=True, help="show every merge, not a few per group, and change nothing")
def merge_command(path: str, similarity: float, apply_: bool, dry_run: bool) -> None:
    """Merge near-duplicate lessons (same type and labels, similar text). Without --apply, only shows what would
    be merged: the groups, their counts and a few examples. With --apply, first writes a backup beside PATH
    (PATH.bak-<time>) and says how to restore it. Each lesson merged away also keeps its full record in the
    change log (`playground playbook log PATH`), from which it can be imported again."""
    if dry_run and apply_:
        raise PlaybookCLIError("--dry-run and --apply contradict each other; give one")
    if not apply_:
        with _open(path, read_only=True) as playbook:
            plan = playbook.merge_plan(similarity)
            lessons = {lesson.id: lesson for lesson in playbook.all()}
        show_merge_plan(plan, lessons, every=dry_run)
        return
    with _open(path) as playbook:
        plan = playbook.merge_plan(similarity)
        if not plan:
            click.echo("merged away 0 near-duplicate lessons (nothing to merge; no backup written)")
            return
        backup = _backup(playbook)
        removed = playbook.merge(similarity, plan)
    click.echo(f"merged away {removed} near-duplicate lessons (their records are in the change log)")
    click.echo(restore_hint(path, backup, "merge"))


@playbook_group.command("prune")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--max-age-days", type=click.FloatRange(min=0), default=None)
@click.option("--min-helped", type=click.IntRange(min=0), default=None)
@click.option("--max-count", type=click.IntRange(min=0), default=None)
@click.option("--apply", "apply_", is_flag=True,
              help="remove them, after writing a backup of the playbook beside it (default: only show what would go)")
def prune_command(path: str, max_age_days: float | None, min_helped: int | None, max_count: int | None,
                  apply_: bool) -> None:
    """Remove lessons older than --max-age-days that helped fewer than --min-helped times, then the least helpful
    beyond --max-count. Without --apply, only shows what would be removed; with --apply, first writes a backup
    beside PATH (PATH.bak-<time>) and says how to restore it."""
    if max_age_days is None and min_helped is None and max_count is None:
        raise PlaybookCLIError("prune needs at least one of --max-age-days, --min-helped, --max-count")
    limits = {"max_age_days": max_age_days, "min_helped": min_helped, "max_count": max_count}
    if not apply_:
        with _open(path, read_only=True) as playbook:
            plan, total = playbook.prune_plan(**limits), len(playbook)
        show_prune_plan(plan, total)
        return
    with _open(path) as playbook:
        if not playbook.prune_plan(**limits):
            click.echo("pruned 0 lessons (nothing to prune; no backup written)")
            return
        backup = _backup(playbook)
        removed = playbook.prune(**limits)
    click.echo(f"pruned {removed} lessons (their records are in the change log)")
    click.echo(restore_hint(path, backup, "prune"))


def _backup(playbook) -> Path | str:
    """Write the playbook's backup beside it and say where, before a change in place."""
    from playground.plugins.playbook.backend import shown
    from playground.plugins.playbook.store import PlaybookError

    try:
        backup = playbook.backup()
    except PlaybookError as exc:
        raise PlaybookCLIError(f"no backup could be written, so nothing was changed: {exc}") from None
    click.echo(f"backup: {shown(backup)} (the playbook as it was)")
    return backup


@playbook_group.command("copy")
@click.argument("source", callback=PLAYBOOK_PATH)
@click.argument("target", callback=PLAYBOOK_PATH)
@pass_host
def copy_command(host: Host, source: str, target: str) -> None:
    """Copy the whole playbook SOURCE (lessons with their ids and counters, origins, change log) to a new playbook
    TARGET: an SQLite file to a PostgreSQL URL, back, or between the same kind. TARGET must hold no playbook yet;
    the copy is made whole or not at all, and its export is byte for byte SOURCE's. What other plugins keep beside
    the playbook (the baselines' memories) is copied with it, through the host's `copy_playbook` hook."""
    from playground.plugins.playbook.backend import shown
    from playground.plugins.playbook.store import PlaybookError

    with _open(source, read_only=True) as playbook:  # a playbook, or a named error
        count = len(playbook)
    try:
        copied = host.pm.hook.copy_playbook(source=source, target=target)
    except PlaybookError as exc:
        raise PlaybookCLIError(str(exc)) from None
    if not copied:
        raise PlaybookCLIError(f"no loaded plugin copies the playbook at {shown(source)!r}")
    click.echo(f"copied {count} lessons from {shown(source)} to {shown(target)}")


@playbook_group.command("log")
@click.argument("path", callback=PLAYBOOK_PATH)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
def log_command(path: str, limit: int) -> None:
    """Show the change log, oldest first."""
    with _open(path, read_only=True) as playbook:
        for number, change in enumerate(playbook.changes()):
            if number >= limit:
                break
            click.echo(json.dumps(dataclasses.asdict(change), default=str))
