"""DART's harness parameters, declared: the recovery budget every sidecar reads (`SidecarParams`) and DART's
switches (`DartParams`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SidecarParams(BaseModel):
    """The parameters every sidecar (DART and the baselines) reads."""

    max_recoveries: int = Field(default=3, ge=0, description="recoveries per episode at most")


class DartParams(SidecarParams):
    """The parameters `dart` reads (its ablations set them)."""

    consumer_check: bool = Field(default=True, description="the committed-consumer check")
    effect_check: bool = Field(default=True, description="the effect-policy condition and admission check")
    certify: bool = Field(default=True, description="checkpoints aligned to certified instance boundaries (false: any)")
    entry_only: bool = Field(default=False,
                             description="restore only the failed instance's entry (no commit checkpoints)")
    exit_candidates: bool = Field(default=False, description="the failed instance's exit checkpoint is a candidate too")
    wide_search: bool = Field(default=False,
                              description="every stable checkpoint up to the aligned boundary, other instances' "
                                          "included")
