"""Every score KernelArc reports, in one place: an evaluation's status, geometric-mean speedup
and latency (the vector the guard compares), and the SOL score of a PASSED attempt.

Place in the flow: the campaign loop scores every sandbox result; `verdict.py` and `replay.py`
score recorded traces the same way. The SOL score has this one implementation
(`score_attempt`), which the MLflow metric (`report.sol_score.SolScorer`), `kernelarc report`
and the exporter's scores.csv all call, so one attempt has one SOL score everywhere. Its
definition (documented once, in leaderboard/README.md "SOL score"):

- S(T_k) = 1 / (1 + max(T_k - T_SOL, 0) / (T_b - T_SOL)) per workload, so S lies in (0, 1]
  (a latency at or under the bound scores 1; SOL-ExecBench leaves it unclamped, which gave
  scores above 1 and below 0 for noisy timings); if T_b <= T_SOL: 1.0 when T_k <= T_SOL, else
  0.0. The problem's score is the mean over workloads.
- T_k: the trace's latency; T_b: the trace's own reference latency (timed by the same
  evaluation on the same inputs, like the speedup); T_SOL: a roofline bound given by the caller.
  A per-campaign torch.compile time is not T_b: it is one noisy measurement per campaign, and
  dividing by it ranked one kernel differently in each campaign.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kernelarc.schema import Attempt, EvalStatus, Performance, Trace

REFERENCE_BASELINE = "reference"
"""T_b label: the trace's reference latency."""


@dataclass(frozen=True)
class SpeedupInterval:
    """The confidence interval of a (geometric-mean) speedup and how it was made."""

    estimate: float
    """The interleaved estimate the interval is of (geometric mean over workloads)."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    method: str
    """How: the runner's per-workload method, and how workloads were combined."""


AGGREGATE_METHOD = (
    "geometric mean over {n} workloads of the per-workload bounds (at least as wide as the "
    "interval of the geometric mean when workloads vary independently); per workload: {each}"
)
"""How `speedup_interval` combines workloads (stated on every aggregate it makes)."""


def speedup_interval(perfs: list[Performance]) -> SpeedupInterval | None:
    """The interval of the geometric-mean speedup over workloads, None unless every workload
    carries one (runner `TimingConfig.interleave`; older traces carry none).

    One workload: its own interval and method. Several: the geometric means of the lows, of
    the estimates and of the highs (`AGGREGATE_METHOD`), which keeps low <= estimate <= high.
    """
    if not perfs:
        return None
    rows = [
        (p.speedup_ci_low, p.interleaved_speedup, p.speedup_ci_high, p.speedup_ci_method)
        for p in perfs
    ]
    lows, points, highs, methods = [], [], [], []
    for low, point, high, method in rows:
        if low is None or point is None or high is None or not method:
            return None
        lows.append(low)
        points.append(point)
        highs.append(high)
        methods.append(method)
    if len(rows) == 1:
        return SpeedupInterval(points[0], lows[0], highs[0], methods[0])
    # The per-workload methods differ only in their "N pairs x K calls" tail.
    each = "; ".join(sorted({m.rsplit(", ", 1)[0] for m in methods}))
    return SpeedupInterval(
        geometric_mean(points),
        geometric_mean(lows),
        geometric_mean(highs),
        AGGREGATE_METHOD.format(n=len(rows), each=each),
    )


def interval_fields(interval: SpeedupInterval | None) -> dict[str, float | str | None]:
    """The Attempt fields of an interval (all None without one)."""
    if interval is None:
        return {
            "interleaved_speedup": None,
            "speedup_ci_low": None,
            "speedup_ci_high": None,
            "speedup_ci_method": None,
        }
    return {
        "interleaved_speedup": interval.estimate,
        "speedup_ci_low": interval.low,
        "speedup_ci_high": interval.high,
        "speedup_ci_method": interval.method,
    }


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
    interval: SpeedupInterval | None = None
    """The speedup's confidence interval (PASSED and every workload interleaved only)."""


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
    return Score(
        EvalStatus.PASSED,
        geomean(speedups),
        geomean(latencies),
        tuple(latencies),
        speedup_interval(perfs),
    )


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


