"""SOL score of an exported attempt: T_k from its traces, T_b and T_SOL per workload (pure).

Place in the flow: `leaderboard.inputs` gathers attempts and bounds, this module scores them, and
`leaderboard.selection` ranks by the score. Nothing here reads files, clocks or the network.

- S(T_k) = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)); if T_b <= T_SOL: 1.0 when T_k <= T_SOL,
  else 0.0 (SOL-ExecBench `sol_score.py`; unclamped, as upstream).
- T_b per workload: the same campaign's torch.compile baseline (a PASSED compiler attempt whose
  knob `variant` starts with `compile-max-autotune`; the one with the lowest geometric-mean
  latency when there are several), else the median of the reference latencies the campaign's
  PASSED evaluations measured (`reference_baseline`), else the trace's own reference latency
  (labelled `reference`). One T_b for every attempt of a campaign: with each attempt's own
  reference timing, an older, slower accepted attempt could outscore the faster one the guard
  accepted after it just because the reference ran slower in its evaluation.
- T_SOL per workload: a roofline bound given by the caller, or none; then no SOL score.
- Problem score: the mean over workloads of S (the ROCm fork's aggregation); the latencies shown
  per problem (T_k, reference, T_b, T_SOL) are geometric means over workloads.
"""

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kernelarc.schema import Attempt, EvalStatus

BASELINE_VARIANT_PREFIX = "compile-max-autotune"
"""Knob `variant` prefix of the compiler agent's attempts that serve as T_b."""
REFERENCE_BASELINE = "reference"
"""T_b label when no torch.compile baseline passed in the campaign."""


@dataclass(frozen=True)
class Baseline:
    """T_b per workload uuid, with where it came from."""

    latencies_ms: Mapping[str, float]
    """Workload uuid to baseline latency."""
    source: str
    """`torch.compile:<variant> (attempt <index>)` or `reference`."""


@dataclass(frozen=True)
class WorkloadScore:
    """One workload's times and score."""

    workload: str
    """Workload uuid."""
    latency_ms: float
    """T_k."""
    reference_latency_ms: float
    """The reference's latency on the same inputs."""
    t_b_ms: float
    """Baseline latency."""
    t_sol_ms: float | None
    """Speed-of-light bound (None: not available)."""
    sol_score: float | None
    """S, or None without T_SOL."""


@dataclass(frozen=True)
class ProblemScore:
    """What scores.csv shows for one exported attempt."""

    workloads: tuple[WorkloadScore, ...]
    """Per workload, in trace order."""
    latency_ms: float
    """Geometric mean of T_k."""
    reference_latency_ms: float
    """Geometric mean of the reference latency."""
    speedup: float
    """Geometric mean of the per-workload speedup factors (reference / T_k)."""
    t_b_ms: float
    """Geometric mean of T_b."""
    t_b_source: str
    """See Baseline.source."""
    t_sol_ms: float | None
    """Geometric mean of T_SOL, None unless every workload has one."""
    t_sol_source: str
    """Where the bounds came from ('' when none)."""
    sol_score: float | None
    """Mean over workloads of S, None unless every workload has T_SOL."""
    hardware: str
    """The traces' hardware names, joined with `+` when several."""


def sol_score(t_k: float, t_sol: float, t_b: float) -> float:
    """The SOL-ExecBench score of latency t_k given the bound t_sol and the baseline t_b."""
    if t_b <= t_sol:
        return 1.0 if t_k <= t_sol else 0.0
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


def geometric_mean(values: Sequence[float]) -> float:
    """Geometric mean of positive values (0.0 if any is 0; NaN for an empty sequence)."""
    if not values:
        return math.nan
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def is_baseline(attempt: Attempt) -> bool:
    """A PASSED torch.compile max-autotune attempt of the compiler agent."""
    variant = attempt.proposal.knobs.get("variant")
    return (
        attempt.status == EvalStatus.PASSED
        and isinstance(variant, str)
        and variant.startswith(BASELINE_VARIANT_PREFIX)
        and attempt.proposal.knobs.get("compiled") is not False
    )


