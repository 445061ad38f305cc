"""Trace events: one frozen dataclass per event type of an episode's trace, and the one place that maps them to
and from the trace's JSON records, versions included.

A trace (`playground.run.traces`) is a JSONL file of records `{"type": ..., "t": ..., **fields}`; each type is a
class here (`HeaderEvent`, `StepEvent`, ...; `EVENT_CLASSES` maps type names to classes). The loop, the runner
and the model client emit these objects, the writer turns them into records (`to_record`) and every reader gets
them back (`from_record`), so no code outside this module and the trace reader and writer looks an event's type
up by name.

Fields keep the record's keys, and a record read is checked against the fields' annotations by pydantic, strictly
(JSON values as read: a bool is no int, a string no number; `EventError` names the field). A field marked optional
(`_optional`) is left out of the record while it is None; every other field is always written. Keys a class does
not declare (an env's own header facts, a plugin's lesson fields) are kept in `extra`, written back as they were.
Values are the JSON values as read (lists, dicts, str, numbers): the dataclass is frozen, and its values are to be
treated as read-only too. `t`, the wall time the event was written, does not take part in comparisons.

Versions. The header of a trace names its format version (`trace_version`, `TRACE_VERSION` now); a trace
whose header has none is version 1 (written before events were typed). Reading a version-1 record goes through
one function, `upgrade_v1`, which fills in every field version 1 could leave out with the default its readers
assumed; a version-2 record must carry every non-optional field. A version newer than `TRACE_VERSION` is refused
(`EventError`; the trace reader names the file).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, get_type_hints

from pydantic import ConfigDict, TypeAdapter, ValidationError

from playground.core.event_versions import V1_DEFAULTS, upgrade_v1  # noqa: F401 (V1_DEFAULTS re-exported)
from playground.core.payloads import AttemptVerdict, Decision, Detection, InterventionMessage, Verification
from playground.core.versions import named_version

TRACE_VERSION = 2  # the trace format this module writes; 1: traces written before `trace_version` existed


class EventError(ValueError):
    """A record that is not a trace event of a version this module reads; the message says what is wrong."""


def _optional(default: Any = None) -> Any:
    """A field left out of the record while it is None (the loop writes it only when there is something)."""
    return field(default=default, metadata={"optional": True})


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """`value` as JSON values: tuples become lists and read-only mappings dicts, all the way down."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Event:
    """The fields every trace event has: when it was written (`t`) and the keys its class does not declare."""

    TYPE: ClassVar[str] = ""
    t: float | None = field(default=None, compare=False)  # seconds since the epoch, set by the writer
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (list, tuple, Mapping)):
                object.__setattr__(self, f.name, _plain(value))
        clash = set(self.extra) & {*_spec(type(self)).checks, "type", "t"}
        if clash:
            raise EventError(f"a {self.TYPE} event's extra fields repeat declared ones: {', '.join(sorted(clash))}")

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any], **more: Any) -> Any:
        """An event of this class from a mapping (a payload's `to_dict`), keys it does not declare kept in
        `extra`."""
        declared = _spec(cls).checks
        given = {**fields, **more}
        known = {key: value for key, value in given.items() if key in declared}
        extra = {key: value for key, value in given.items() if key not in declared}
        return cls(**known, extra=extra)


@dataclass(frozen=True, kw_only=True)
class HeaderEvent(Event):
    """The first event: what rebuilds the episode's start state (env, task set, task, seed, agent, budget,
    parameters) and the trace's format version. A fork's header also names its source and fork point."""

    TYPE: ClassVar[str] = "header"
    trace_version: int = TRACE_VERSION  # the format the trace was written in (1 for a trace upgraded on reading)
    env: str
    task_set: str = ""
    task_id: str
    seed: int | None
    harness: str = ""
    agent: str = ""
    max_steps: int | None = None
    run_id: str | None = None
    split: str | None = None
    version: Any = _optional()  # the env package's version, where its provider names one
    episode_id: str | None = _optional()
    params: Mapping[str, Any] = field(default_factory=dict)
    interventions: list[str] = field(default_factory=list)
    agent_options: Mapping[str, Any] = field(default_factory=dict)
    attempt: int | None = _optional()  # of a cascade harness (1 without one)
    trial: int | None = _optional()
    source_trace: str | None = _optional()  # a fork's: the trace it was forked from
    source_episode: str | None = _optional()
    fork_point: int | None = _optional()
    action: str | None = _optional()  # a fork's forced first action
    finish: bool | None = _optional()  # a fork that starts with a finish
    observers: list[str] | None = _optional()
    restored: Mapping[str, Any] | None = _optional()  # a fork's restored-state check
    lineage: Mapping[str, Any] | None = _optional()


