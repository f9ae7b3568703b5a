"""The campaign benchmark's table: one row per problem from a campaign's records (pure).

Place in the flow: `scripts/bench_campaign.py` and `scripts/bench_suite.py` run one offline
campaign per problem and measure the torch.compile baselines the campaign did not evaluate; this
module turns attempts.jsonl, campaign.json and those baseline runs into a `ProblemRow` each, the
summary, and the markdown table of docs/benchmarks.md. Nothing here reads clocks, files or the GPU.

Per problem (every latency a geometric mean over the problem's workloads):
- eager: the compiler agent's eager attempt (the reference as written, timed as a candidate),
  else the median of the reference timings in every passing evaluation;
- compile variants: every torch.compile variant evaluated (by the campaign or after it), each
  with its status; a variant PASSED only if every evaluation of it PASSED;
- compile default: the `compile-default` variant; best compile variant: the fastest PASSED one;
- max-autotune (T_b): one named variant, `MAX_AUTOTUNE[device]`, and only when it PASSED; a failed
  max-autotune is shown with its status and gets no speedup, never replaced by another variant;
- best: the campaign's incumbent (its last accepted NEW_BEST, campaign.json's best);
- roofline: T_SOL, the bound recorded in campaign.json (unique bytes at the copy bandwidth, FLOPs
  at the matmul rate, ceilings measured on the machine where it says so);
- fraction of roofline: geometric mean over workloads of T_SOL / T_best;
- SOL score: mean over workloads of S(T_best) with T_b and T_SOL (kernelarc.guard.score.sol_score);
- candidates to 90%: attempts evaluated until the incumbent was within 90% of the final best's
  speed (latency <= final / 0.9);
- memory-bound: every workload's bound is set by bytes, not FLOPs.

Confidence intervals (`CI_METHOD`): a latency's rounds are every evaluation of the same solution
(its own, the guard's re-timing rounds, the confirmation re-run, the bench's repeats); the
interval is the guard's seeded percentile bootstrap over rounds (kernelarc.guard.bootstrap) of the
geometric mean over workloads, widened to hold the point estimate; one round gives none. A
speedup T_base / T_best gets the conservative interval [base_lo / best_hi, base_hi / best_lo].
"""

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelarc.guard.score import sol_score
from kernelarc.ratio_interval import bootstrap_interval
from kernelarc.rundir.run_record import CampaignRecord
from kernelarc.schema import Attempt, EvalStatus, Proposal, Trace, Verdict

BASELINE_DEFAULT = "compile-default"
"""Compiler-agent variant reported as "torch.compile default"."""
COMPILE_PREFIX = "compile-"
"""Variants that are torch.compile of the reference (candidates for the best compile variant)."""
MAX_AUTOTUNE = {
    "cuda": "compile-max-autotune",
    "cpu": "compile-max-autotune-no-cudagraphs",
}
"""The variant reported as "max-autotune" (T_b) per device: torch.compile(mode="max-autotune");
on CPU, where there are no CUDA graphs, its no-cudagraphs twin."""
NOT_RUN = "NOT_RUN"
"""Status of a baseline nobody evaluated."""
NINETY = 0.9
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
    rounds_ms: Sequence[Mapping[str, float]] = ()
    """Further PASSED timings of the same solution (guard re-timing rounds, confirmation)."""
    error: str = ""
    """Why it did not pass: the first failing workload's log, cut short (empty when PASSED)."""


@dataclass(frozen=True)
class Measured:
    """A latency (geometric mean over workloads) with its confidence interval."""

    ms: float
    ci: Interval | None
    rounds: int


@dataclass
class ProblemRow:
    """One problem's line of the benchmark table (latencies in ms, intervals [low, high])."""

    problem: str
    workloads: int
    memory_bound: bool
    eager_ms: float | None
    compile_status: str
    """Status of torch.compile default (PASSED, a failing status, NOT_RUN)."""
    compile_ms: float | None
    compile_ci: Interval | None
    best_compile_variant: str
    """The fastest PASSED compile variant ('' when none passed)."""
    best_compile_ms: float | None
    best_compile_ci: Interval | None
    max_autotune_variant: str
    """The variant reported as max-autotune (MAX_AUTOTUNE of the device)."""
    max_autotune_status: str
    max_autotune_ms: float | None
    """T_b (PASSED only)."""
    max_autotune_ci: Interval | None
    best_ms: float | None
    best_ci: Interval | None
    best_by: str
    """`agent: solution name` of the best attempt."""
    best_agent: str
    best_family: str
    """Knob space / family of the best (`triton/gen`, `triton/rmsnorm`, `compile`, `eager`)."""
    roofline_ms: float | None
    """T_SOL."""
    fraction_of_roofline: float | None
    sol_score: float | None
    speedup_vs_compile: float | None
    speedup_vs_compile_ci: Interval | None
    speedup_vs_best_compile: float | None
    speedup_vs_best_compile_ci: Interval | None
    speedup_vs_max_autotune: float | None
    """Only when max-autotune PASSED."""
    speedup_vs_max_autotune_ci: Interval | None
    speedup_vs_eager: float | None
    candidates_to_90: int | None
    attempts: int
    passed: int
    passed_families: list[str]
    """Families of the PASSED attempts, sorted."""
    compile_variants: dict[str, dict[str, Any]]
    """Every compile variant: status, ms, ci, rounds, source."""
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


