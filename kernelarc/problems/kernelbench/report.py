"""Records of a KernelBench import: one per file (converted or failed, with why) and the summary.

Place in the flow: the per-file child of `convert_worker` writes a `FileResult` as JSON; the
host (`importer.py`) reads it back through this model, or makes a failed one itself when the
subprocess timed out or died, and writes `ImportReport` as `OUT/import_report.json`.
"""

from enum import StrEnum

from pydantic import Field

from kernelarc.schema.base import RecordModel


class FailureCause(StrEnum):
    """Why a file did not convert (the report groups failures by this)."""

    NOT_KERNELBENCH = "not_kernelbench"
    """No top-level `class Model`, `get_inputs` or `get_init_inputs`."""
    SYNTAX_ERROR = "syntax_error"
    """The file does not parse."""
    UNSUPPORTED_SOURCE = "unsupported_source"
    """Top-level code that cannot run inside the reference's builder function
    (`from x import *`, a `global` statement)."""
    MODULE_FAILED = "module_failed"
    """Running the file's top-level code raised."""
    INIT_FAILED = "init_failed"
    """`get_init_inputs()` or `Model(...)` raised on the meta device."""
    INPUTS_FAILED = "inputs_failed"
    """`get_inputs()` raised on the meta device."""
    FORWARD_FAILED = "forward_failed"
    """The forward raised on meta tensors (an op without a meta kernel, data-dependent shapes)."""
    UNSUPPORTED_INPUT = "unsupported_input"
    """A forward input is neither a tensor nor a Python int/float/bool."""
    UNSUPPORTED_DTYPE = "unsupported_dtype"
    """A tensor dtype the SOL-ExecBench format lacks (uint8, complex, ...)."""
    UNSUPPORTED_OUTPUT = "unsupported_output"
    """The forward returns something other than tensors."""
    NONDETERMINISTIC = "nondeterministic"
    """The forward draws random numbers (dropout with p > 0 in training mode, torch.rand)."""
    NOT_SCALABLE = "not_scalable"
    """No size small enough for the CPU workloads could be found."""
    NONFINITE_OUTPUT = "nonfinite_output"
    """The reference gives NaN or Inf on the CPU workload (every candidate would fail)."""
    VERIFY_FAILED = "verify_failed"
    """The converted reference fails on CPU or differs from running the KernelBench model."""
    TIMEOUT = "timeout"
    """The conversion subprocess ran past its time limit."""
    CRASHED = "crashed"
    """The conversion subprocess died without a result."""


class FileResult(RecordModel):
    """The outcome of converting one KernelBench file."""

    source: str = Field(min_length=1)
    """The file, relative to the PATH it was found under (e.g. `level1/36_RMSNorm_.py`)."""
    level: int | None = None
    """KernelBench level (from a `levelN` folder in its path), if any."""
    name: str = Field(min_length=1)
    """Definition name and folder name under OUT."""
    converted: bool
    """Whether a problem dir was written."""
    cause: FailureCause | None = None
    """Why it failed (None when converted)."""
    reason: str | None = None
    """The failure in one or a few lines (None when converted)."""
    warnings: list[str] = Field(default_factory=list)
    """Things a user should know about a converted problem (constant outputs, ...)."""
    op_type: str | None = None
    """The op_type written to the definition."""
    axes: dict[str, str] = Field(default_factory=dict)
    """Axis name -> `var`, `const=N` or `var (derived)`, for a converted problem."""
    cpu_workloads: int = Field(default=0, ge=0)
    """Lines of workload.jsonl."""
    gpu_workloads: int = Field(default=0, ge=0)
    """Lines of workload_gpu.jsonl."""
    seconds: float = Field(default=0.0, ge=0)
    """Wall time of the conversion."""


class ImportReport(RecordModel):
    """`OUT/import_report.json`: every file looked at, converted or not."""

    kernelarc_version: str
    """The version that converted."""
    paths: list[str]
    """The PATH arguments."""
    out: str
    """The output folder."""
    converted: int = Field(ge=0)
    """How many files converted."""
    failed: int = Field(ge=0)
    """How many did not."""
    failures_by_cause: dict[str, list[str]]
    """Cause -> the sources that failed for it."""
    files: list[FileResult]
    """Per file, sorted by level then file number."""
