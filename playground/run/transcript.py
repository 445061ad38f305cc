"""An episode's trace as a page a person reads: step by step, what the agent proposed and did and what the env
answered, with detections, interventions, verdicts, lessons and errors each highlighted in its own colour.

`playground report` writes one such page per episode next to the report (`html_report`) and links each row of its
episode table to it; every text from the trace is escaped, and the page loads nothing and links nowhere but back
to the report.
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from playground.core.events import (
    AttemptVerdictEvent,
    DetectionEvent,
    EndEvent,
    ErrorEvent,
    Event,
    InterventionEvent,
    LessonEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    VerificationEvent,
)


def _text(value: Any) -> str:
    return escape(str(value if value is not None else ""))


def _block(text: Any) -> str:
    """A long text (an observation, a thought, a message) kept as written, line breaks included."""
    return f"<pre>{_text(text)}</pre>" if text not in (None, "") else ""


def render_event(event: Event) -> str:
    """One trace event as an HTML fragment ("" for an event a transcript does not show: header, prompt,
    checkpoint, judge_call)."""
    if isinstance(event, ResetEvent):
        return f'<div class="ev reset"><b>goal</b> {_text(event.goal)}{_block(event.observation)}</div>'
    if isinstance(event, ProposalEvent):
        action = event.action or ("finish" if event.finish else "")
        again = f' <span class="dim">re-ask {_text(event.attempt)}</span>' if event.attempt else ""
        tokens = ""
        if event.prompt_tokens or event.completion_tokens:
            tokens = f' <span class="dim">({_text(event.prompt_tokens)}+{_text(event.completion_tokens)} tokens)</span>'
        problems = "".join(f'<div class="bad">schema problem: {_text(p.get("message"))}</div>'
                           for p in event.schema_problems or () if isinstance(p, dict))
        thought = f'<div class="dim">thought:</div>{_block(event.thought)}' if event.thought else ""
        return (f'<div class="ev proposal"><b>proposes</b> <code>{_text(action)}</code>{again}{tokens}'
                f'{thought}{problems}</div>')
    if isinstance(event, DetectionEvent):
        labels = ", ".join(map(str, event.labels))
        return (f'<div class="ev detection"><b>⚠ detected {_text(event.failure_type)}</b>'
                f'{f" ({_text(labels)})" if labels else ""} <span class="dim">by {_text(event.detector)}, '
                f'confidence {_text(event.confidence)}</span>{_block(event.evidence)}</div>')
    if isinstance(event, InterventionEvent):
        return _render_intervention(event)
    if isinstance(event, RollbackEvent):
        return f'<div class="ev rollback">⟲ rolled back to step {_text(event.to_step)}</div>'
    if isinstance(event, StepEvent):
        rejected = "" if event.valid_action else ' <span class="bad">rejected by the env</span>'
        return (f'<div class="ev step"><b>→ does</b> <code>{_text(event.action)}</code>{rejected}'
                f'{_block(event.observation)}</div>')
    if isinstance(event, VerificationEvent):
        resolved = event.verdict == "resolved"
        return (f'<div class="ev verification {"resolved" if resolved else "unresolved"}">'
                f'<b>{"✓" if resolved else "✗"} verdict {_text(event.verdict)}</b> <span class="dim">on the repair of '
                f'{_text(event.failure_type)} at step {_text(event.repair_step)} by '
                f'{_text(event.plugin)}</span>{_block(event.evidence)}</div>')
    if isinstance(event, AttemptVerdictEvent):
        passed = event.passed
        return (f'<div class="ev verification {"resolved" if passed else "unresolved"}"><b>{"✓" if passed else "✗"} '
                f'attempt {"passed" if passed else "failed"}</b> <span class="dim">by the deployment verifier '
                f'{_text(event.verifier)}</span>{_block(event.why)}</div>')
    if isinstance(event, LessonEvent):
        labels = ", ".join(map(str, event.labels or ()))
        return (f'<div class="ev lesson"><b>★ lesson stored</b> #{_text(event.id)} '
                f'{_text(event.failure_type)} {_text(labels)}<div>when: {_text(event.trigger)}</div>'
                f'<div>do: {_text(event.principle)}</div></div>')
    if isinstance(event, ErrorEvent):
        return f'<div class="ev error"><b>error</b>{_block(event.message)}</div>'
    if isinstance(event, EndEvent):
        score = f", score {_text(event.score)} of {_text(event.max_score)}" if event.score is not None else ""
        return (f'<div class="ev end {_text(event.status)}"><b>{_text(event.status)}</b> after {_text(event.steps)} '
                f'steps{score}{_block(event.error)}</div>')
    return ""


def _render_intervention(event: InterventionEvent) -> str:
    message = event.message or {}
    if message:
        effect = "re-asks the agent"
    elif event.action is not None:
        effect = f"replaces the action with <code>{_text(event.action)}</code>"
    elif event.rollback_to is not None:
        effect = f"rolls back to step {_text(event.rollback_to)}"
    else:
        effect = "stops the episode"
    lessons = event.details.get("lessons")
    shown = f", showing lessons {_text(lessons)}" if lessons else ""
    return (f'<div class="ev intervention"><b>↺ intervention {_text(event.kind)}</b> '
            f'<span class="dim">by {_text(event.plugin)}:</span> {effect}{shown}{_block(message.get("text"))}</div>')


def render_attempt(events: Sequence[Event]) -> str:
    """One trace's events as HTML: a heading for each step the agent takes, its events under it."""
    parts: list[str] = []
    step = None
    for event in events:
        if isinstance(event, ProposalEvent) and event.step != step:
            step = event.step
            parts.append(f"<h3>step {_text(step)}</h3>")
        parts.append(render_event(event))
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
code{background:#eef;padding:0 3px}.ev{border-left:4px solid #ccc;padding:3px 8px;margin:4px 0}
.dim{color:#666}.bad{color:#c00;font-weight:600}.reset{border-color:#888}.proposal{border-color:#1f77b4}
.step{border-color:#444}.detection{border-color:#d62728;background:#fff3f3}
.intervention{border-color:#e6a700;background:#fffbea}.rollback{border-color:#9467bd}
.verification.resolved{border-color:#1a7f37;background:#f0fff4}.verification.unresolved{border-color:#c00;background:#fff3f3}
.lesson{border-color:#9467bd;background:#f8f3ff}.error{border-color:#c00;background:#fff0f0}
.end{border-color:#222;font-size:15px}.end.won b{color:#1a7f37}.end.error b{color:#c00}
"""
