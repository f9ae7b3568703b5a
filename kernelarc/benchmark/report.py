"""The campaign benchmark's table: one row per problem from a campaign's records (pure).

Place in the flow: `scripts/bench_campaign.py` runs one offline campaign per problem and measures
the torch.compile baselines the campaign did not evaluate; this module turns attempts.jsonl,
campaign.json and those baseline runs into a `ProblemRow` each, the suite summary, and the
markdown table of docs/benchmarks.md. Nothing here reads clocks, files or the GPU.

Per problem (every latency a geometric mean over the problem's workloads):
- eager: the compiler agent's eager attempt (the reference as written, timed as a candidate),
  else the median of the reference timings in every passing evaluation;
- compile / max-autotune: the `compile-default` run, and T_b = the fastest passing run whose
  variant starts with `compile-max-autotune` (with or without CUDA graphs), as the exporter does;
- best: the campaign's incumbent (its last accepted NEW_BEST, campaign.json's best);
- roofline: T_SOL, the bound recorded in campaign.json (unique bytes at the copy bandwidth, FLOPs
  at the matmul rate, ceilings measured on the machine where it says so);
- fraction of roofline: geometric mean over workloads of T_SOL / T_best;
- SOL score: mean over workloads of S(T_best) with T_b and T_SOL (kernelarc.guard.score.sol_score);
- candidates to 90%: attempts evaluated until the incumbent was within 90% of the final best's
  speed (latency <= final / 0.9);
- memory-bound: every workload's bound is set by bytes, not FLOPs.
"""

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelarc.campaign.run_record import CampaignRecord
from kernelarc.guard.score import sol_score
from kernelarc.schema import Attempt, EvalStatus, Trace, Verdict

BASELINE_DEFAULT = "compile-default"
"""Compiler-agent variant reported as "torch.compile default"."""
BASELINE_PREFIX = "compile-max-autotune"
"""Variants that can be T_b (max-autotune with and without CUDA graphs)."""
NINETY = 0.9


@dataclass(frozen=True)
class BaselineRun:
    """One evaluation of a torch.compile variant of the reference (campaign attempt or extra)."""

    variant: str
    """Compiler-agent variant tag (`compile-default`, `compile-max-autotune`, ...)."""
    status: str
    """PASSED or the first failing status (or INFRA_ERROR)."""
    latencies_ms: Mapping[str, float]
    """Workload uuid -> median latency (PASSED only)."""
    reference_ms: Mapping[str, float]
    """Workload uuid -> the reference's latency measured in the same evaluation."""
    source: str
    """`campaign attempt <i>` or `bench` (measured after the campaign, same protocol)."""


@dataclass
class ProblemRow:
    """One problem's line of the benchmark table (latencies in ms)."""

    problem: str
    workloads: int
    memory_bound: bool
    eager_ms: float | None
    compile_ms: float | None
    max_autotune_ms: float | None
    """T_b."""
    max_autotune_variant: str
    best_ms: float | None
    best_by: str
    """`agent: tag` of the best attempt."""
    roofline_ms: float | None
    """T_SOL."""
    fraction_of_roofline: float | None
    sol_score: float | None
    speedup_vs_max_autotune: float | None
    speedup_vs_eager: float | None
    candidates_to_90: int | None
    attempts: int
    passed: int
    ceiling_source: str
    """measured / cache / config."""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None when empty or any value is not positive."""
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


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


def baseline_runs_from_attempts(attempts: Iterable[Attempt]) -> list[BaselineRun]:
    """The compiler agent's torch.compile attempts of a campaign, as baseline runs."""
    runs = []
    for attempt in attempts:
        variant = attempt.proposal.knobs.get("variant")
        if not isinstance(variant, str) or attempt.proposal.knobs.get("compiled") is False:
            continue
        latency, reference = trace_latencies(attempt.traces)
        passed = attempt.status == EvalStatus.PASSED
        runs.append(
            BaselineRun(
                variant=variant,
                status=str(attempt.status),
                latencies_ms=latency if passed else {},
                reference_ms=reference,
                source=f"campaign attempt {attempt.index}",
            )
        )
    return runs


