"""The Finance interventions' harness parameters, declared (`FormatGuardParams`, `DemosParams`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class FormatGuardParams(BaseModel):
    """The parameters `format-guard` reads."""

    max_reasks_per_step: int = Field(default=2, ge=0, description="format re-asks per step at most")


class DemosParams(BaseModel):
    """The parameters `demos-k1` ... `demos-k16` read."""

    demo_pool: str | None = Field(default=None,
                                  description="the train splits demonstrations come from, comma-separated (default: "
                                              "the task set's own)")
    demo_pool_size: int = Field(default=500, ge=1, description="solved train questions in the pool")
