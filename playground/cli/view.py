"""`playground view`: browse a run directory in the terminal (built on rich).

Without `--episode` it lists episodes from DIR/episodes.jsonl alone, filtered by harness,
status, task and failure label, a page at a time, so a run of 10,000 episodes shows its
first page at once. With `--episode` it reads that one episode's trace and shows it step
by step: each proposal (the action, the thought, the message the agent was shown),
detections, interventions, rollbacks, the env's answer, verifier verdicts and the lessons
stored, each kind in its own colour (what each event says comes from `playground.run.event_text`, shared with
the HTML transcripts; this module only colours and lays it out). An episode that ended in an error shows its one-line
cause in the list. Output longer than the terminal goes through the pager (`$PAGER`, else
`less`) when stdout is a terminal, unless `--no-pager`.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

import click
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from playground.cli.options import CLIError
from playground.cli.terminal import visible, visible_data
from playground.core.events import Event, HeaderEvent, map_strings
from playground.core.records import EpisodeRecord, RecordError, read_record
from playground.core.run_summary import read_summary
from playground.run.event_text import Description, attempt_heading, describe_event, interventions
from playground.run.report import complete_record, error_cause
from playground.run.rundir import RunDirError, describe_problems, load_records, record_trace
from playground.run.traces import read_events

STATUS_STYLE = {"won": "bold green", "lost": "red", "error": "bold red", "truncated": "yellow", "stopped": "magenta"}


def failure_matches(record: EpisodeRecord, label: str) -> bool:
    """True when the episode detected a failure whose type, label or `type/label` is `label`."""
    for key in record.failures:
        failure_type, _, name = key.partition("/")
        if label in (key, failure_type, name):
            return True
    return False


def select(records: Iterable[EpisodeRecord], run_path: Path, harness: str | None = None, status: str | None = None,
           label: str | None = None, task: str | None = None) -> list[EpisodeRecord]:
    """The records that pass every filter given, in episodes.jsonl order. Only the label filter may read traces,
    and only of records written before episodes carried their failures."""
    out = []
    for record in records:
        if harness is not None and record.harness != harness:
            continue
        if status is not None and record.status != status:
            continue
        if task is not None and record.task_id != task:
            continue
        if label is not None and not failure_matches(complete_record(run_path, record), label):
            continue
        out.append(record)
    return out


def render_list(console: Console, page: Sequence[EpisodeRecord], matching: int, total: int, offset: int = 0,
                run_path: Path | None = None) -> None:
    """Print one page of episodes (the `matching` ones from number `offset`) as a table, and how to see more. With
    `run_path`, the page's records written before episodes carried their failures get them from their traces."""
    page = [complete_record(run_path, r) if run_path is not None else r for r in page]
    table = Table(title=f"{matching} of {total} episodes", title_justify="left", header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("episode", no_wrap=True, min_width=12)
    for column in ("status", "steps", "tokens", "detected", "verified", "lessons"):
        table.add_column(column, justify="right")
    table.add_column("failures", overflow="fold", ratio=1, min_width=12)
    for number, record in enumerate(page, start=offset + 1):
        status = record.status
        tokens = record.prompt_tokens + record.completion_tokens
        labels = ", ".join(sorted({key.partition("/")[2] or key for key in record.failures}))
        cause = error_cause(record)
        failures = Text(labels) if cause is None else Text.assemble(labels + ("; " if labels else ""),
                                                                    (f"error: {cause}", "red"))
        table.add_row(str(number), record.key, Text(status, style=STATUS_STYLE.get(status, "")),
                      str(record.steps), f"{tokens:,}", str(record.detected_failures),
                      str(record.verified_recoveries), str(record.lessons_added), failures)
    console.print(table)
    shown_to = offset + len(page)
    more = f"; --offset {shown_to} for more" if shown_to < matching else ""
    console.print(Text(f"showing {offset + 1 if page else 0}-{shown_to}{more}; --episode NUMBER (or KEY) shows one "
                       "step by step",
                       style="dim"))


def find_episode(records: Sequence[EpisodeRecord], wanted: str) -> EpisodeRecord:
    """The record whose key, episode id or (when only one matches) task id is `wanted`, or the one listed with that
    number (`#` in the list, with the same filters); CLIError otherwise."""
    for record in records:
        if record.key == wanted:
            return record
    for record in records:
        if record.episode_id == wanted:
            return record
    if wanted.isascii() and wanted.isdigit() and not any(record.task_id == wanted for record in records):
        if 1 <= int(wanted) <= len(records):
            return records[int(wanted) - 1]
        raise CLIError(f"no episode number {wanted}: the list has {len(records)} (numbers 1-{len(records)})")
    by_task = [record for record in records if record.task_id == wanted]
    if len(by_task) == 1:
        return by_task[0]
    if by_task:
        raise CLIError(f"episode {wanted!r} is ambiguous: {', '.join(record.key for record in by_task[:10])}; "
                       "name one by its key (or add --harness)")
    raise CLIError(f"no episode {wanted!r} (give a number or a key as listed by `playground view DIR`, an episode id "
                   "or a task id)")


# Each kind's colours: its title's and its subject's (`Description.kind`); a verdict's or an end's outcome overrides.
KIND_STYLE = {"reset": ("bold", ""), "proposal": ("", "bold cyan"), "detection": ("bold red", "red"),
              "intervention": ("bold yellow", "yellow"), "rollback": ("magenta", "magenta"), "step": ("bold", "cyan"),
              "lesson": ("bold magenta", "magenta"), "error": ("bold red", "bold red"), "end": ("bold", "bold")}
OUTCOME_STYLE = {"good": "bold green", "bad": "bold red", **STATUS_STYLE}
BODY_STYLE = {"proposal": "dim italic"}
PANELS = {"reset": "start", "end": "end"}  # kinds shown boxed, with the box's title


def _headline(d: Description, quiet: str = "dim") -> Text:
    """A description's headline in its kind's colours: title, subject, detail (in `quiet`), then its alert in bold
    red."""
    title_style, subject_style = KIND_STYLE.get(d.kind, ("bold", ""))
    if d.outcome in OUTCOME_STYLE:
        title_style = subject_style = OUTCOME_STYLE[d.outcome]
    line = Text.assemble((d.title, title_style))
    for part, style in ((d.subject, subject_style), (d.detail, quiet)):
        if part:
            line.append(" ").append(part, style)
    if d.alert:
        line.append(f"  ({d.alert})", "bold red")
    return line


def _body(d: Description) -> list[str]:
    return [f"{label}: {text}" if label else text for label, text in d.body]


def render_events(console: Console, events: Sequence[Event], full: bool = False) -> None:
    """Print one trace's events step by step as `describe_event` words them (long texts cut unless `full`), each kind in
    its colours; the events a description marks not `shown` (header, prompt, checkpoint, judge_call) are left out."""
    for event in events:
        d = describe_event(event, full)
        if not d.shown:
            continue
        if d.kind in PANELS:
            boxed = Text("\n", style=OUTCOME_STYLE.get(d.outcome, "")).join([_headline(d, ""), *map(Text, _body(d))])
            console.print(Panel(boxed, title=PANELS[d.kind], title_align="left"))
            continue
        head = _headline(d)
        if d.step is not None:  # a proposal opens its step: not indented, the step named first
            console.print(Text.assemble((f"step {d.step}  ", "bold"), head))
        else:
            console.print(Padding(head, (0, 0, 0, 4), expand=False))
        for text in _body(d):
            console.print(Padding(Text(text, style=BODY_STYLE.get(d.kind, "")), (0, 0, 0, 6), expand=False))
        for problem in d.problems:
            console.print(Padding(Text(problem, style="red"), (0, 0, 0, 6), expand=False))


def _visible_events(path: Path) -> list[Event]:
    """A trace's events with every text made safe for the terminal (`visible`)."""
    return [map_strings(event, visible) for event in read_events(path)]


def render_episode(console: Console, run_path: Path, record: EpisodeRecord, full: bool = False) -> None:
    """Print an episode's summary and its trace (each attempt's, for a cascade) step by step."""
    traces = [a.trace for a in record.attempts or []] or [record.trace]
    first = _visible_events(record_trace(run_path, record, trace=traces[0]))
    header = first[0] if first and isinstance(first[0], HeaderEvent) else None
    shown = read_record(visible_data(record.as_json()))
    status = shown.status
    console.print(Panel(Text.assemble(
        (f"{shown.key}  ", "bold"), (status, STATUS_STYLE.get(status, "")),
        f"\nenv {header.env if header else None}:{header.task_set if header else None}  task "
        f"{shown.task_id}  trial {shown.trial}  seed {shown.seed}  agent "
        f"{header.agent if header else None}  interventions {interventions(header) or 'none'}",
        f"\n{shown.steps} steps, {shown.detected_failures} detected, "
        f"{shown.verified_recoveries} verified, {shown.lessons_added} lessons",
        ("\ntrace: " + ", ".join(str(t) for t in traces), "dim")), title="episode", title_align="left"))
    for number, trace in enumerate(traces, start=1):
        events = first if number == 1 else _visible_events(record_trace(run_path, record, trace=trace))
        if len(traces) > 1:
            header = events[0] if events and isinstance(events[0], HeaderEvent) else None
            console.rule(attempt_heading(number, header))
        render_events(console, events, full)


@click.command("view")
@click.argument("run_dir")
@click.option("--episode", default=None, help="show this episode step by step (its key, episode id or task id)")
@click.option("--harness", default=None, help="only episodes of this harness")
@click.option("--status", default=None, help="only episodes that ended so (won, lost, truncated, stopped, error)")
@click.option("--label", default=None, help="only episodes that detected this failure label or type")
@click.option("--task", default=None, help="only episodes of this task")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="episodes listed")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="episodes skipped")
@click.option("--full", is_flag=True, help="show long texts whole")
@click.option("--no-pager", "no_pager", is_flag=True,
              help="print everything at once, even when it is longer than the terminal")