def incumbent(attempts: Sequence[Attempt], record: CampaignRecord) -> Attempt | None:
    """The campaign's best: the attempt campaign.json names, else the last NEW_BEST."""
    accepted = [a for a in attempts if a.verdict == Verdict.NEW_BEST]
    if record.best_proposal_id is not None:
        named = [a for a in accepted if a.proposal.id == record.best_proposal_id]
        if named:
            return named[-1]
    return accepted[-1] if accepted else None


def candidates_to_fraction(attempts: Sequence[Attempt], final_ms: float, fraction: float) -> int:
    """How many attempts, in completion order, until the incumbent's latency was within
    `fraction` of the final best's speed (latency <= final_ms / fraction)."""
    for position, attempt in enumerate(attempts, start=1):
        latency = attempt.latency_ms
        accepted = attempt.verdict == Verdict.NEW_BEST and latency is not None
        if accepted and latency is not None and latency <= final_ms / fraction:
            return position
    return len(attempts)


def _fastest(runs: Iterable[BaselineRun], uuids: Sequence[str], prefix: str) -> BaselineRun | None:
    best: tuple[float, BaselineRun] | None = None
    for run in runs:
        if run.status != EvalStatus.PASSED or not run.variant.startswith(prefix):
            continue
        mean = geomean([run.latencies_ms[u] for u in uuids if u in run.latencies_ms])
        if mean is None or any(u not in run.latencies_ms for u in uuids):
            continue
        if best is None or mean < best[0]:
            best = (mean, run)
    return best[1] if best else None


def _eager_ms(
    attempts: Sequence[Attempt], runs: Iterable[BaselineRun], uuids: Sequence[str]
) -> float | None:
    """The compiler agent's eager attempt (timed like every candidate), else the median of
    the reference timings the judge made in every passing evaluation."""
    for attempt in attempts:
        if attempt.proposal.knobs.get("variant") == "eager" and attempt.latency_ms is not None:
            latency = trace_latencies(attempt.traces)[0]
            if all(u in latency for u in uuids):
                return geomean([latency[u] for u in uuids])
    samples: dict[str, list[float]] = {u: [] for u in uuids}
    for attempt in attempts:
        if attempt.status == EvalStatus.PASSED:
            for uuid, ms in trace_latencies(attempt.traces)[1].items():
                samples.setdefault(uuid, []).append(ms)
    for run in runs:
        if run.source == "bench" and run.status == EvalStatus.PASSED:
            for uuid, ms in run.reference_ms.items():
                samples.setdefault(uuid, []).append(ms)
    medians = [statistics.median(samples[u]) for u in uuids if samples.get(u)]
    return geomean(medians) if len(medians) == len(uuids) else None


