"""`playground report`: one self-contained HTML file about one or more run directories.

Everything is inline (CSS, SVG charts from `playground.run.svg`, a few lines of script to
filter the episode table): no server, no network. The figures come from the episode
records (the same `summarise_harness` that writes summary.json); records written before a
count existed are completed from their traces (`tally_trace`). Each episode links to its
transcript, a page written next to the report (`REPORT-transcripts/RUN/KEY.html`, see
`playground.run.transcript`) from its trace, by a `./`-relative path; an episode that ended
in an error shows its one-line cause.

Sections: the runs (env, agent, seed, budget, trials, lock); a table per harness; success
and mean score with 95% intervals (Wilson for success, bootstrap for score); solved
episodes against the step budget; cost against success; playbook growth over episodes
(lessons added, lessons retrieved, repairs verified, repairs that showed lessons and were
verified: "helped"); detected failures by type and label with the share of their repairs
verified resolved; tokens per episode; the episode list.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Sequence

from playground.core.events import Event, HeaderEvent
from playground.core.records import EpisodeRecord
from playground.core.run_summary import read_summary
from playground.run import svg
from playground.run.event_text import attempt_heading
from playground.run.files import TEXT_ERRORS, OutputError, PathEscapeError, atomic_write_text, confined, safe_file_name
from playground.run.judge_quality import flags_html
from playground.run.lock import LOCK_FILE, LockError, read_lock
from playground.run.report import (
    complete_record,
    error_cause,
    merge_failures,
    merge_judge_replies,
    score_ratios,
    summarise_harness,
    wilson_interval,
)
from playground.run.rundir import RunDirError, load_records, read_config
from playground.run.stats import bootstrap_ci
from playground.run.traces import TraceError, read_events
from playground.run.transcript import render_transcript

GROWTH = (("lessons_added", "lessons added", "#2ca02c"), ("lessons_retrieved", "lessons retrieved", "#1f77b4"),
          ("verified_recoveries", "repairs verified", "#9467bd"), ("lessons_helped", "helped", "#d62728"))


@dataclass
class Run:
    """One run directory: its path, label, config, lock (None when it has none) and records."""

    path: Path
    label: str
    config: dict[str, Any]
    lock: dict[str, Any] | None
    records: list[EpisodeRecord]
    interrupted: bool = False  # its summary.json says it was stopped before its end (Ctrl-C, SIGTERM, SIGHUP)


@dataclass
class Series:
    """One harness of one run: what every chart draws a line, bar or point for."""

    name: str
    run: Run
    harness: str
    records: list[EpisodeRecord]
    figures: dict[str, Any]
    color: str


def load_run(path: str | Path, label: str) -> Run:
    """Read a run directory (RunDirError names what is wrong with it)."""
    path = Path(path)
    records = load_records(path)
    config = read_config(path / "config.json") if (path / "config.json").is_file() else {}
    lock = None
    if (path / LOCK_FILE).is_file():
        try:
            lock = read_lock(path / LOCK_FILE)
        except LockError:
            lock = None
    try:
        interrupted = read_summary(json.loads((path / "summary.json").read_bytes())).interrupted
    except (OSError, ValueError, RecursionError):  # SummaryError is a ValueError
        interrupted = False
    return Run(path, label, config, lock, [complete_record(path, r) for r in records], interrupted)



def build_series(runs: Sequence[Run]) -> list[Series]:
    """One series per harness of each run; named by harness alone for one run, else `run-label/harness`."""
    series: list[Series] = []
    for run in runs:
        harnesses = list(run.config.get("harnesses") or [])
        by_harness: dict[str, list[EpisodeRecord]] = {}
        for record in run.records:
            by_harness.setdefault(record.harness, []).append(record)
        for harness in harnesses + [h for h in by_harness if h not in harnesses]:
            records = list(by_harness.get(harness, []))
            if not records:
                continue
            name = harness if len(runs) == 1 else f"{run.label}/{harness}"
            series.append(Series(name, run, harness, records, summarise_harness(records), svg.color(len(series))))
    return series


def run_labels(paths: Sequence[str | Path]) -> list[str]:
    """Short distinct labels for run directories: their folder names, numbered where two share one."""
    names = [Path(p).resolve().name or str(p) for p in paths]
    return [name if names.count(name) == 1 else f"{name}#{i + 1}" for i, name in enumerate(names)]


@dataclass
class TranscriptPage:
    """An episode's transcript page, to be written at `path`: the record, its run and its trace files (inside the
    run), and the link back to the report."""

    path: Path
    run: Run
    record: EpisodeRecord
    traces: list[Path]
    back: str

    def write(self) -> None:
        """Render the traces and write the page (a trace that cannot be read is named on the page)."""
        attempts: list[tuple[str, list[Event]]] = []
        problems: list[str] = []
        headers: list[HeaderEvent | None] = []
        for number, trace in enumerate(self.traces, start=1):
            try:
                events = read_events(trace)
            except TraceError as exc:
                events, problems = [], [*problems, str(exc)]
            header = events[0] if events and isinstance(events[0], HeaderEvent) else None
            headers.append(header)
            heading = attempt_heading(number, header) if len(self.traces) > 1 else ""
            attempts.append((heading, events))
        first = headers[0] if headers else None
        record = self.record
        facts = [("run", f"{self.run.label} ({self.run.path})"), ("harness", record.harness),
                 ("task", record.task_id), ("trial", record.trial), ("seed", record.seed),
                 ("env", f"{first.env if first else '?'}:{first.task_set if first else '?'}"),
                 ("agent", first.agent if first else None),
                 ("status", record.status), ("steps", record.steps),
                 ("detected", record.detected_failures),
                 ("interventions", sum(record.interventions.values())),
                 ("verified", record.verified_recoveries), ("lessons", record.lessons_added),
                 ("trace", ", ".join(str(t.relative_to(self.run.path)) for t in self.traces))]
        if error_cause(record):
            facts.insert(8, ("error", error_cause(record, width=400)))
        facts += [("unreadable", problem) for problem in problems]
        html = render_transcript(record.key, facts, attempts, self.back)
        try:  # a plain write (no fsync): a page torn by an interrupt is written again by the next report
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(html, encoding="utf-8", errors=TEXT_ERRORS)
        except OSError as exc:
            raise OutputError(f"cannot write the transcript {str(self.path)!r}: {exc.strerror or exc}") from None


def transcripts_folder(out: str | Path) -> Path:
    """The folder of the report `out`'s transcript pages: REPORT-transcripts next to it."""
    out = Path(out)
    return out.with_name(out.stem + "-transcripts")