def view_command(run_dir: str, episode: str | None, harness: str | None, status: str | None, label: str | None,
                 task: str | None, limit: int, offset: int, full: bool, no_pager: bool) -> None:
    """Browse a run directory: list its episodes (filtered), or show one step by step. Output longer than the
    terminal is paged (`$PAGER`, else less) unless --no-pager."""
    path = Path(run_dir)
    note = interrupted_note(path)

    def listing(console: Console, page: Sequence[EpisodeRecord], matching: int, total: int) -> None:
        if note:
            console.print(Text(note, style="bold yellow"))
        render_list(console, page, matching, total, offset, path)

    if episode is None and harness is None and status is None and label is None and task is None:
        page, total = read_page(path, offset, limit)  # no filter: parse only the page shown
        show(lambda console: listing(console, visible_data(page), total, total), not no_pager)
        return
    records = load_records(path)
    chosen = select(records, path, harness, status, label, task)
    if episode is None:
        page = visible_data(chosen[offset:offset + limit])
        show(lambda console: listing(console, page, len(chosen), len(records)), not no_pager)
        return
    record = find_episode(chosen, episode)
    show(lambda console: render_episode(console, path, record, full), not no_pager)


def interrupted_note(run_path: Path) -> str | None:
    """A line saying the run was interrupted, when its summary.json says so (`interrupted: true`, written when a run
    is stopped by Ctrl-C, SIGTERM or SIGHUP), else None (no summary, or an unreadable one)."""
    try:
        summary = read_summary(json.loads((run_path / "summary.json").read_bytes()))
    except (OSError, ValueError, RecursionError):  # SummaryError is a ValueError
        return None
    if not summary.interrupted:
        return None
    recorded = sum(figures.episodes for figures in summary.harnesses.values())
    return (f"interrupted: this run was stopped before its end; summary.json covers the {recorded} episode(s) "
            "recorded. Rerun the same command to resume")


