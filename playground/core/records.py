"""Episode records: the typed, versioned model of one line of a run's `episodes.jsonl`, and the one place that
maps it to and from JSON.

A record says how one episode (one trial of one task under one harness) ended and what it counted: its outcome
(`status`, `won`, `steps`, `score`), its trace file, the counts tallied from its trace events (invalid actions,
detections, interventions, verdicts, lessons, tokens) and, for a cascade harness, each attempt. The runner builds
one `EpisodeRecord` per episode; every reader gets one back from `read_record`, so code outside this module reads
`record.won`, never `record["won"]` (tests/test_record_fields.py keeps it so).

The model is frozen: derive a changed record with `record.model_copy(update={...})`. Keys the model does not
declare (a count a later tally adds) are kept and written back as they were (`extra`). Values are JSON values.

Versions. A record names its format version (`record_version`, `RECORD_VERSION` now); a record without one is
version 1 (written before records were typed). `upgrade_v1` is the one step from version 1: it fills in each field
version 1 could lack with the value its readers assumed. Counts that older records lack and that only a trace can
give (`TRACE_COUNTED`) stay unset (`lacks`), for the report to count from the trace. A version newer than
`RECORD_VERSION` is refused (`RecordError`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from playground.core.errors import PlaygroundError
from playground.core.versions import read_versioned

RECORD_VERSION = 2  # the record format this module writes; 1: records written before `record_version` existed
TRACE_COUNTED = ("failures", "lessons_retrieved", "lessons_helped")  # counts older records lack (from the trace)


class RecordError(PlaygroundError, ValueError):
    """A mapping that is not an episode record of a version this module reads; the message says what is wrong."""


def episode_key(harness: str, task_id: str, trial: int = 1) -> str:
    """The key identifying one episode of a run: `harness/task`, and `harness/task#N` for trial N > 1."""
    return f"{harness}/{task_id}" + (f"#{trial}" if trial > 1 else "")


class _Frozen(BaseModel):
    """A frozen model of JSON values that keeps keys it does not declare."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True, allow_inf_nan=False)


class AttemptOutcome(_Frozen):
    """How one attempt of a cascade harness ended: its interventions, outcome, cost and trace."""

    interventions: list[StrictStr] = Field(default_factory=list)
    won: StrictBool = False
    status: StrictStr = ""
    steps: StrictInt = 0
    cost: float | None = None
    trace: StrictStr | None = None
    verified: StrictBool | None = None  # the deployment verifier's verdict, where the cascade has one


Counts = dict[str, StrictInt]


