"""The benchmark's summary and markdown table over the problems' rows (pure).

Place in the flow: the bench scripts call `markdown_table(rows)` for docs/benchmarks.md and
`summarize(rows)` for the headline numbers against the goals (speedup over max-autotune >= 1.2,
fraction of roofline >= 0.85 on memory-bound problems); `fmt`, `fmt_ci`, `baseline_cell` and
`speedup_line` are the cell formats the suite's table shares. Apart from the row building:
these read only finished rows.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from kernelarc.benchmark.report_row import MAX_AUTOTUNE, ProblemRow
from kernelarc.benchmark.report_stats import CI_METHOD, Interval, geomean


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
