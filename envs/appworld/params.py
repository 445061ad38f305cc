"""The AppWorld procedural interventions' harness parameters, declared (`ProceduralParams`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ProceduralParams(BaseModel):
    """The parameters `local_induction`, `auto_knowledge` and `retrieval_fallback` read."""

    docs_k: int = Field(default=5, ge=0, description="API docs a help shows at most")
    max_reasks_per_step: int = Field(default=1, ge=0, description="re-asks with the help per step at most")