def build_report(paths: Sequence[str | Path], out: str | Path, pages: list[TranscriptPage] | None = None) -> str:
    """The report's HTML for the run directories `paths`, with transcript links relative to the file `out`; the
    transcript pages it links to are added to `pages` (for `write_report` to write)."""
    if not paths:
        raise RunDirError("name at least one run directory")
    runs = [load_run(path, label) for path, label in zip(paths, run_labels(paths))]
    series = build_series(runs)
    if not series:
        raise RunDirError(f"no episodes recorded in {', '.join(map(str, paths))}")
    sections = [
        ("Runs", _runs_section(runs)),
        ("Harnesses", _table_section(series)),
        ("Success and mean score (95% intervals)", _success_section(series)),
        ("Solved episodes against the step budget", _budget_section(series, runs)),
        ("Cost against success", _cost_section(series)),
        ("Playbook growth over episodes", _growth_section(series)),
        ("Detected failures by type and label", _failures_section(series)),
        ("Tokens per episode", _tokens_section(series)),
        ("Judges graded against the injected truth", _graded_judges_section(series)),
        ("Episodes", _episodes_section(series, Path(out).resolve(), [] if pages is None else pages)),
    ]
    body = "".join(f'<section id="{_anchor(title)}"><h2>{escape(title)}</h2><div class="wide">{html}</div></section>'
                   for title, html in sections)
    nav = " · ".join(f'<a href="#{_anchor(title)}">{escape(title)}</a>' for title, _ in sections)
    title = "playground report: " + ", ".join(run.label for run in runs)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
            f"<p class=\"meta\">written {escape(time.strftime('%Y-%m-%d %H:%M:%S'))}; {len(series)} harness(es), "
            f"{sum(len(s.records) for s in series)} episodes</p>{_interrupted_banner(runs)}<nav>{nav}</nav>{body}"
            f"<script>{SCRIPT}</script></body></html>\n")


def _interrupted_banner(runs: Sequence[Run]) -> str:
    """A line per run that was interrupted: its figures are those of the episodes recorded before the stop."""
    return "".join(f'<p class="interrupted">run {escape(run.label)} was interrupted: stopped before its end, it shows '
                   f"the {len(run.records)} episode(s) recorded; rerun its command to resume</p>"
                   for run in runs if run.interrupted)


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}%}"


def _interval(pair: Sequence[float] | None) -> str:
    return "" if not pair else f"[{_pct(pair[0])}, {_pct(pair[1])}]"


def _score_interval(records: list[EpisodeRecord]) -> tuple[float, float] | None:
    ratios = score_ratios(records)
    return bootstrap_ci(ratios, resamples=2000, seed=0) if ratios else None


