"""The ALFWorld interventions' harness parameters, declared: the guard's (`GuardParams`, read by
`action_pruning`, `type_saturation` and `loop_fallback`) and the procedural helps' (`ProceduralParams`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from playground.envs.alfworld.guard import TOP_K
from playground.envs.alfworld.priors import PRIOR_GAMES


class GuardParams(BaseModel):
    """The guard's parameters (`interventions.DEFAULTS` are these defaults)."""

    top_actions: int = Field(default=TOP_K, ge=1, description="commands offered by a repair")
    max_reasks_per_step: int = Field(default=2, ge=0, description="re-asks per step at most")
    fallback: Literal["best", "reask", "give_up"] = Field(default="best",
                                                          description="still invalid after the re-asks: the "
                                                                      "best-ranked command, send it (reask), or give "
                                                                      "up")
    prune_every_step: bool = Field(default=False,
                                   description="action_pruning: also show the ranked view as a note every step (a hint"
                                               " only)")
    view: Literal["full", "top", "random"] = Field(default="top",
                                                   description="action_pruning: the actions the agent is shown: all, "
                                                               "the top_actions, or as many at random")
    recovery_prompt: Literal["repair", "always", "off"] = Field(default="always",
                                                                description="the phase prompt: every step, in re-asks "
                                                                            "only (repair), or off")
    repair: bool = Field(default=True,
                         description="action_pruning: repair invalid actions (false: only the view and prompt act)")
    prior_games: int = Field(default=PRIOR_GAMES, ge=0,
                             description="generated train games the priors come from (0: none)")
    loop_window: int = Field(default=6, ge=0, description="loop_fallback: steps looked back")


class ProceduralParams(BaseModel):
    """The parameters `alfworld_induction`, `alfworld_knowledge` and `alfworld_retrieval_fallback` read."""

    max_reasks_per_step: int = Field(default=2, ge=0, description="re-asks with the help per step at most")