def geometric_mean(values: list[float]) -> float:
    """Geometric mean of positive values (0.0 if any is 0; NaN for an empty list)."""
    if not values:
        return math.nan
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def sol_score(t_k: float, t_sol: float, t_b: float) -> float:
    """The SOL score of latency t_k given the bound t_sol and the baseline t_b, in [0, 1]."""
    if t_b <= t_sol:
        return 1.0 if t_k <= t_sol else 0.0
    return 1.0 / (1.0 + max(t_k - t_sol, 0.0) / (t_b - t_sol))


@dataclass(frozen=True)
class WorkloadScore:
    """One workload's times and score."""

    workload: str
    """Workload uuid."""
    latency_ms: float
    """T_k."""
    reference_latency_ms: float
    """The reference's latency on the same inputs (T_b)."""
    t_sol_ms: float | None
    """Speed-of-light bound (None: not available)."""
    sol_score: float | None
    """S, or None without T_SOL."""


@dataclass(frozen=True)
class ProblemScore:
    """What one PASSED attempt scores (scores.csv, the report, MLflow)."""

    workloads: tuple[WorkloadScore, ...]
    """Per workload, in trace order."""
    latency_ms: float
    """Geometric mean of T_k."""
    reference_latency_ms: float
    """Geometric mean of the reference latency (= T_b)."""
    speedup: float
    """Geometric mean of the per-workload speedup factors (reference / T_k)."""
    t_sol_ms: float | None
    """Geometric mean of T_SOL, None unless every workload has one."""
    t_sol_source: str
    """Where the bounds came from ('' when none)."""
    sol_score: float | None
    """Mean over workloads of S, None unless every workload has T_SOL."""
    hardware: str
    """The traces' hardware names, joined with `+` when several."""
    cpu_timed: bool
    """Some trace was timed on the CPU (a pipeline check, not kernel performance)."""
    interval: SpeedupInterval | None = None
    """The speedup's confidence interval (`speedup_interval`; None: a trace without one)."""

    @property
    def t_b_ms(self) -> float:
        """Geometric mean of T_b (the reference latency)."""
        return self.reference_latency_ms

    @property
    def t_b_source(self) -> str:
        """What T_b is."""
        return REFERENCE_BASELINE


def score_attempt(
    attempt: Attempt, bounds_ms: Mapping[str, float] | None, bounds_source: str
) -> ProblemScore:
    """Score a PASSED attempt; `bounds_ms` is T_SOL per workload uuid (None: no SOL score).

    Raises:
        ValueError: a trace without performance (the attempt did not pass), or no traces.
    """
    rows: list[WorkloadScore] = []
    methods: set[str | None] = set()
    perfs: list[Performance] = []
    for trace in attempt.traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is None:
            msg = f"attempt {attempt.index} ({attempt.proposal.id}): trace without performance"
            raise ValueError(msg)
        perfs.append(perf)
        methods.add(perf.timing_method)
        t_sol = bounds_ms.get(trace.workload.uuid) if bounds_ms is not None else None
        t_b = perf.reference_latency_ms
        score = sol_score(perf.latency_ms, t_sol, t_b) if t_sol is not None else None
        rows.append(WorkloadScore(trace.workload.uuid, perf.latency_ms, t_b, t_sol, score))
    if not rows:
        msg = f"attempt {attempt.index} ({attempt.proposal.id}) has no traces"
        raise ValueError(msg)
    complete = all(r.sol_score is not None for r in rows)
    hardware = sorted(
        {t.evaluation.environment.hardware for t in attempt.traces if t.evaluation is not None}
    )
    return ProblemScore(
        workloads=tuple(rows),
        latency_ms=geometric_mean([r.latency_ms for r in rows]),
        reference_latency_ms=geometric_mean([r.reference_latency_ms for r in rows]),
        speedup=geometric_mean([_speedup(r) for r in rows]),
        t_sol_ms=geometric_mean([r.t_sol_ms or 0.0 for r in rows]) if complete else None,
        t_sol_source=bounds_source if complete else "",
        sol_score=sum(r.sol_score or 0.0 for r in rows) / len(rows) if complete else None,
        hardware="+".join(hardware),
        cpu_timed="cpu_monotonic" in methods,
        interval=speedup_interval(perfs),
    )


def _speedup(row: WorkloadScore) -> float:
    if row.latency_ms <= 0:
        return math.inf
    return row.reference_latency_ms / row.latency_ms