def show(render: Callable[[Console], None], pager: bool = True) -> None:
    """Print what `render` draws on a console: through the pager when `pager`, stdin and stdout are terminals and it
    is longer than the terminal (`needs_pager`); else straight to stdout."""
    console = Console(highlight=False)
    if not (pager and sys.stdin.isatty() and sys.stdout.isatty()):
        render(console)
        return
    with console.capture() as captured:
        render(console)
    text = captured.get()
    if needs_pager(text, shutil.get_terminal_size().lines):
        click.echo_via_pager(text)
    else:
        click.echo(text, nl=False)


def needs_pager(text: str, lines: int) -> bool:
    """Whether `text` is longer than a terminal of `lines` lines (one kept for the prompt)."""
    return text.count("\n") > lines - 1


def read_page(run_path: Path, offset: int, limit: int) -> tuple[list[EpisodeRecord], int]:
    """The records of episodes.jsonl from `offset` (at most `limit`), and how many records it holds; only the page's
    lines are parsed (RunDirError names a bad one and how to recover)."""
    path = run_path / "episodes.jsonl"
    try:
        if not path.is_file():
            raise RunDirError(f"no episodes.jsonl in {str(run_path)!r}: not a run directory")
        data = path.read_bytes()
    except OSError as exc:  # a name too long for the file system, a folder that cannot be read
        raise RunDirError(f"cannot read {str(run_path)!r}: {exc.strerror or exc}") from None
    lines = [(number, raw) for number, raw in enumerate(data.split(b"\n")[:-1], start=1) if raw.strip()]
    page, problems = [], []
    for number, raw in lines[offset:offset + limit]:
        try:
            page.append(read_record(json.loads(raw.decode("utf-8"))))
        except RecordError as exc:
            problems.append((number, str(exc), raw))
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON
            problems.append((number, f"not valid JSON ({exc})", raw))
    if problems:
        raise RunDirError(describe_problems(path, problems, repairable=False))
    return page, len(lines)
