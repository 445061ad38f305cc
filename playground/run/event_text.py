"""What a reader is shown of each trace event, said once for every medium that shows traces.

`describe_event(event)` turns one event of `playground.core.events` into a `Description`: its kind (a style name), a
headline in parts (a title, what it is about, quieter detail, a warning), longer texts under it and the lines that
report faults. Each class has one describer (`DESCRIBERS`, a dict from class to function); the terminal viewer
(`playground.cli.view`), the HTML transcript (`playground.run.transcript`) and through it the report's episode pages
(`playground.run.html_report`) only format a description for their medium (colours, escaping, layout), so a change
to what an event says is made here and shows in all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from playground.core.events import (
    AttemptVerdictEvent,
    CheckpointEvent,
    DetectionEvent,
    EndEvent,
    ErrorEvent,
    Event,
    HeaderEvent,
    InterventionEvent,
    JudgeCallEvent,
    LessonEvent,
    PromptEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    VerificationEvent,
)
from playground.run.judge_quality import echoes, terse

SHORT = 400  # characters of a long text kept unless the reader asks for texts whole (`full`)


def empty_judgment(texts: tuple[str | None, ...], names: tuple[str | None, ...] = ()) -> str:
    """The alert on a judgment (a detection's evidence, a verdict's reason, a lesson) whose free text says nothing:
    it repeats the schema's wording or the label it was asked about, or it is one word; "" otherwise (a blank text,
    which rule-based judgments may leave, is not flagged here)."""
    said = [str(t) for t in texts if t and str(t).strip()]
    if any(echoes(t, [n for n in names if n]) for t in said):
        return "empty judgment: repeats the schema's wording or the prompt"
    return "empty judgment: one word" if any(terse(t) for t in said) else ""


@dataclass(frozen=True)
class Description:
    """One trace event in words, for any medium to format.

    `kind` names its style (a renderer's colour, a page's CSS class): reset, proposal, detection, intervention,
    rollback, step, verification (a repair's verdict and an attempt's), lesson, error, end; and header, checkpoint,
    prompt, judge_call for the events a step-by-step reader leaves out (`shown` False). The headline reads
    `title subject detail` (`headline()`), then `alert`, a warning on it; `body` holds the longer texts under it,
    each `(label, text)` (label "" for none); `problems` lines that report faults. `outcome` is how it came out, for
    a medium to colour: "good" or "bad" for a verdict, the status for an end. `step` is set on a proposal: the step
    it opens (readers group a step's events under it)."""

    kind: str
    title: str
    subject: str = ""
    detail: str = ""
    alert: str = ""
    body: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()
    outcome: str = ""
    step: int | None = None
    shown: bool = True

    def headline(self) -> str:
        """The headline as one line of plain text: title, subject and detail, each where it has one."""
        return " ".join(part for part in (self.title, self.subject, self.detail) if part)


def clip(text: Any, full: bool = False) -> str:
    """`text` as a string, cut to `SHORT` characters (saying how many more there are) unless `full`."""
    text = str(text if text is not None else "")
    return text if full or len(text) <= SHORT else text[:SHORT] + f" … ({len(text) - SHORT} more characters; --full)"


def _body(full: bool, *parts: tuple[str, Any]) -> tuple[tuple[str, str], ...]:
    """The body parts that have a text, each clipped (`clip`)."""
    return tuple((label, clip(text, full)) for label, text in parts if text not in (None, ""))


def _header(event: HeaderEvent, full: bool) -> Description:
    return Description("header", "episode", f"{event.env}:{event.task_set}",
                       f"task {event.task_id}, seed {event.seed}, agent {event.agent}, interventions "
                       f"{interventions(event) or 'none'}", shown=False)


def _reset(event: ResetEvent, full: bool) -> Description:
    return Description("reset", "goal:", event.goal, body=_body(full, ("", event.observation)))


def _checkpoint(event: CheckpointEvent, full: bool) -> Description:
    return Description("checkpoint", "checkpoint", event.id, f"before step {event.step}, branch {event.branch}",
                       shown=False)


def _proposal(event: ProposalEvent, full: bool) -> Description:
    detail = [f"re-ask {event.attempt}"] if event.attempt else []
    if event.prompt_tokens or event.completion_tokens:
        detail.append(f"({event.prompt_tokens}+{event.completion_tokens} tokens)")
    problems = tuple(f"schema problem: {p.get('message')}" for p in event.schema_problems or ()
                     if isinstance(p, Mapping))
    return Description("proposal", "propose", event.action or ("finish" if event.finish else ""), " ".join(detail),
                       body=_body(full, ("thought", event.thought)), problems=problems, step=event.step)


def _detection(event: DetectionEvent, full: bool) -> Description:
    labels = ", ".join(map(str, event.labels))
    return Description("detection", "⚠ detected", event.failure_type + (f" ({labels})" if labels else ""),
                       f"by {event.detector}, confidence {event.confidence}",
                       alert=empty_judgment((event.evidence,), ("evidence", event.failure_type, *event.labels)),
                       body=_body(full, ("", event.evidence)))


def _intervention(event: InterventionEvent, full: bool) -> Description:
    message = event.message or {}
    if message:
        effect = "re-asks the agent"
    elif event.action is not None:
        effect = f"replaces the action with {event.action!r}"
    elif event.rollback_to is not None:
        effect = f"rolls back to step {event.rollback_to}"
    else:
        effect = "stops the episode"
    lessons = event.details.get("lessons")
    return Description("intervention", "↺ intervention", event.kind,
                       f"by {event.plugin}: {effect}" + (f", showing lessons {lessons}" if lessons else ""),
                       body=_body(full, ("", message.get("text"))))


def _rollback(event: RollbackEvent, full: bool) -> Description:
    return Description("rollback", "⟲ rolled back", f"to step {event.to_step}",
                       f"from step {event.from_step}" if event.from_step is not None else "")


def _step(event: StepEvent, full: bool) -> Description:
    return Description("step", "→", event.action, alert="" if event.valid_action else "rejected by the env",
                       body=_body(full, ("", event.observation)))


def _verification(event: VerificationEvent, full: bool) -> Description:
    resolved = event.verdict == "resolved"
    return Description("verification", f"{'✓' if resolved else '✗'} verdict", event.verdict,
                       f"on the repair of {event.failure_type} at step {event.repair_step} by {event.plugin}",
                       alert=empty_judgment((event.evidence,), ("evidence", "verdict", "resolved", event.failure_type)),
                       body=_body(full, ("", event.evidence)), outcome="good" if resolved else "bad")


def _attempt_verdict(event: AttemptVerdictEvent, full: bool) -> Description:
    return Description("verification", f"{'✓' if event.passed else '✗'} attempt",
                       "passed" if event.passed else "failed", f"by the deployment verifier {event.verifier}",
                       body=_body(full, ("", event.why)), outcome="good" if event.passed else "bad")


def _lesson(event: LessonEvent, full: bool) -> Description:
    labels = ", ".join(map(str, event.labels or ()))
    return Description("lesson", "★ lesson stored", " ".join(part for part in (
        f"#{event.id}", str(event.failure_type or ""), labels) if part),
        alert=empty_judgment((event.trigger, event.principle),
                             ("trigger", "principle", event.failure_type, *(event.labels or ()))),
        body=_body(full, ("when", event.trigger), ("do", event.principle)))


def _error(event: ErrorEvent, full: bool) -> Description:
    where = " ".join(part for part in (f"by {event.plugin}" if event.plugin else "",
                                       f"in {event.hook}" if event.hook else "") if part)
    return Description("error", "error", detail=where, body=_body(full, ("", event.message)))


def _end(event: EndEvent, full: bool) -> Description:
    score = f", score {event.score} of {event.max_score}" if event.score is not None else ""
    return Description("end", event.status, detail=f"after {event.steps} steps{score}",
                       body=_body(full, ("", event.error)), outcome=event.status)


def _prompt(event: PromptEvent, full: bool) -> Description:
    return Description("prompt", "prompt text", event.hash, body=_body(full, ("", event.text)), shown=False)


def _judge_call(event: JudgeCallEvent, full: bool) -> Description:
    usable = "" if event.usable else ", reply unusable"
    return Description("judge_call", "model call", event.role,
                       f"{event.prompt_tokens}+{event.completion_tokens} tokens, {event.mode}{usable}", shown=False)


Describer = Callable[[Any, bool], Description]

DESCRIBERS: dict[type[Event], Describer] = {
    HeaderEvent: _header, ResetEvent: _reset, CheckpointEvent: _checkpoint, ProposalEvent: _proposal,
    DetectionEvent: _detection, InterventionEvent: _intervention, RollbackEvent: _rollback, StepEvent: _step,
    VerificationEvent: _verification, AttemptVerdictEvent: _attempt_verdict, LessonEvent: _lesson,
    ErrorEvent: _error, EndEvent: _end, PromptEvent: _prompt, JudgeCallEvent: _judge_call,
}


def describe_event(event: Event, full: bool = False) -> Description:
    """What a reader is shown of `event`, from its class's describer (`DESCRIBERS`; the nearest base class's for a
    subclass); long texts cut to `SHORT` characters unless `full`. An event of a class without one is described by
    its type name alone and not shown."""
    for cls in type(event).__mro__:
        describer = DESCRIBERS.get(cls)
        if describer is not None:
            return describer(event, full)
    return Description("event", event.TYPE or type(event).__name__, shown=False)


def interventions(header: HeaderEvent | None) -> str:
    """The interventions a trace's header names, comma-separated ("" for none, or for no header)."""
    return ", ".join(header.interventions) if header is not None else ""


def attempt_heading(number: int, header: HeaderEvent | None) -> str:
    """The heading of a cascade's attempt `number`: its interventions, or "base"."""
    return f"attempt {number}: {interventions(header) or 'base'}"