def family_of(proposal: Proposal) -> str:
    """The knob space / family a proposal came from: `triton/gen`, `triton/<template>`,
    `compile` (torch.compile of the reference), `eager`, else its strategy."""
    knobs = proposal.knobs
    space = knobs.get("space")
    if isinstance(space, str) and space:
        return space
    template = knobs.get("template")
    if isinstance(template, str) and template:
        return f"triton/{template}"
    if isinstance(knobs.get("variant"), str):
        return "eager" if knobs.get("compiled") is False else "compile"
    return proposal.strategy


def baseline_runs_from_attempts(attempts: Sequence[Attempt]) -> list[BaselineRun]:
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
                rounds_ms=retimed_rounds(attempts, attempt) if passed else [],
            )
        )
    return runs


def merge_runs(runs: Iterable[BaselineRun]) -> dict[str, BaselineRun]:
    """One run per variant, in order of first appearance: PASSED only if every run of it
    PASSED (else the first failing status), the first run's timing as the point estimate and
    every other PASSED timing as further rounds."""
    grouped: dict[str, list[BaselineRun]] = {}
    for run in runs:
        grouped.setdefault(run.variant, []).append(run)
    merged: dict[str, BaselineRun] = {}
    for variant, group in grouped.items():
        failing = [r.status for r in group if r.status != EvalStatus.PASSED]
        passed = [r for r in group if r.status == EvalStatus.PASSED]
        first = passed[0] if passed and not failing else None
        rounds = [dict(r.latencies_ms) for r in passed[1:]] if first else []
        for run in passed if first else []:
            rounds += [dict(x) for x in run.rounds_ms]
        merged[variant] = BaselineRun(
            variant=variant,
            status=failing[0] if failing else str(EvalStatus.PASSED),
            latencies_ms=dict(first.latencies_ms) if first else {},
            reference_ms=dict(group[0].reference_ms),
            source=", ".join(dict.fromkeys(r.source for r in group)),
            rounds_ms=rounds,
        )
    return merged


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


def _run_measured(run: BaselineRun | None, uuids: Sequence[str]) -> Measured | None:
    if run is None or run.status != EvalStatus.PASSED:
        return None
    return measured(run.latencies_ms, run.rounds_ms, uuids)


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


