"""The harness parameters of DARC's matched-information controls, declared (`DiagnosisNoteParams`,
`MetadataNoteParams`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DiagnosisNoteParams(BaseModel):
    """The parameters `diagnosis-note` reads."""

    mode: str = Field(default="", description="the diagnosed failure mode the note names (needed)")


class MetadataNoteParams(BaseModel):
    """The parameters `metadata-note` reads."""

    keys: str = Field(default="task_type",
                      description="the reset-info keys whose values the note gives, comma-separated")