def compile_baseline(attempts: Iterable[Attempt]) -> Baseline | None:
    """The campaign's torch.compile baseline: the fastest (geometric mean) baseline attempt,
    ties to the lower index; None when no baseline attempt passed."""
    best: tuple[float, int, Attempt] | None = None
    for attempt in attempts:
        if not is_baseline(attempt):
            continue
        times = _latencies(attempt)
        if not times:
            continue
        key = (geometric_mean(list(times.values())), attempt.index, attempt)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return None
    attempt = best[2]
    variant = attempt.proposal.knobs.get("variant")
    return Baseline(_latencies(attempt), f"torch.compile:{variant} (attempt {attempt.index})")


def reference_baseline(attempts: Iterable[Attempt]) -> Baseline | None:
    """T_b from the reference itself: per workload, the median of the reference latencies
    measured by the PASSED evaluations among `attempts` (one campaign); None without any."""
    measured: dict[str, list[float]] = {}
    count = 0
    for attempt in attempts:
        if attempt.status != EvalStatus.PASSED:
            continue
        found = False
        for trace in attempt.traces:
            perf = trace.evaluation.performance if trace.evaluation else None
            if perf is not None and 0 < perf.reference_latency_ms < math.inf:
                measured.setdefault(trace.workload.uuid, []).append(perf.reference_latency_ms)
                found = True
        count += found
    if not measured:
        return None
    medians = {uuid: statistics.median(values) for uuid, values in measured.items()}
    plural = "s" if count != 1 else ""
    return Baseline(medians, f"{REFERENCE_BASELINE} (median of {count} evaluation{plural})")


def score_attempt(
    attempt: Attempt,
    baseline: Baseline | None,
    bounds_ms: Mapping[str, float] | None,
    bounds_source: str,
) -> ProblemScore:
    """Score a PASSED attempt.

    Args:
        attempt: the attempt; every trace must carry performance.
        baseline: the campaign's compile baseline; used only if it covers every workload.
        bounds_ms: T_SOL per workload uuid, or None.
        bounds_source: label of the bounds.

    Raises:
        ValueError: a trace without performance (the attempt did not pass).
    """
    rows: list[WorkloadScore] = []
    use_baseline = baseline is not None and all(
        t.workload.uuid in baseline.latencies_ms for t in attempt.traces
    )
    for trace in attempt.traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is None:
            msg = f"attempt {attempt.index} ({attempt.proposal.id}): trace without performance"
            raise ValueError(msg)
        uuid = trace.workload.uuid
        t_b = perf.reference_latency_ms
        if use_baseline and baseline is not None:
            t_b = baseline.latencies_ms[uuid]
        t_sol = bounds_ms.get(uuid) if bounds_ms is not None else None
        score = sol_score(perf.latency_ms, t_sol, t_b) if t_sol is not None else None
        rows.append(
            WorkloadScore(uuid, perf.latency_ms, perf.reference_latency_ms, t_b, t_sol, score)
        )
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
        t_b_ms=geometric_mean([r.t_b_ms for r in rows]),
        t_b_source=baseline.source if use_baseline and baseline else REFERENCE_BASELINE,
        t_sol_ms=geometric_mean([r.t_sol_ms or 0.0 for r in rows]) if complete else None,
        t_sol_source=bounds_source if complete else "",
        sol_score=sum(r.sol_score or 0.0 for r in rows) / len(rows) if complete else None,
        hardware="+".join(hardware),
    )


def _speedup(row: WorkloadScore) -> float:
    if row.latency_ms <= 0:
        return math.inf
    return row.reference_latency_ms / row.latency_ms


def _latencies(attempt: Attempt) -> dict[str, float]:
    out: dict[str, float] = {}
    for trace in attempt.traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is not None:
            out[trace.workload.uuid] = perf.latency_ms
    return out