@dataclass(frozen=True, kw_only=True)
class ResetEvent(Event):
    """The env's first observation, the goal and the actions first offered."""

    TYPE: ClassVar[str] = "reset"
    goal: str
    observation: str
    admissible_actions: list[str] | None = None
    max_score: float | None = None


@dataclass(frozen=True, kw_only=True)
class CheckpointEvent(Event):
    """A snapshot taken before step `step`: its id, branch and parent, and the ids retention dropped."""

    TYPE: ClassVar[str] = "checkpoint"
    step: int
    id: str
    branch: int = 0
    parent: str | None = None
    dropped: list[str] | None = _optional()


@dataclass(frozen=True, kw_only=True)
class ProposalEvent(Event):
    """What the agent proposed at a step (attempt 0, then each re-ask) and the view it saw: admissible actions,
    the intervention message, notes and prompt messages by hash (`PromptEvent`)."""

    TYPE: ClassVar[str] = "proposal"
    step: int
    attempt: int = 0
    thought: str = ""
    action: str = ""
    finish: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    intervention_chars: int = 0
    seconds: float = 0.0
    admissible_actions: list[str] | None = None
    message: Mapping[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # hashes of `PromptEvent`s
    prompt: list[Mapping[str, Any]] | None = None  # [{"role", "hash"}]
    env_admissible_actions: list[str] | None = _optional()  # where a plugin narrowed the agent's list
    admissible_complete: bool | None = _optional()  # False where the list is a cut of what the env accepts
    schema_problems: list[Mapping[str, Any]] | None = _optional()  # where the env checks actions
    injected: Mapping[str, Any] | None = _optional()  # ground truth of an injected fault (measurement only)


@dataclass(frozen=True, kw_only=True)
class DetectionEvent(Event):
    """A detector's finding on a proposal (the `Detection` payload) at its step and attempt."""

    TYPE: ClassVar[str] = "detection"
    step: int
    attempt: int = 0
    detector: str = ""
    failure_type: str = ""
    labels: list[str] = field(default_factory=list)
    confidence: float = 1.0
    evidence: str = ""
    subtype: str = ""

    def payload(self) -> Detection:
        """The `Detection` the detector returned (what the hook passed on, as the trace keeps it)."""
        return Detection(self.detector, self.failure_type, tuple(self.labels), self.confidence, self.evidence,
                         self.subtype)


@dataclass(frozen=True, kw_only=True)
class InterventionEvent(Event):
    """A plugin's decision on a proposal (the `Decision` payload): re-ask, replace, roll back or stop."""

    TYPE: ClassVar[str] = "intervention"
    step: int
    attempt: int = 0
    plugin: str = ""
    kind: str = ""
    message: Mapping[str, Any] | None = None
    action: str | None = None
    stop: bool = False
    rollback_to: int | None = None
    detections: list[Mapping[str, Any]] = field(default_factory=list)
    details: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> Decision:
        """The `Decision` the plugin returned (what the hook passed on, as the trace keeps it)."""
        message = None if self.message is None else InterventionMessage(**{
            **self.message, "actions": tuple(self.message.get("actions", ())),
            "labels": tuple(self.message.get("labels", ()))})
        detections = tuple(Detection(**{**d, "labels": tuple(d.get("labels", ()))}) for d in self.detections)
        return Decision(self.plugin, self.kind, message, self.action, self.stop, self.rollback_to, detections,
                        dict(self.details))


@dataclass(frozen=True, kw_only=True)
class RollbackEvent(Event):
    """A restored checkpoint: the step rolled back to, from which step, and the new branch."""

    TYPE: ClassVar[str] = "rollback"
    to_step: int
    restored: bool = True
    checkpoint: str = ""
    branch: int = 0
    from_step: int | None = None
    truth: Mapping[str, Any] | None = _optional()  # the env's ground truth after the restore (measurement only)


@dataclass(frozen=True, kw_only=True)
class StepEvent(Event):
    """One action sent to the env and what it answered."""

    TYPE: ClassVar[str] = "step"
    step: int
    action: str
    observation: str
    reward: float = 0.0
    score: float | None = None
    valid_action: bool = True
    won: bool = False
    terminated: bool = False
    truncated: bool = False
    kind: str | None = _optional()  # the env's kind of the action, where it gives kinds
    failure: Mapping[str, Any] | None = _optional()  # the observable failure the env reported
    structure: Mapping[str, Any] | None = _optional()
    truth: Mapping[str, Any] | None = _optional()  # the env's ground truth after the step (measurement only)


@dataclass(frozen=True, kw_only=True)
class VerificationEvent(Event):
    """A verifier's verdict on a repair (the `Verification` payload)."""

    TYPE: ClassVar[str] = "verification"
    plugin: str = ""
    repair_step: int = 0
    failure_type: str = ""
    verdict: str = ""
    evidence: str = ""
    lesson: Mapping[str, Any] | None = None

    def payload(self) -> Verification:
        """The `Verification` the verifier returned (what the hook passed on, as the trace keeps it)."""
        return Verification(self.plugin, self.repair_step, self.failure_type, self.verdict, self.evidence,
                            self.lesson)


@dataclass(frozen=True, kw_only=True)
class LessonEvent(Event):
    """A lesson a verifier stored: its plugin's mapping (the fields below where it has them, the rest in `extra`)."""

    TYPE: ClassVar[str] = "lesson"
    id: Any = _optional()
    failure_type: str | None = _optional()
    labels: list[str] | None = _optional()
    trigger: str | None = _optional()
    principle: str | None = _optional()


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    """An error: the plugin and hook that raised it where a plugin did; `fatal` False where the episode went on;
    `traceback`, where the error was raised in a plugin, the env or the agent, its whole Python traceback."""

    TYPE: ClassVar[str] = "error"
    message: str
    plugin: str | None = _optional()
    hook: str | None = _optional()
    fatal: bool | None = _optional()
    traceback: str | None = _optional()


@dataclass(frozen=True, kw_only=True)
class EndEvent(Event):
    """How the episode ended."""

    TYPE: ClassVar[str] = "end"
    status: str
    won: bool = False
    steps: int = 0
    error: str | None = None
    score: float | None = None
    max_score: float | None = None


@dataclass(frozen=True, kw_only=True)
class PromptEvent(Event):
    """A long text of the views (a note, a prompt message), stored once per episode under its hash."""

    TYPE: ClassVar[str] = "prompt"
    hash: str
    text: str


@dataclass(frozen=True, kw_only=True)
class JudgeCallEvent(Event):
    """A model call made for a plugin's role (not the agent's): its tokens, whether its reply was usable, its mode."""

    TYPE: ClassVar[str] = "judge_call"
    role: str = "unknown"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usable: bool = True
    mode: str = "prompt"
    # a failure-injection instrument's grade of the reply: {"kind", "step", "correct", "truth", "answer", "by"}
    graded: Mapping[str, Any] | None = _optional()


@dataclass(frozen=True, kw_only=True)
class AttemptVerdictEvent(Event):
    """A cascade's deployment verifier's verdict on the attempt just played."""

    TYPE: ClassVar[str] = "attempt_verdict"
    verifier: str
    passed: bool
    why: str = ""

    def payload(self) -> AttemptVerdict:
        """The `AttemptVerdict` the deployment verifier returned."""
        return AttemptVerdict(self.passed, self.why)


EVENT_CLASSES: dict[str, type[Event]] = {cls.TYPE: cls for cls in (
    HeaderEvent, ResetEvent, CheckpointEvent, ProposalEvent, DetectionEvent, InterventionEvent, RollbackEvent,
    StepEvent, VerificationEvent, LessonEvent, ErrorEvent, EndEvent, PromptEvent, JudgeCallEvent,
    AttemptVerdictEvent)}
STEP_FIELDS = ("step", "to_step", "from_step", "repair_step")  # fields numbered by step (a fork's trace shifts them)

_BASE = frozenset({"t", "extra"})


def event_class(name: str) -> type[Event]:
    """The class of the event type `name` (EventError for a type no trace has)."""
    try:
        return EVENT_CLASSES[name]
    except KeyError:
        raise EventError(f"unknown event type {name!r} (known: {', '.join(sorted(EVENT_CLASSES))})") from None


def to_record(event: Event) -> dict[str, Any]:
    """The JSON record of `event`: type, time, its fields (an optional one only when set), then `extra`."""
    record: dict[str, Any] = {"type": event.TYPE}
    if event.t is not None:
        record["t"] = event.t
    for f in dataclasses.fields(event):
        if f.name in _BASE:
            continue
        value = getattr(event, f.name)
        if value is None and f.metadata.get("optional"):
            continue
        record[f.name] = value
    record.update(event.extra)
    return record


def fields_of(event: Event) -> dict[str, Any]:
    """The record of `event` without its type and time: the data an emitter gave it."""
    return {key: value for key, value in to_record(event).items() if key not in ("type", "t")}


def trace_version(header: Mapping[str, Any]) -> int:
    """The format version a header record names (1 without one); EventError for one this module cannot read."""
    return named_version(header, "trace_version", TRACE_VERSION, "trace", EventError)


UPGRADES: dict[int, Callable[[Mapping[str, Any]], dict[str, Any]]] = {1: upgrade_v1}  # version -> to version + 1
# (each step in playground.core.event_versions)


def from_record(record: Mapping[str, Any], version: int = TRACE_VERSION) -> Event:
    """The event a record of trace format `version` holds (upgraded to this version first); EventError says what
    is wrong with a record that is not one."""
    trace_version({"trace_version": version})  # EventError for a version this module cannot read
    kind = record.get("type")
    if not isinstance(kind, str):
        raise EventError("the record has no 'type'")
    cls = event_class(kind)
    for old in range(version, TRACE_VERSION):
        record = UPGRADES[old](record)
    spec = _spec(cls)
    event = object.__new__(cls)  # the record's values are JSON already: no `__post_init__` to make them so
    extra: dict[str, Any] = {}
    t = None
    for key, value in record.items():
        if key in spec.checks:
            annotation, adapter = spec.checks[key]
            try:
                adapter.validate_python(value)
            except ValidationError:
                raise EventError(f"a {kind} event's {key!r} is {value!r:.60}, expected {annotation}") from None
            object.__setattr__(event, key, value)
        elif key == "t":
            if value is not None and type(value) not in (int, float):
                raise EventError(f"a {kind} event's 't' is {value!r:.60}, not a number")
            t = value
        elif key != "type":
            extra[key] = value
    missing = [name for name in spec.required if name not in record]
    if missing:
        raise EventError(f"a {kind} event lacks {', '.join(repr(m) for m in missing)}")
    for name in spec.optional:
        if name not in record:
            object.__setattr__(event, name, None)
    object.__setattr__(event, "t", t)
    object.__setattr__(event, "extra", extra)
    return event


def shifted(event: Event, by: int) -> Event:
    """`event` with its step-numbered fields (`STEP_FIELDS`) moved by `by` (a fork's events count from its
    fork point)."""
    moves = {name: getattr(event, name) + by for name in STEP_FIELDS
             if isinstance(getattr(event, name, None), int) and not isinstance(getattr(event, name), bool)}
    return dataclasses.replace(event, **moves) if moves else event


def map_strings(event: Event, fn: Callable[[str], str]) -> Event:
    """`event` with `fn` applied to every string in its fields and `extra`, nested ones and mapping keys too."""

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return fn(value)
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, Mapping):
            return {walk(key): walk(item) for key, item in value.items()}
        return value

    changes = {f.name: walk(getattr(event, f.name)) for f in dataclasses.fields(event) if f.name != "t"}
    return dataclasses.replace(event, **changes)


_STRICT = ConfigDict(strict=True)  # JSON values as read: an int is no bool, a string no number


@dataclass(frozen=True)
class _Spec:
    """What reading a record of one class needs: each field's annotation and its pydantic validator (strict), the
    fields a record must carry, the others."""

    checks: dict[str, tuple[str, TypeAdapter]]
    required: tuple[str, ...]
    optional: tuple[str, ...]


_SPECS: dict[type, _Spec] = {}


def _spec(cls: type) -> _Spec:
    """The `_Spec` of an event class, made on first use."""
    if cls not in _SPECS:
        declared = [f for f in dataclasses.fields(cls) if f.name not in _BASE]
        hints = get_type_hints(cls)
        _SPECS[cls] = _Spec({f.name: (str(f.type), TypeAdapter(hints[f.name], config=_STRICT)) for f in declared},
                            tuple(f.name for f in declared if not f.metadata.get("optional")),
                            tuple(f.name for f in declared if f.metadata.get("optional")))
    return _SPECS[cls]