class EpisodeRecord(_Frozen):
    """One finished episode of a run (a line of `episodes.jsonl`): its identity, outcome, trace and counts."""

    harness: StrictStr = Field(min_length=1)
    task_id: StrictStr = Field(min_length=1)
    episode_id: StrictStr | None = None
    trial: StrictInt = Field(default=1, ge=1)
    seed: StrictInt | None = None
    status: StrictStr = Field(min_length=1)  # won, lost, truncated, stopped, error
    won: StrictBool = False
    steps: StrictInt = 0
    error: StrictStr | None = None
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0
    trace: StrictStr | None = None
    # counted from the trace's events (playground.run.report.EpisodeTally)
    invalid_actions: StrictInt = 0
    detected_failures: StrictInt = 0
    interventions: Counts = Field(default_factory=dict)
    verified_recoveries: StrictInt = 0
    unresolved_recoveries: StrictInt = 0
    lessons_added: StrictInt = 0
    lessons_retrieved: StrictInt = 0
    lessons_helped: StrictInt = 0
    failures: dict[str, Counts] = Field(default_factory=dict)  # "failure_type/label" -> detected/resolved/...
    prompt_tokens: StrictInt = 0
    completion_tokens: StrictInt = 0
    judge_prompt_tokens: StrictInt = 0
    judge_completion_tokens: StrictInt = 0
    judge_replies: dict[str, dict[str, Any]] | None = None  # per role: calls, unusable, modes (graded, right)
    judgments: dict[str, Any] | None = None  # what the judges decided (playground.run.judge_quality)
    schema_invalid_steps: StrictInt | None = None  # where the env checks actions against a schema
    agent_calls: StrictInt | None = None  # the agent's proposals that came from a model
    response_cache: Counts | None = None  # {"hits", "misses"} where the response cache was used
    # a cascade's: the verifier, how many attempts it allows, each attempt played, their summed cost
    verified: StrictBool | None = None
    verifier: StrictStr | None = None
    cascade_length: StrictInt | None = None
    cost: float | None = None
    attempts: list[AttemptOutcome] | None = None
    key: StrictStr = Field(min_length=1)
    record_version: StrictInt = RECORD_VERSION

    @field_validator("seconds", "score", "max_score", "cost")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def tokens(self) -> int:
        """All the tokens the episode spent: the agent's and its judges' (prompt and completion)."""
        return self.prompt_tokens + self.completion_tokens + self.judge_prompt_tokens + self.judge_completion_tokens

    @property
    def model_calls(self) -> int:
        """The model calls the episode made: the agent's (a completion per proposal from a model) and its judges'."""
        judged = sum(int(entry.get("calls", 0)) for entry in (self.judge_replies or {}).values()
                     if isinstance(entry, dict))
        return (self.agent_calls or 0) + judged

    @property
    def extra(self) -> dict[str, Any]:
        """The keys the record holds that the model does not declare."""
        return dict(self.__pydantic_extra__ or {})

    def has(self, name: str) -> bool:
        """Whether the record holds field `name` with a value (a declared field not None, or an extra key)."""
        return getattr(self, name, None) is not None if name in type(self).model_fields else name in self.extra

    def value(self, name: str) -> Any:
        """The value of the field a caller names at run time (a metric's field, a grouping key): a declared field,
        else an extra key; KeyError when the record has neither."""
        if name in type(self).model_fields:
            return getattr(self, name)
        try:
            return self.extra[name]
        except KeyError:
            raise KeyError(f"the record has no field {name!r}") from None

    def lacks(self, name: str) -> bool:
        """Whether the record was read without field `name` (an older record, or one left out while None)."""
        return name not in self.model_fields_set

    def as_json(self) -> dict[str, Any]:
        """The record's JSON object: every declared field (those whose default is None only when set), then the
        keys the model does not declare."""
        data: dict[str, Any] = {}
        for name, spec in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None and spec.default is None:
                continue
            data[name] = [a.model_dump(exclude_none=True) for a in value] if name == "attempts" else value
        data.update(self.extra)
        return data


def upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 record as version 2: null counts (version 1 wrote null for none) dropped for their defaults,
    and the version named. Fields it lacks take the model's defaults, which are what version-1 readers assumed."""
    upgraded = {key: value for key, value in data.items()
                if not (value is None and key in ("interventions", "failures", "trial", "seconds", "steps"))}
    upgraded["record_version"] = 2
    return upgraded


UPGRADES: dict[int, Callable[[Mapping[str, Any]], dict[str, Any]]] = {1: upgrade_v1}  # version -> version + 1


def read_record(data: Any) -> EpisodeRecord:
    """The episode record a JSON value holds (upgraded to this version first); RecordError says what is wrong with
    one that is not."""
    return read_versioned(data, EpisodeRecord, "record_version", RECORD_VERSION, UPGRADES, "episode record",
                          RecordError)


def record_problem(data: Any) -> str | None:
    """What makes `data` unusable as an episode record, or None when it is one."""
    try:
        read_record(data)
    except RecordError as error:
        return str(error)
    return None


def new_record(**fields: Any) -> EpisodeRecord:
    """A record of this version from its fields (`key` made from harness, task and trial when not given)."""
    if "key" not in fields:
        fields["key"] = episode_key(fields.get("harness", ""), fields.get("task_id", ""), fields.get("trial") or 1)
    return read_record({**fields, "record_version": RECORD_VERSION})
