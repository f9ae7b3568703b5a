"""The benchmark's numbers: geometric means over workloads, their intervals, speedups.

Place in the flow: `report.build_row` measures every latency of a row with these (pure: no
clocks, files or GPU). Apart from the row building because they know nothing of baselines or
of the table, only latencies per workload uuid and the traces and guard rounds that timed them.

Confidence intervals (`CI_METHOD`): a latency's rounds are every evaluation of the same solution
(its own, the guard's re-timing rounds, the confirmation re-run, the bench's repeats); the
interval is the guard's seeded percentile bootstrap over rounds (kernelarc.guard.bootstrap) of the
geometric mean over workloads, widened to hold the point estimate; one round gives none. A
speedup T_base / T_best gets the conservative interval [base_lo / best_hi, base_hi / best_lo].
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kernelarc.ratio_interval import bootstrap_interval
from kernelarc.schema import Attempt, EvalStatus, Trace

CI_CONFIDENCE = 0.95
CI_RESAMPLES = 2000
CI_METHOD = (
    "CI: 95% seeded percentile bootstrap over evaluation rounds (the guard's, "
    "kernelarc.guard.bootstrap) of each latency's geometric mean over workloads; a speedup "
    "T_base/T_best gets [base_lo/best_hi, base_hi/best_lo]; '-' when either side has one round."
)

Interval = list[float]
"""[low, high] (a list, for JSON)."""


@dataclass(frozen=True)
class Measured:
    """A latency (geometric mean over workloads) with its confidence interval."""

    ms: float
    ci: Interval | None
    rounds: int


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None when empty or any value is not positive."""
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def latency_interval(
    rounds: Sequence[Mapping[str, float]], uuids: Sequence[str]
) -> Interval | None:
    """The bootstrap interval of the geometric-mean latency over `rounds` (each a full set of
    workload latencies; incomplete rounds are left out); None with fewer than two rounds."""
    complete = [r for r in rounds if all(r.get(u, 0.0) > 0 for u in uuids)]
    if len(complete) < 2 or not uuids:
        return None
    logs = [[math.log(r[u]) for u in uuids] for r in complete]
    low, high = bootstrap_interval(logs, confidence=CI_CONFIDENCE, resamples=CI_RESAMPLES, seed=0)
    return [low, high]


def measured(
    first: Mapping[str, float], rounds: Sequence[Mapping[str, float]], uuids: Sequence[str]
) -> Measured | None:
    """The point estimate of `first` with the interval of all rounds (widened to hold it)."""
    if not uuids or any(u not in first for u in uuids):
        return None
    point = geomean([first[u] for u in uuids])
    if point is None:
        return None
    all_rounds = [first, *rounds]
    ci = latency_interval(all_rounds, uuids)
    if ci is not None:
        ci = [min(ci[0], point), max(ci[1], point)]
    return Measured(point, ci, len(all_rounds))


def speedup(base: Measured | None, best: Measured | None) -> tuple[float | None, Interval | None]:
    """T_base / T_best and its conservative interval [base_lo/best_hi, base_hi/best_lo]."""
    if base is None or best is None:
        return None, None
    ci = None
    if base.ci is not None and best.ci is not None:
        ci = [base.ci[0] / best.ci[1], base.ci[1] / best.ci[0]]
    return base.ms / best.ms, ci


def trace_latencies(traces: Iterable[Trace]) -> tuple[dict[str, float], dict[str, float]]:
    """(latency, reference latency) per workload uuid of the traces that carry performance."""
    latency: dict[str, float] = {}
    reference: dict[str, float] = {}
    for trace in traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is not None:
            latency[trace.workload.uuid] = perf.latency_ms
            reference[trace.workload.uuid] = perf.reference_latency_ms
    return latency, reference


def retimed_rounds(attempts: Sequence[Attempt], of: Attempt) -> list[dict[str, float]]:
    """Every further PASSED timing of `of`'s solution in the campaign: the guard's re-timing
    rounds (as challenger or as incumbent of later challengers) and its confirmation re-run."""
    order = [t.workload.uuid for t in of.traces]
    pid = of.proposal.id
    rounds: list[dict[str, float]] = []

    def add(latencies: Sequence[float]) -> None:
        if len(latencies) == len(order) and latencies:
            rounds.append(dict(zip(order, latencies, strict=True)))

    for attempt in attempts:
        if attempt.guard is None:
            continue
        for sample in attempt.guard.samples:
            if sample.proposal_id == pid and sample.status == EvalStatus.PASSED:
                add(sample.latencies_ms)
        confirmation = attempt.guard.confirmation
        if attempt.proposal.id == pid and confirmation and confirmation.status == "PASSED":
            add(confirmation.latencies_ms)
    return rounds
