"""An episode's trace as a page a person reads: step by step, what the agent proposed and did and what the env
answered, with detections, interventions, verdicts, lessons and errors each highlighted in its own colour. What
each event says comes from `playground.run.event_text` (shared with `playground view`); this page only sets it in
HTML, texts whole.

`playground report` writes one such page per episode next to the report (`html_report`) and links each row of its
episode table to it; every text from the trace is escaped, and the page loads nothing and links nowhere but back
to the report.
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from playground.core.events import Event
from playground.run.event_text import Description, describe_event


def _text(value: Any) -> str:
    return escape(str(value if value is not None else ""))


def _block(text: Any) -> str:
    """A long text (an observation, a thought, a message) kept as written, line breaks included."""
    return f"<pre>{_text(text)}</pre>" if text not in (None, "") else ""


def render_description(d: Description) -> str:
    """A description (`playground.run.event_text`) as an HTML fragment: a box of its kind's class (and its outcome's)
    with its headline, longer texts kept as written and fault lines; "" for one not `shown`."""
    if not d.shown:
        return ""
    head = f"<b>{_text(d.title)}</b>"
    if d.subject:
        head += f' <span class="subject">{_text(d.subject)}</span>'
    if d.detail:
        head += f' <span class="dim">{_text(d.detail)}</span>'
    if d.alert:
        head += f' <span class="bad">{_text(d.alert)}</span>'
    body = "".join((f'<div class="dim">{_text(label)}:</div>' if label else "") + _block(text)
                   for label, text in d.body)
    problems = "".join(f'<div class="bad">{_text(problem)}</div>' for problem in d.problems)
    kind = " ".join(_text(name) for name in (d.kind, d.outcome) if name)
    return f'<div class="ev {kind}">{head}{body}{problems}</div>'


def render_event(event: Event) -> str:
    """One trace event as an HTML fragment, as `describe_event` words it with texts whole ("" for an event a transcript
    does not show: header, prompt, checkpoint, judge_call)."""
    return render_description(describe_event(event, full=True))


def render_attempt(events: Sequence[Event]) -> str:
    """One trace's events as HTML: a heading for each step the agent takes, its events under it."""
    parts: list[str] = []
    step = None
    for event in events:
        d = describe_event(event, full=True)
        if d.step is not None and d.step != step:
            step = d.step
            parts.append(f"<h3>step {_text(step)}</h3>")
        parts.append(render_description(d))
    return "".join(parts)


def render_transcript(title: str, facts: Sequence[tuple[str, Any]], attempts: Sequence[tuple[str, Sequence[Event]]],
                      back: str) -> str:
    """A whole page: `title`, a list of `facts` (name, value), then each attempt (its heading, its events; a heading
    of "" for an episode of one attempt), and a link `back` to the report (a ./-relative path)."""
    rows = "".join(f"<tr><th>{_text(name)}</th><td>{_text(value)}</td></tr>" for name, value in facts)
    body = "".join((f"<h2>{_text(heading)}</h2>" if heading else "") + render_attempt(events)
                   for heading, events in attempts)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_text(title)}</title>'
            f'<style>{CSS}</style></head><body><p><a href="{escape(back)}">← report</a></p><h1>{_text(title)}</h1>'
            f"<table>{rows}</table>{body}</body></html>\n")


CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:960px;color:#222;padding:0 16px;font-size:14px}
h1{font-size:20px;word-break:break-all}h2{font-size:17px;border-bottom:1px solid #ddd;margin-top:28px}
h3{font-size:14px;margin:18px 0 4px;color:#444}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:2px 7px;text-align:left;vertical-align:top}th{background:#f4f4f4}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font-size:12.5px;background:#fafafa;padding:4px 6px}
code,.proposal .subject,.step .subject{font-family:monospace;background:#eef;padding:0 3px}
.ev{border-left:4px solid #ccc;padding:3px 8px;margin:4px 0}.subject{font-weight:600}
.dim{color:#666}.bad{color:#c00;font-weight:600}.reset{border-color:#888}.reset .subject{font-weight:normal}
.proposal{border-color:#1f77b4}.step{border-color:#444}.detection{border-color:#d62728;background:#fff3f3}
.intervention{border-color:#e6a700;background:#fffbea}.rollback{border-color:#9467bd}
.verification.good{border-color:#1a7f37;background:#f0fff4}.verification.bad{border-color:#c00;background:#fff3f3}
.lesson{border-color:#9467bd;background:#f8f3ff}.lesson .subject{font-weight:normal}
.error{border-color:#c00;background:#fff0f0}
.end{border-color:#222;font-size:15px}.end.won b{color:#1a7f37}.end.error b{color:#c00}
"""
