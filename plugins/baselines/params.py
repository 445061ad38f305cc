"""The baselines' harness parameters, declared (one pydantic model per baseline), and their validation by the
declaration (`parse_params`), with a clear error.

Every baseline names its own parameters with its prefix (`ace_`, `reflexion_`, `awm_`, `rb_`,
`monitor_`), so one `--param` never changes two baselines of a run at once; the judge options
are shared with Sentry's LLM judges (`judge_base_url` + `judge_model`, or `judge_local=true`).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, Field

from playground import PlaygroundError
from playground.api import JudgeSettings, declared_values

SuccessMode = Literal["auto", "observed", "judge", "env"]  # how a memory baseline tells a success (success.MODES)


class JudgeParams(JudgeSettings):
    """The judge options every memory baseline reads: the host's one judge setting (`JudgeSettings`), as Sentry's
    LLM judges read it."""


JUDGE_DEFAULTS: dict[str, Any] = JudgeParams().model_dump()


class AceParams(JudgeParams):
    """The parameters `ace` reads."""

    ace_mode: Literal["online", "frozen"] = Field(default="online",
                                                  description="online: update after every episode; frozen: read, never"
                                                              " update")
    ace_feedback: Literal["trajectory", "outcome"] = Field(default="trajectory",
                                                           description="the reflector reads the trajectory; outcome: "
                                                                       "also the env's won/lost")
    ace_budget: float = Field(default=1000, ge=0, description="tokens of playbook in the agent's context at most")
    ace_dedupe: float = Field(default=0.85, ge=0,
                              description="word-set similarity at which a new bullet counts as a repeat")
    ace_prune_harmful: float = Field(default=3, ge=0,
                                     description="harmful tags (and more than helpful) at which a bullet is removed")
    ace_max_insights: float = Field(default=4, ge=0,
                                    description="insights the rule reflector writes per episode at most")
    ace_playbook: str = Field(default="", description="the playbook file (default: DIR/playbooks/<harness>.ace.txt)")


class ReflexionParams(JudgeParams):
    """The parameters `reflexion` reads."""

    reflexion_memory: float = Field(default=3, ge=0,
                                    description="reflections shown at most (the paper's memory of 1-3)")


class AwmParams(JudgeParams):
    """The parameters `awm` reads."""

    awm_success: SuccessMode = Field(default="auto", description="how an episode counts as successful (success.py)")
    awm_budget: float = Field(default=800, ge=0, description="tokens of workflows in the agent's context at most")
    awm_max_steps: float = Field(default=15, ge=0, description="steps of a workflow at most")
    awm_memory: str = Field(default="",
                            description="the memory file (default: DIR/playbooks/<harness>.workflows.jsonl)")


class ReasoningBankParams(JudgeParams):
    """The parameters `reasoningbank` reads."""

    rb_k: float = Field(default=1, ge=0, description="memory items retrieved per task (the paper's top-1)")
    rb_items: float = Field(default=3, ge=0, description="memory items distilled per episode at most")
    rb_success: SuccessMode = Field(default="auto", description="how an episode counts as successful (success.py)")
    rb_memory: str = Field(default="", description="the memory file (default: DIR/playbooks/<harness>.memory.jsonl)")


class MonitorParams(BaseModel):
    """The parameters `monitor` reads."""

    monitor_window: float = Field(default=5, ge=0, description="steps back the repeat rule looks")
    monitor_stall: float = Field(default=3, ge=0,
                                 description="steps without anything new before the stall rule fires (0: off)")


class PromptOptParams(BaseModel):
    """The parameters `prompt-opt` reads (the harness `prompt-opt:PATH` sets both)."""

    prompt_file: str = Field(default="", description="the optimised prompt's file")
    prompt_sha256: str = Field(default="",
                               description="its content hash when the run started (a changed file is refused)")


def defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    """A declaration's defaults: the baseline's own parameters first, then the judge options."""
    values = model().model_dump()
    return {**{key: value for key, value in values.items() if key not in JUDGE_DEFAULTS},
            **{key: values[key] for key in JUDGE_DEFAULTS if key in values}}


class BaselineConfigError(PlaygroundError, ValueError):
    """A baseline parameter has a bad value."""


def parse_params(baseline: str, model: type[BaseModel], params: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """A baseline's parameters as a dict, validated by its declaration `model`.

    An instance of `model` (what the host hands a factory: it validated the values) is taken as
    it is; a mapping has the keys `model` declares validated strictly, as a run checks them (a
    bool is true or false, a number is not a string), the defaults filled in. A judge endpoint
    needs its model name too. BaselineConfigError names the baseline, the parameter, the rule it
    breaks and the value.
    """
    values = declared_values(model, params, baseline, BaselineConfigError)
    if values.get("judge_base_url") and not values.get("judge_model"):
        raise BaselineConfigError(f"{baseline}: judge_base_url needs judge_model too (--param judge_model=NAME)")
    return values
