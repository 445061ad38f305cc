"""Sentry's harness parameters, declared: names, types, ranges, defaults and meanings (`SentryParams`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SentryParams(BaseModel):
    """The parameters `sentry` and `validity-guard` read (`harness.DEFAULTS` are these defaults)."""

    window: float = Field(default=5, ge=0, description="W: steps of local evidence")
    k: float = Field(default=5, ge=0, description="lessons retrieved at most")
    horizon: float = Field(default=10, ge=0, description="H: cycles the verifier watches before it admits a lesson")
    admission: Literal["window", "early", "none"] = Field(default="window",
                                                          description="window: judge when the H cycles close; early: "
                                                                      "the quiet_steps rule; none: unverified")
    quiet_steps: float = Field(default=3, ge=0,
                               description="admission=early: steps without the failure before a repair counts as "
                                           "resolved")
    threshold: float = Field(default=0.6, ge=0, description="minimum detection confidence for a soft repair")
    cooldown: float = Field(default=2, ge=0, description="steps after a soft repair with no new soft repair")
    need_check: bool = Field(default=True,
                             description="the intervention-need check (threshold, cooldown); off: every detection is "
                                         "repaired")
    need_judge: Literal["rules", "llm", "auto"] = Field(default="auto", description="who decides the need")
    retrieval: Literal["labels", "type", "any", "random", "off"] = Field(default="labels",
                                                                         description="labels: type + shared labels; "
                                                                                     "type: type only; any: any type; "
                                                                                     "random; off: none")
    bar_loops: float = Field(default=0, ge=0,
                             description="steps after a progress repair during which the looped actions are barred")
    follow_up: float = Field(default=0, ge=0,
                             description="steps after a soft repair that keep offering the actions not tried recently")
    max_repairs: float = Field(default=10, ge=0, description="soft repairs per episode at most")
    top_actions: float = Field(default=12, ge=0, description="actions offered by a hard repair")
    shortlist: bool = Field(default=False,
                            description="a variant: repairs restrict the agent to the actions they offer")
    hard_rank: Literal["goal", "closest"] = Field(default="goal",
                                                  description="the hard repair's order: goal terms first, or the most "
                                                              "like the rejected action first")
    fallback: Literal["best", "reask", "give_up"] = Field(default="reask",
                                                          description="still invalid after the re-asks: send it "
                                                                      "(reask), the top-ranked action, or give up")
    max_reasks_per_step: float = Field(default=2, ge=0, description="re-asks per step at most")
    hard_repair: bool = Field(default=True, description="repair invalid actions")
    screen: bool = Field(default=True, description="run the progress and grounding detectors")
    soft_repair: bool = Field(default=True, description="repair progress and grounding failures")
    update_playbook: bool = Field(default=True, description="store verified lessons")
    playbook_read_only: bool = Field(default=False, description="open the playbook read-only: retrieve, never write")
    persistent: bool = Field(default=False, description="exposure control: the whole playbook in context every step")
    block_early_stop: bool = Field(default=True,
                                   description="an agent that insists on stopping early is offered actions")
    detector: Literal["rules", "llm", "both", "auto"] = Field(default="auto",
                                                              description="progress/grounding detection (auto: the "
                                                                          "judge model when there is one, else rules)")
    verifier: Literal["rules", "llm", "auto"] = Field(default="auto", description="the recovery verifier")
    summariser: Literal["template", "llm", "auto"] = Field(default="auto", description="the lesson summariser")
    judge_history: Literal["window", "blocks"] = Field(default="window",
                                                      description="the steps the LLM detector and need check are "
                                                                  "shown: the last W (window), or from the last "
                                                                  "multiple of W (blocks: W to 2W-1 steps, a prefix "
                                                                  "shared from step to step; a variant)")
    judge_base_url: str = Field(default="", description="the judge model's OpenAI-compatible endpoint ...")
    judge_model: str = Field(default="", description="... and its model name")
    judge_local: bool = Field(default=False, description="... or the embedded GGUF model (default: the agent's model)")


class ValidityGuardParams(SentryParams):
    """The parameters `validity-guard` reads: Sentry's, its ranked view restricting the agent and the top-ranked
    action replacing one still invalid by default (`screen` and `soft_repair` are always off)."""

    shortlist: bool = Field(default=True, description="repairs restrict the agent to the actions they offer")
    fallback: Literal["best", "reask", "give_up"] = Field(default="best",
                                                          description="still invalid after the re-asks: the top-ranked"
                                                                      " action, send it (reask), or give up")
