"""Summarize an evaluation's per-workload traces: overall status, geometric-mean speedup and
latency, and the latency vector the guard compares.

Place in the flow: the campaign loop scores every sandbox result; `verdict.py` and `replay.py`
score recorded traces the same way.
"""

import math
from dataclasses import dataclass

from kernelarc.schema import EvalStatus, Trace


@dataclass(frozen=True)
class Score:
    """What one evaluation amounts to."""

    status: EvalStatus
    """PASSED if every workload passed, else the first failing workload's status."""
    speedup: float | None
    """Geometric-mean speedup over workloads (PASSED only)."""
    latency_ms: float | None
    """Geometric-mean latency over workloads (PASSED only)."""
    latencies_ms: tuple[float, ...] = ()
    """Median latency per workload, in order (PASSED only)."""


def score_traces(traces: list[Trace]) -> Score:
    """Summarize per-workload traces. A trace without evaluation (a workload a correctness screen
    left unevaluated after another failed) is a failure, but the status is that of the first
    evaluated failure when there is one."""
    evaluated = [t.evaluation.status for t in traces if t.evaluation is not None]
    failing = [s for s in evaluated if s != EvalStatus.PASSED]
    if failing:
        return Score(failing[0], None, None)
    if not traces or len(evaluated) < len(traces):
        return Score(EvalStatus.RUNTIME_ERROR, None, None)
    perfs = [t.evaluation.performance for t in traces if t.evaluation and t.evaluation.performance]
    if len(perfs) != len(traces):
        return Score(EvalStatus.RUNTIME_ERROR, None, None)
    speedups = [p.speedup_factor for p in perfs]
    latencies = [p.latency_ms for p in perfs]
    return Score(EvalStatus.PASSED, geomean(speedups), geomean(latencies), tuple(latencies))


def first_failure_log(traces: list[Trace]) -> str:
    """The log of the first workload that did not pass (empty if none)."""
    for trace in traces:
        if trace.evaluation is not None and trace.evaluation.status != EvalStatus.PASSED:
            return f"{trace.workload.uuid}: {trace.evaluation.status}: {trace.evaluation.log}"
    if any(trace.evaluation is None for trace in traces):
        return "no evaluation"
    return ""


def geomean(values: list[float]) -> float:
    """Geometric mean; values are clamped at 1e-12 so a zero does not take the log of 0."""
    positive = [max(v, 1e-12) for v in values]
    return math.exp(sum(math.log(v) for v in positive) / len(positive))
