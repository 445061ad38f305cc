"""A run's summary (`summary.json`): the typed, versioned model of the file, checked when it is written and when it
is read.

The runner writes one at the end of every session of a run (`playground.run.report.summarise_run` computes it from
the episode records): the env, agent and task count, one `HarnessFigures` per harness (success with its Wilson
interval, steps, tokens, detections, interventions, verdicts, lessons, errors, and, with repeated trials, pass^k and
the noise floor), and how the session ended (episodes left unfinished, a breaker, a token budget or an interrupt that
stopped it). Keys the model does not declare (a figure a later version adds) are kept.

Versions. A summary names its format version (`summary_version`, `SUMMARY_VERSION` now); one without it is version
1 (written before summaries were typed), which `upgrade_v1` reads: every field it could lack has the default its
readers assumed. A version newer than `SUMMARY_VERSION` is refused (`SummaryError`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from playground.core.errors import PlaygroundError
from playground.core.versions import read_versioned

SUMMARY_VERSION = 2  # the summary format this module writes; 1: summaries written before `summary_version`


class SummaryError(PlaygroundError, ValueError):
    """A JSON value that is not a run summary of a version this module reads; the message says what is wrong."""


class _Frozen(BaseModel):
    """A frozen model of JSON values that keeps keys it does not declare."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)


Counts = dict[str, StrictInt]


class HarnessFigures(_Frozen):
    """One harness's figures over its episode records (`summarise_harness`)."""

    episodes: StrictInt = Field(ge=0)
    success_rate: float
    success_ci95: list[float]
    mean_steps: float = 0.0
    invalid_actions_per_episode: float = 0.0
    schema_invalid_per_episode: float | None = None
    detected_failures: StrictInt = 0
    interventions: Counts = Field(default_factory=dict)
    verified_recoveries: StrictInt = 0
    lessons_added: StrictInt = 0
    lessons_retrieved: StrictInt = 0
    lessons_helped: StrictInt = 0
    failures: dict[str, Counts] = Field(default_factory=dict)
    prompt_tokens: StrictInt = 0
    completion_tokens: StrictInt = 0
    judge_prompt_tokens: StrictInt = 0
    judge_completion_tokens: StrictInt = 0
    tokens_per_episode: float | None = None
    judge_tokens_per_episode: float | None = None
    resolved_share: float | None = None
    seconds_per_step: float | None = None
    mean_score: float | None = None
    scored_episodes: StrictInt = 0
    errors: StrictInt = 0
    statuses: Counts = Field(default_factory=dict)


class RunSummary(_Frozen):
    """A run's `summary.json`: what was played, each harness's figures, and how the session ended."""

    env: StrictStr
    agent: StrictStr
    tasks: StrictInt = Field(ge=0)
    harnesses: dict[str, HarnessFigures]
    run_id: StrictStr | None = None
    split: StrictStr | None = None
    seed: StrictInt | None = None
    max_steps: StrictInt | None = None
    unfinished: StrictInt = 0
    unfinished_keys: list[StrictStr] = Field(default_factory=list)
    stopped_by_breaker: StrictBool = False
    stopped_by_budget: StrictBool = False
    max_tokens_total: StrictInt | None = None  # the run's token budget (`--max-tokens-total`), when one is given
    tokens_spent: StrictInt | None = None  # with a budget: the tokens the recorded episodes spent
    not_played: StrictInt | None = None  # with a budget: the episodes it left unplayed
    response_cache: Counts | None = None  # the run's response-cache hits and misses, where the cache was used
    interrupted: StrictBool = False
    summary_version: StrictInt = SUMMARY_VERSION

    def as_json(self) -> dict[str, Any]:
        """The summary's JSON object, as the runner writes it: the fields that default to None only when set,
        `interrupted` only when true."""
        data = self.model_dump(mode="json")
        for name, spec in type(self).model_fields.items():
            if data.get(name) is None and spec.default is None:
                data.pop(name, None)
        if not self.interrupted:
            data.pop("interrupted")
        return data


def upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 summary as version 2: the version named; the fields it lacks take the model's defaults, which
    are what version-1 readers assumed."""
    return {**data, "summary_version": 2}


UPGRADES: dict[int, Callable[[Mapping[str, Any]], dict[str, Any]]] = {1: upgrade_v1}  # version -> version + 1


def read_summary(data: Any) -> RunSummary:
    """The run summary a JSON value holds (upgraded to this version first); SummaryError says what is wrong."""
    return read_versioned(data, RunSummary, "summary_version", SUMMARY_VERSION, UPGRADES, "summary", SummaryError,
                          label="the summary")
