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

The numbers are `report_stats.py`'s (geometric means, bootstrap intervals, speedups); the row
and the baseline run are `report_row.py`'s; the summary and the markdown are `report_table.py`'s.
Everything is re-exported here, where the bench scripts import it.
"""

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kernelarc.benchmark.report_row import (
    BASELINE_DEFAULT,
    COMPILE_PREFIX,
    MAX_AUTOTUNE,
    NOT_RUN,
    BaselineRun,
    ProblemRow,
)
from kernelarc.benchmark.report_stats import (
    CI_METHOD,
    Interval,
    Measured,
    geomean,
    measured,
    retimed_rounds,
    speedup,
    trace_latencies,
)
from kernelarc.benchmark.report_table import (
    TABLE_HEADER,
    SpeedupSummary,
    Summary,
    baseline_cell,
    fmt,
    fmt_ci,
    markdown_table,
    speedup_line,
    summarize,
    summarize_speedups,
)
from kernelarc.guard.score import sol_score
from kernelarc.rundir.run_record import CampaignRecord
from kernelarc.schema import Attempt, EvalStatus, Proposal, Verdict

__all__ = [
    "BASELINE_DEFAULT",
    "CI_METHOD",
    "COMPILE_PREFIX",
    "MAX_AUTOTUNE",
    "NINETY",
    "NOT_RUN",
    "TABLE_HEADER",
    "BaselineRun",
    "Interval",
    "Measured",
    "ProblemRow",
    "SpeedupSummary",
    "Summary",
    "baseline_cell",
    "baseline_runs_from_attempts",
    "build_row",
    "candidates_to_fraction",
    "family_of",
    "fmt",
    "fmt_ci",
    "geomean",
    "incumbent",
    "markdown_table",
    "measured",
    "merge_runs",
    "retimed_rounds",
    "speedup",
    "speedup_line",
    "summarize",
    "summarize_speedups",
    "trace_latencies",
]

NINETY = 0.9
"""`candidates_to_90`: the share of the final best's speed an incumbent must reach."""


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
