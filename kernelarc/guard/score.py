"""Pure verdict logic: from an evaluation's traces to an attempt's status, scores and verdict.

The walking skeleton accepts naively (a higher geometric-mean speedup is a new best); the
noise-aware benchmark guard replaces this in its own issue.
"""

import math
from dataclasses import dataclass

from kernelarc.schema import EvalStatus, Trace, Verdict


@dataclass(frozen=True)
class Score:
    """What one evaluation amounts to."""

    status: EvalStatus
    """PASSED if every workload passed, else the first failing workload's status."""
    speedup: float | None
    """Geometric-mean speedup over workloads (PASSED only)."""
    latency_ms: float | None
    """Geometric-mean latency over workloads (PASSED only)."""


def score_traces(traces: list[Trace]) -> Score:
    """Summarize per-workload traces."""
    statuses = [t.evaluation.status if t.evaluation else EvalStatus.RUNTIME_ERROR for t in traces]
    failing = [s for s in statuses if s != EvalStatus.PASSED]
    if not traces or failing:
        return Score(failing[0] if failing else EvalStatus.RUNTIME_ERROR, None, None)
    perfs = [t.evaluation.performance for t in traces if t.evaluation and t.evaluation.performance]
    if len(perfs) != len(traces):
        return Score(EvalStatus.RUNTIME_ERROR, None, None)
    speedups = [p.speedup_factor for p in perfs]
    latencies = [p.latency_ms for p in perfs]
    return Score(EvalStatus.PASSED, _geomean(speedups), _geomean(latencies))


def judge(score: Score, best_speedup: float | None) -> Verdict:
    """Naive acceptance: a passing candidate faster than the best so far is the new best."""
    if score.status != EvalStatus.PASSED or score.speedup is None:
        return Verdict.FAILED
    if best_speedup is None or score.speedup > best_speedup:
        return Verdict.NEW_BEST
    return Verdict.CORRECT


def _geomean(values: list[float]) -> float:
    positive = [max(v, 1e-12) for v in values]
    return math.exp(sum(math.log(v) for v in positive) / len(positive))
