"""The SOL-ExecBench Trace model: one evaluation of one solution on one workload."""

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from kernelarc.schema.base import WireModel
from kernelarc.schema.workload import Workload


class EvalStatus(StrEnum):
    """Outcome of evaluating a candidate on a workload (the official set)."""

    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    INVALID_REFERENCE = "INVALID_REFERENCE"


class Environment(WireModel):
    """Where the evaluation ran."""

    hardware: str
    """GPU name, or the CPU model on CPU."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Library versions (torch, triton, cuda, ...)."""


class Correctness(WireModel):
    """Worst errors seen over the correctness rounds."""

    max_relative_error: float = 0.0
    """max |out-ref| / max(|ref|, atol)."""
    max_absolute_error: float = 0.0
    """max |out-ref|."""
    has_nan: bool = False
    """A NaN was seen in an output."""
    has_inf: bool = False
    """An Inf was seen in an output."""
    extra: dict[str, Any] | None = None
    """Additional details."""


class Performance(WireModel):
    """Median latencies of the solution and of the reference."""

    latency_ms: float = Field(ge=0)
    """Median solution latency."""
    reference_latency_ms: float = Field(ge=0)
    """Median reference latency on the same inputs."""
    speedup_factor: float = Field(ge=0)
    """reference_latency_ms / latency_ms."""
    timing_method: str | None = None
    """KernelArc addition: `cupti`, `cuda_events` or `cpu_monotonic` (ignored by the official
    reader)."""
    interleaved_latency_ms: float | None = Field(default=None, ge=0)
    """KernelArc addition: median solution latency over the interleaved blocks (None: the
    interleaved stage did not run; older traces)."""
    interleaved_reference_latency_ms: float | None = Field(default=None, ge=0)
    """KernelArc addition: median reference latency over the interleaved blocks."""
    interleaved_speedup: float | None = Field(default=None, ge=0)
    """KernelArc addition: the interleaved estimate of the speedup, the geometric mean over block
    pairs of reference block median / solution block median (the point the interval is of)."""
    speedup_ci_low: float | None = Field(default=None, ge=0)
    """KernelArc addition: lower bound of the speedup's confidence interval."""
    speedup_ci_high: float | None = Field(default=None, ge=0)
    """KernelArc addition: upper bound of the speedup's confidence interval."""
    speedup_ci_method: str | None = None
    """KernelArc addition: how the interval was made, e.g. "interleaved ABBA blocks, bootstrap
    95% of the geometric-mean block-median ratio, 8 pairs x 10 calls"."""


class Evaluation(WireModel):
    """The verdict and measurements of one evaluation."""

    status: EvalStatus
    """Outcome."""
    environment: Environment
    """Hardware and libraries."""
    timestamp: str
    """ISO time of the evaluation."""
    log: str = ""
    """Error message or notes (capped)."""
    correctness: Correctness | None = None
    """Present for PASSED and INCORRECT_NUMERICAL."""
    performance: Performance | None = None
    """Present for PASSED only."""

    @model_validator(mode="after")
    def _presence_matches_status(self) -> "Evaluation":
        needs_corr = self.status in (EvalStatus.PASSED, EvalStatus.INCORRECT_NUMERICAL)
        needs_perf = self.status == EvalStatus.PASSED
        if needs_corr and self.correctness is None:
            msg = f"status {self.status} requires correctness"
            raise ValueError(msg)
        if needs_perf and self.performance is None:
            msg = f"status {self.status} requires performance"
            raise ValueError(msg)
        if not needs_corr and self.correctness is not None:
            msg = f"status {self.status} must not carry correctness"
            raise ValueError(msg)
        if not needs_perf and self.performance is not None:
            msg = f"status {self.status} must not carry performance"
            raise ValueError(msg)
        return self


class Trace(WireModel):
    """One line of a traces.jsonl: definition, workload, solution and evaluation."""

    definition: str
    """Definition name."""
    workload: Workload
    """The full workload, tolerance included."""
    solution: str | None = None
    """Solution name."""
    evaluation: Evaluation | None = None
    """The result (absent only for unevaluated workload records)."""
