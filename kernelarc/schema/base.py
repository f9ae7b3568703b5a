"""Shared pydantic base for the wire models.

SOL-ExecBench's own models ignore unknown keys, and files written for them carry keys that we do
not model (e.g. a definition's `constraints`). Wire models therefore ignore extra keys so any
valid SOL-ExecBench file loads; our own records (Attempt, Proposal, EvalRequest) forbid them.
"""

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A frozen model of a SOL-ExecBench file format: unknown keys are ignored, as upstream."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)


class RecordModel(BaseModel):
    """A frozen model of a KernelArc record: unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