def _tokens(record: EpisodeRecord) -> int:
    return record.prompt_tokens + record.completion_tokens


def _model(config: dict, lock: dict) -> str:
    """The model the agent ran: the endpoint's model name, else the model file the lock names, else "–"."""
    options = config.get("agent_options") or {}
    if isinstance(options, dict) and options.get("model"):
        return str(options["model"])
    model_file = ((lock.get("agent") or {}).get("model_file") or {}).get("path")
    return Path(str(model_file)).name if model_file else "–"


def _runs_section(runs: Sequence[Run]) -> str:
    rows = []
    for run in runs:
        c, lock = run.config, run.lock or {}
        git = (lock.get("playground") or {}).get("git") or {}
        commit = (git.get("commit") or "")[:12] + (" (modified)" if git.get("dirty") else "")
        rows.append("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in (
            run.label, str(run.path), f"{c.get('env', '?')}:{c.get('task_set', '?')} {c.get('split', '')}",
            c.get("agent", "?"), _model(c, lock), len(c.get("tasks") or []), c.get("trials", 1), c.get("seed", "?"),
            c.get("max_steps", "?"), (lock.get("playground") or {}).get("version", "no lock.json"), commit or "–",
        )) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("run", "directory", "env", "agent", "model", "tasks", "trials", "seed",
                                             "step budget", "playground", "commit"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _table_section(series: Sequence[Series]) -> str:
    head = ("harness", "episodes", "success", "95% CI", "mean score", "steps", "invalid/ep", "interventions/ep",
            "tokens/ep", "judge tokens/ep", "detected", "verified", "resolved", "lessons", "errors", "pass^k",
            "flip rate", "noise floor")
    rows = []
    for s in series:
        f = s.figures
        pass_k = ""
        if f.get("pass_k"):
            k = max(f["pass_k"], key=int)
            pass_k = f"{_pct(f['pass_k'][k])} (k={k})"
        tokens = (f["prompt_tokens"] + f["completion_tokens"]) / f["episodes"] if f["episodes"] else 0
        judge_tokens = f.get("judge_tokens_per_episode") or 0
        cells = (f'<span class="swatch" style="background:{s.color}"></span>{escape(s.name)}', f["episodes"],
                 _pct(f["success_rate"]), _interval(f["success_ci95"]), _pct(f["mean_score"]),
                 f"{f['mean_steps']:.2f}", f"{f.get('invalid_actions_per_episode') or 0:.2f}",
                 f"{sum((f.get('interventions') or {}).values()) / f['episodes'] if f['episodes'] else 0:.2f}",
                 f"{tokens:,.0f}", f"{judge_tokens:,.0f}", f["detected_failures"],
                 f["verified_recoveries"],
                 _pct(f["resolved_share"]), f["lessons_added"], f["errors"], pass_k or "–",
                 _pct(f.get("flip_rate")), _pct(f.get("noise_floor")))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    note = ("<p class=\"note\">success: share of episodes won (Wilson 95% interval); mean score: score / max score "
            "over all episodes, one the env did not score counted as 0; judge tokens: what the interventions' model "
            "roles spent; resolved: repairs a verifier judged resolved among all verdicts; "
            "pass^k, flip rate and noise floor appear with repeated trials (<code>--trials</code>).</p>")
    return (f"<table><thead><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr></thead><tbody>{''.join(rows)}"
            f"</tbody></table>{flags_html((s.name, s.figures) for s in series)}{note}")


def _success_section(series: Sequence[Series]) -> str:
    success = [(s.name, s.figures["success_rate"], *s.figures["success_ci95"], s.color) for s in series]
    scores = []
    for s in series:
        interval = _score_interval(s.records)
        scores.append((s.name, s.figures["mean_score"], *(interval or (None, None)), s.color))
    charts = svg.interval_bars(success, "success rate (Wilson 95% interval)")
    if any(value is not None for _, value, *_ in scores):
        charts += svg.interval_bars(scores, "mean score / max score (bootstrap 95% interval)")
    else:
        charts += "<p class=\"note\">no env in these runs reports a score.</p>"
    return charts


def _budget_section(series: Sequence[Series], runs: Sequence[Run]) -> str:
    budget = max([int(r.config.get("max_steps") or 0) for r in runs]
                 + [record.steps for s in series for record in s.records])
    lines = []
    for s in series:
        won = sorted(record.steps for record in s.records if record.won)
        points, count = [], 0
        for b in range(budget + 1):
            while count < len(won) and won[count] <= b:
                count += 1
            points.append((float(b), float(count)))
        lines.append((s.name, points, s.color))
    chart = svg.line_chart(lines, "step budget (env steps)", "episodes solved within it", step=True)
    return chart + svg.legend([s.name for s in series], [s.color for s in series]) + (
        "<p class=\"note\">each curve counts the episodes won in at most that many env steps.</p>")


def _cost_section(series: Sequence[Series]) -> str:
    tokens = [sum(_tokens(r) for r in s.records) / len(s.records) for s in series]
    if all(t > 0 for t in tokens):
        unit, costs = "tokens per episode", tokens
    else:
        unit, costs = "env steps per episode", [s.figures["mean_steps"] for s in series]
    points = [(s.name, cost, s.figures["success_rate"], *s.figures["success_ci95"], s.color)
              for s, cost in zip(series, costs)]
    return svg.scatter(points, f"mean cost ({unit})", "success rate") + (
        f"<p class=\"note\">cost: mean {escape(unit)} (tokens when every harness reports them); whiskers: "
        "Wilson 95% interval of the success rate. Harnesses built from a policy (a name with a prefix) are "
        "points like any other.</p>")


def _growth_section(series: Sequence[Series]) -> str:
    parts = []
    for s in series:
        totals = {key: sum(int(getattr(record, key) or 0) for record in s.records) for key, _, _ in GROWTH}
        if not any(totals.values()):
            continue
        lines = []
        for key, label, stroke in GROWTH:
            running, points = 0, [(0.0, 0.0)]
            for i, record in enumerate(s.records, start=1):
                running += int(getattr(record, key) or 0)
                points.append((float(i), float(running)))
            lines.append((f"{label} ({totals[key]})", points, stroke))
        parts.append(f"<h3>{escape(s.name)}</h3>" + svg.line_chart(lines, "episodes, in the order they finished",
                                                                    "cumulative count", height=240)
                     + svg.legend([name for name, _, _ in lines], [c for _, _, c in lines]))
    if not parts:
        return "<p class=\"note\">no harness in these runs added, retrieved or verified a lesson.</p>"
    return "".join(parts) + (
        "<p class=\"note\">from trace events: lessons added (<code>lesson</code>), lessons retrieved (lesson ids an "
        "<code>intervention</code> showed the agent), repairs verified (<code>verification</code> resolved), helped "
        "(repairs that showed lessons and were verified resolved).</p>")


def _failures_section(series: Sequence[Series]) -> str:
    by_series = {s.name: merge_failures(s.records) for s in series}
    keys = sorted({key for failures in by_series.values() for key in failures})
    if not keys:
        return "<p class=\"note\">no failure was detected in these runs.</p>"
    rows = []
    for key in keys:
        segments = [(float(by_series[s.name].get(key, {}).get("detected", 0)), s.color,
                     f"{s.name}: {by_series[s.name].get(key, {}).get('detected', 0)} detected") for s in series]
        rows.append((key, segments))
    chart = svg.stacked_bars(rows, "detections (coloured by harness)")
    head = "".join(f"<th colspan=\"2\">{escape(s.name)}</th>" for s in series)
    sub = "".join("<th>detected</th><th>resolved</th>" for _ in series)
    body = []
    for key in keys:
        cells = []
        for s in series:
            counts = by_series[s.name].get(key, {})
            verdicts = counts.get("resolved", 0) + counts.get("unresolved", 0)
            share = f"{counts.get('resolved', 0) / verdicts:.0%} of {verdicts}" if verdicts else "–"
            cells.append(f"<td>{counts.get('detected', 0)}</td><td>{share}</td>")
        body.append(f"<tr><td>{escape(key)}</td>{''.join(cells)}</tr>")
    table = (f"<table><thead><tr><th rowspan=\"2\">failure type/label</th>{head}</tr><tr>{sub}</tr></thead>"
             f"<tbody>{''.join(body)}</tbody></table>")
    return chart + svg.legend([s.name for s in series], [s.color for s in series]) + table + (
        "<p class=\"note\">resolved: the share of the verifier's verdicts on repairs of that failure that were "
        "\"resolved\" (a verdict counts for the labels detected with its failure type at its repair step).</p>")


def _tokens_section(series: Sequence[Series]) -> str:
    if not any(_tokens(r) for s in series for r in s.records):
        return "<p class=\"note\">no tokens recorded: the agent in these runs reports none.</p>"
    lines = [(s.name, [(float(i), float(_tokens(r))) for i, r in enumerate(s.records, start=1)], s.color)
             for s in series]
    means = "".join(f"<li>{escape(s.name)}: {sum(_tokens(r) for r in s.records) / len(s.records):,.0f} tokens per "
                    "episode (prompt + completion)</li>" for s in series)
    return (svg.line_chart(lines, "episodes, in the order they finished", "tokens (prompt + completion)")
            + svg.legend([s.name for s in series], [s.color for s in series]) + f"<ul>{means}</ul>")


def _graded_judges_section(series: Sequence[Series]) -> str:
    """Each model role's share of right replies (95% interval) where a failure-injection instrument graded them."""
    rows = []
    for s in series:
        for role, counts in merge_judge_replies(s.records).items():
            if counts.get("graded"):
                low, high = wilson_interval(counts["right"], counts["graded"])
                rows.append((f"{s.name}: {role} ({counts['graded']} graded)", counts["right"] / counts["graded"],
                             low, high, s.color))
    if not rows:
        return "<p class=\"note\">no graded judge calls: no failure-injection instrument played the judges.</p>"
    return svg.interval_bars(rows, "share of the role's replies that were right (instrument figures)")


def _transcript_link(s: Series, record: EpisodeRecord, out: Path, pages: list[TranscriptPage]) -> str:
    """A link to the episode's transcript page, by a path relative to the report `out` ("./..." so that no part of
    it can read as a URL scheme such as "javascript:"), and the page added to `pages`. A record whose trace is
    missing, or names a file outside the run, gets no link."""
    traces = [a.trace for a in record.attempts or []] or [record.trace]
    files = []
    for trace in traces:
        if not isinstance(trace, str):
            return "–"
        try:
            target = confined(s.run.path, trace, what="trace")
        except PathEscapeError:
            return "–"
        if not target.is_file():
            return "–"
        files.append(target)
    name = safe_file_name(record.key) + ".html"
    page = transcripts_folder(out) / safe_file_name(s.run.label) / name
    back = Path(os.path.relpath(out, page.parent)).as_posix()
    pages.append(TranscriptPage(page, s.run, record, files, back))
    href = "./" + Path(os.path.relpath(page, out.parent)).as_posix()
    return f'<a href="{escape(href)}">transcript</a>'


def _status(record: EpisodeRecord) -> str:
    """The status cell: the status, and for an episode that ended in an error its one-line cause."""
    status = escape(record.status)
    cause = error_cause(record)
    return (f'<span class="status {status}">{status}</span>'
            + (f'<div class="cause">{escape(cause)}</div>' if cause else ""))


def _episodes_section(series: Sequence[Series], out: Path, pages: list[TranscriptPage]) -> str:
    rows = []
    for s in series:
        for record in s.records:
            failures = ", ".join(sorted(record.failures))
            cells = (escape(s.name), escape(record.task_id), record.trial, _status(record),
                     record.steps, f"{_tokens(record):,}", record.detected_failures,
                     record.verified_recoveries, record.lessons_added, escape(failures),
                     _transcript_link(s, record, out, pages))
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("harness", "task", "trial", "status", "steps", "tokens", "detected",
                                             "verified", "lessons", "failures detected", "transcript"))
    return ('<input id="filter" type="search" placeholder="filter episodes: harness, task, status, failure ...">'
            f'<table id="episodes"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            '<p class="note">transcript: the episode step by step (what the agent proposed and did, what the env '
            'answered, detections, interventions and verdicts), a page next to this report. An episode that ended '
            'in an error shows its cause under its status.</p>')


def write_report(paths: Sequence[str | Path], out: str | Path, force: bool = False) -> Path:
    """Build the report and write it to `out` (refusing to overwrite without `force`), and its transcript pages to
    the folder `transcripts_folder(out)`; return the report's path."""
    from playground.run.files import check_output

    target = check_output(out, force=force, runs=paths, what="report")
    pages: list[TranscriptPage] = []
    html = build_report(paths, target, pages)
    for page in pages:
        page.write()
    return atomic_write_text(target, html)


CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px}nav{font-size:13px;line-height:1.8}.meta,.note{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.legend{font-size:12px;margin:4px 0 12px}.key{margin-right:14px;white-space:nowrap}
.chart{display:block;margin:8px 0}.status.won{color:#1a7f37;font-weight:600}.status.error{color:#c00;font-weight:600}
.cause{color:#c00;font-size:12px;text-align:left;white-space:normal;min-width:220px;max-width:360px}
#filter{width:420px;padding:4px;margin:6px 0}.wide{overflow-x:auto}.interrupted{color:#b45309;font-weight:600}
"""
SCRIPT = """
const box=document.getElementById('filter');
if(box){box.addEventListener('input',()=>{const q=box.value.toLowerCase();
for(const row of document.querySelectorAll('#episodes tbody tr')){
row.style.display=row.textContent.toLowerCase().includes(q)?'':'none';}});}
"""