def _variants_table(
    variants: Mapping[str, BaselineRun], uuids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, run in variants.items():
        value = _run_measured(run, uuids)
        table[name] = {
            "status": run.status,
            "ms": value.ms if value else None,
            "ci": value.ci if value else None,
            "rounds": value.rounds if value else 0,
            "source": run.source,
        }
    return table


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
    variants = merge_runs(r for r in runs if r.variant.startswith(COMPILE_PREFIX))
    notes: list[str] = []
    best = incumbent(attempts, record)
    best_lat = trace_latencies(best.traces)[0] if best else {}
    best_m = measured(best_lat, retimed_rounds(attempts, best), uuids) if best else None
    row_ms = best_m.ms if best_m else None

    compile_run = variants.get(BASELINE_DEFAULT)
    compile_m = _run_measured(compile_run, uuids)
    fastest: tuple[str, Measured] | None = None
    for name, run in variants.items():
        value = _run_measured(run, uuids)
        if value is not None and (fastest is None or value.ms < fastest[1].ms):
            fastest = (name, value)
    mat_name = MAX_AUTOTUNE.get(record.device, MAX_AUTOTUNE["cuda"])
    mat_run = variants.get(mat_name)
    mat_status = mat_run.status if mat_run else NOT_RUN
    mat_m = _run_measured(mat_run, uuids)
    if mat_m is None:
        notes.append(f"max-autotune ({mat_name}) {mat_status}: no T_b, no speedup over it")

    t_sol = {b.workload: b.bound_ms for b in bounds}
    memory_bound = bool(bounds) and all(
        record.roofline is not None
        and b.flops / record.roofline.ceiling.matmul_flops_per_s
        <= b.bytes / record.roofline.ceiling.copy_bytes_per_s
        for b in bounds
    )
    fraction = sol = None
    if row_ms is not None and len(t_sol) == len(uuids):
        fraction = geomean([t_sol[u] / best_lat[u] for u in uuids])
    if row_ms is not None and mat_m is not None and mat_run and len(t_sol) == len(uuids):
        tb = mat_run.latencies_ms
        scores = [sol_score(best_lat[u], t_sol[u], tb[u]) for u in uuids]
        sol = sum(scores) / len(scores)
    vs_compile, vs_compile_ci = speedup(compile_m, best_m)
    vs_fastest, vs_fastest_ci = speedup(fastest[1] if fastest else None, best_m)
    vs_mat, vs_mat_ci = speedup(mat_m, best_m)
    eager = _eager_ms(attempts, runs, uuids)
    passed = [a for a in attempts if a.status == EvalStatus.PASSED]
    return ProblemRow(
        problem=problem,
        workloads=len(uuids),
        memory_bound=memory_bound,
        eager_ms=eager,
        compile_status=compile_run.status if compile_run else NOT_RUN,
        compile_ms=compile_m.ms if compile_m else None,
        compile_ci=compile_m.ci if compile_m else None,
        best_compile_variant=fastest[0] if fastest else "",
        best_compile_ms=fastest[1].ms if fastest else None,
        best_compile_ci=fastest[1].ci if fastest else None,
        max_autotune_variant=mat_name,
        max_autotune_status=mat_status,
        max_autotune_ms=mat_m.ms if mat_m else None,
        max_autotune_ci=mat_m.ci if mat_m else None,
        best_ms=row_ms,
        best_ci=best_m.ci if best_m else None,
        best_by=f"{best.proposal.agent}: {best.proposal.solution.name}" if best else "",
        best_agent=best.proposal.agent if best else "",
        best_family=family_of(best.proposal) if best else "",
        roofline_ms=geomean(list(t_sol.values())) if t_sol else None,
        fraction_of_roofline=fraction,
        sol_score=sol,
        speedup_vs_compile=vs_compile,
        speedup_vs_compile_ci=vs_compile_ci,
        speedup_vs_best_compile=vs_fastest,
        speedup_vs_best_compile_ci=vs_fastest_ci,
        speedup_vs_max_autotune=vs_mat,
        speedup_vs_max_autotune_ci=vs_mat_ci,
        speedup_vs_eager=eager / row_ms if eager is not None and row_ms else None,
        candidates_to_90=(
            candidates_to_fraction(attempts, best.latency_ms, NINETY)
            if best is not None and best.latency_ms is not None
            else None
        ),
        attempts=len(attempts),
        passed=len(passed),
        passed_families=sorted({family_of(a.proposal) for a in passed}),
        compile_variants=_variants_table(variants, uuids),
        ceiling_source=record.roofline.ceiling.source if record.roofline else "",
        notes=notes,
    )


@dataclass(frozen=True)
class SpeedupSummary:
    """A geometric-mean speedup over the rows that have one."""

    geomean: float | None
    ci: Interval | None
    """[geomean of the lows, geomean of the highs]; None unless every speedup has a CI."""
    problems: int
    """Rows the geomean is over."""


def summarize_speedups(
    values: Sequence[tuple[float | None, Interval | None]],
) -> SpeedupSummary:
    """Geometric mean of the present speedups and the interval their intervals bound."""
    present = [(v, ci) for v, ci in values if v is not None]
    lows = [ci[0] for _, ci in present if ci is not None]
    highs = [ci[1] for _, ci in present if ci is not None]
    complete = present and len(lows) == len(present)
    low, high = (geomean(lows), geomean(highs)) if complete else (None, None)
    ci = [low, high] if low is not None and high is not None else None
    return SpeedupSummary(geomean([v for v, _ in present]), ci, len(present))


@dataclass(frozen=True)
class Summary:
    """The headline numbers against the issue's goals."""

    vs_compile: SpeedupSummary
    """Over torch.compile default."""
    vs_best_compile: SpeedupSummary
    """Over each problem's fastest PASSED compile variant."""
    vs_max_autotune: SpeedupSummary
    """Over max-autotune, on the problems where it PASSED (goal >= 1.2)."""
    max_autotune_not_passed: dict[str, str]
    """Problem -> status of its max-autotune baseline when it did not pass."""
    at_least_best_compile: int
    """Problems whose best is at least as fast as their best compile variant."""
    with_best_compile: int
    """Problems with a best and a PASSED compile variant."""
    memory_bound_fractions: dict[str, float]
    """Fraction of roofline of each memory-bound problem (goal >= 0.85 each)."""
    problems: int
    """Rows in the table."""


def summarize(rows: Sequence[ProblemRow]) -> Summary:
    """Headline numbers of the rows."""
    fractions = {
        r.problem: r.fraction_of_roofline
        for r in rows
        if r.memory_bound and r.fraction_of_roofline is not None
    }
    compared = [r for r in rows if r.best_ms is not None and r.best_compile_ms is not None]
    return Summary(
        vs_compile=summarize_speedups(
            [(r.speedup_vs_compile, r.speedup_vs_compile_ci) for r in rows]
        ),
        vs_best_compile=summarize_speedups(
            [(r.speedup_vs_best_compile, r.speedup_vs_best_compile_ci) for r in rows]
        ),
        vs_max_autotune=summarize_speedups(
            [(r.speedup_vs_max_autotune, r.speedup_vs_max_autotune_ci) for r in rows]
        ),
        max_autotune_not_passed={
            r.problem: r.max_autotune_status for r in rows if r.max_autotune_status != "PASSED"
        },
        at_least_best_compile=sum(
            1 for r in compared if r.best_ms is not None and r.best_ms <= (r.best_compile_ms or 0)
        ),
        with_best_compile=len(compared),
        memory_bound_fractions=fractions,
        problems=len(rows),
    )


def fmt(value: float | None, digits: int = 4) -> str:
    """A number for a table cell ('-' for none)."""
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def fmt_ci(value: float | None, ci: Interval | None, digits: int = 3) -> str:
    """`1.23 [1.1, 1.35]`, `1.23 [-]` without an interval, '-' without a value."""
    if value is None:
        return "-"
    bounds = f"{ci[0]:.{digits}g}, {ci[1]:.{digits}g}" if ci else "-"
    return f"{value:.{digits}g} [{bounds}]"


def baseline_cell(status: str, ms: float | None) -> str:
    """A baseline's latency, or its status when it did not pass."""
    return fmt(ms) if status == "PASSED" else status


def speedup_line(label: str, summary: SpeedupSummary, rows: int) -> str:
    """One summary line: the geomean with its interval over how many problems."""
    return (
        f"Geometric-mean speedup over {label}: {fmt_ci(summary.geomean, summary.ci)} "
        f"over {summary.problems} of {rows} problems."
    )


TABLE_HEADER = (
    "| problem | bound | eager ms | compile ms | best compile variant (ms) | max-autotune ms (T_b) "
    "| best ms | roofline ms (T_SOL) | T_SOL/T_best | SOL score | x compile [CI] "
    "| x best compile [CI] | x max-autotune [CI] | cands to 90% | evaluated (passed) | best by |"
)


def markdown_table(rows: Sequence[ProblemRow]) -> str:
    """The rows as a markdown table, then the CI method and the summary lines."""
    lines = [TABLE_HEADER, "|" + " --- |" * TABLE_HEADER.count(" | ") + " --- |"]
    for r in rows:
        best_compile = (
            f"{r.best_compile_variant} ({fmt(r.best_compile_ms)})"
            if r.best_compile_variant
            else "-"
        )
        cells = [
            r.problem,
            "memory" if r.memory_bound else "compute",
            fmt(r.eager_ms),
            baseline_cell(r.compile_status, r.compile_ms),
            best_compile,
            baseline_cell(r.max_autotune_status, r.max_autotune_ms),
            fmt(r.best_ms),
            fmt(r.roofline_ms),
            fmt(r.fraction_of_roofline, 3),
            fmt(r.sol_score, 3),
            fmt_ci(r.speedup_vs_compile, r.speedup_vs_compile_ci),
            fmt_ci(r.speedup_vs_best_compile, r.speedup_vs_best_compile_ci),
            fmt_ci(r.speedup_vs_max_autotune, r.speedup_vs_max_autotune_ci),
            "-" if r.candidates_to_90 is None else str(r.candidates_to_90),
            f"{r.attempts} ({r.passed})",
            r.best_by or "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    summary = summarize(rows)
    fractions = ", ".join(f"{k} {v:.3f}" for k, v in summary.memory_bound_fractions.items())
    failed = ", ".join(f"{k} {v}" for k, v in summary.max_autotune_not_passed.items())
    variant = rows[0].max_autotune_variant if rows else MAX_AUTOTUNE["cuda"]
    lines += [
        "",
        CI_METHOD,
        "",
        speedup_line("torch.compile default", summary.vs_compile, len(rows)),
        speedup_line("the best PASSED compile variant", summary.vs_best_compile, len(rows)),
        speedup_line(
            f"max-autotune ({variant}), where it PASSED", summary.vs_max_autotune, len(rows)
        )
        + " (goal >= 1.2)",
        f"max-autotune did not pass on: {failed or 'none'}.",
        f"Best at least as fast as the best compile variant: {summary.at_least_best_compile} of "
        f"{summary.with_best_compile} problems.",
        f"Fraction of roofline on memory-bound problems: {fractions or '-'} (goal >= 0.85).",
    ]
    return "\n".join(lines) + "\n"