def build_row(
    problem: str,
    attempts: Sequence[Attempt],
    record: CampaignRecord,
    extra_baselines: Sequence[BaselineRun] = (),
) -> ProblemRow:
    """The table row of one campaign (plus the baselines measured after it)."""
    bounds = record.roofline.bounds if record.roofline else []
    uuids = [b.workload for b in bounds]
    if not uuids:
        uuids = sorted({t.workload.uuid for a in attempts for t in a.traces})
    runs = [*baseline_runs_from_attempts(attempts), *extra_baselines]
    notes: list[str] = []
    best = incumbent(attempts, record)
    best_lat = trace_latencies(best.traces)[0] if best else {}
    compile_run = _fastest(runs, uuids, BASELINE_DEFAULT)
    tb_run = _fastest(runs, uuids, BASELINE_PREFIX)
    if tb_run is None:
        notes.append("no passing torch.compile max-autotune run: no T_b")
    t_sol = {b.workload: b.bound_ms for b in bounds}
    memory_bound = bool(bounds) and all(
        record.roofline is not None
        and b.flops / record.roofline.ceiling.matmul_flops_per_s
        <= b.bytes / record.roofline.ceiling.copy_bytes_per_s
        for b in bounds
    )
    row_ms = geomean([best_lat[u] for u in uuids]) if best and len(best_lat) >= len(uuids) else None
    fraction = sol = vs_tb = None
    if row_ms is not None and len(t_sol) == len(uuids):
        fraction = geomean([t_sol[u] / best_lat[u] for u in uuids])
    if row_ms is not None and tb_run is not None:
        vs_tb = geomean([tb_run.latencies_ms[u] / best_lat[u] for u in uuids])
        if len(t_sol) == len(uuids):
            scores = [sol_score(best_lat[u], t_sol[u], tb_run.latencies_ms[u]) for u in uuids]
            sol = sum(scores) / len(scores)
    eager = _eager_ms(attempts, runs, uuids)
    passed = sum(1 for a in attempts if a.status == EvalStatus.PASSED)
    return ProblemRow(
        problem=problem,
        workloads=len(uuids),
        memory_bound=memory_bound,
        eager_ms=eager,
        compile_ms=geomean([compile_run.latencies_ms[u] for u in uuids]) if compile_run else None,
        max_autotune_ms=geomean([tb_run.latencies_ms[u] for u in uuids]) if tb_run else None,
        max_autotune_variant=f"{tb_run.variant} ({tb_run.source})" if tb_run else "",
        best_ms=row_ms,
        best_by=f"{best.proposal.agent}: {best.proposal.solution.name}" if best else "",
        roofline_ms=geomean(list(t_sol.values())) if t_sol else None,
        fraction_of_roofline=fraction,
        sol_score=sol,
        speedup_vs_max_autotune=vs_tb,
        speedup_vs_eager=eager / row_ms if eager is not None and row_ms else None,
        candidates_to_90=(
            candidates_to_fraction(attempts, best.latency_ms, NINETY)
            if best is not None and best.latency_ms is not None
            else None
        ),
        attempts=len(attempts),
        passed=passed,
        ceiling_source=record.roofline.ceiling.source if record.roofline else "",
        notes=notes,
    )


@dataclass(frozen=True)
class Summary:
    """The suite's headline numbers against the issue's goals."""

    geomean_speedup_vs_max_autotune: float | None
    """Over problems with a T_b and a best (goal >= 1.2)."""
    memory_bound_fractions: dict[str, float]
    """Fraction of roofline of each memory-bound problem (goal >= 0.85 each)."""
    problems: int
    """Rows in the table."""


def summarize(rows: Sequence[ProblemRow]) -> Summary:
    """Headline numbers of the rows."""
    speedups = [r.speedup_vs_max_autotune for r in rows if r.speedup_vs_max_autotune]
    fractions = {
        r.problem: r.fraction_of_roofline
        for r in rows
        if r.memory_bound and r.fraction_of_roofline is not None
    }
    return Summary(geomean(speedups), fractions, len(rows))


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


TABLE_HEADER = (
    "| problem | bound | eager ms | compile ms | max-autotune ms (T_b) | best ms | "
    "roofline ms (T_SOL) | T_SOL/T_best | SOL score | x max-autotune | cands to 90% | "
    "evaluated (passed) | best by |"
)


def markdown_table(rows: Sequence[ProblemRow]) -> str:
    """The rows as a markdown table, then the summary lines."""
    lines = [TABLE_HEADER, "|" + " --- |" * TABLE_HEADER.count(" | ") + " --- |"]
    for r in rows:
        cells = [
            r.problem,
            "memory" if r.memory_bound else "compute",
            _fmt(r.eager_ms),
            _fmt(r.compile_ms),
            _fmt(r.max_autotune_ms),
            _fmt(r.best_ms),
            _fmt(r.roofline_ms),
            _fmt(r.fraction_of_roofline, 3),
            _fmt(r.sol_score, 3),
            _fmt(r.speedup_vs_max_autotune, 3),
            "-" if r.candidates_to_90 is None else str(r.candidates_to_90),
            f"{r.attempts} ({r.passed})",
            r.best_by or "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    summary = summarize(rows)
    fractions = ", ".join(f"{k} {v:.3f}" for k, v in summary.memory_bound_fractions.items())
    lines += [
        "",
        f"Geometric-mean speedup over torch.compile max-autotune: "
        f"{_fmt(summary.geomean_speedup_vs_max_autotune, 3)} (goal >= 1.2).",
        f"Fraction of roofline on memory-bound problems: {fractions or '-'} (goal >= 0.85).",
    ]
    return "\n".join(lines) + "\n"
