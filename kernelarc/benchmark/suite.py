"""The suite benchmark: the offline team on every problem dir under the given dirs.

Place in the flow: `scripts/bench_suite.py` finds the problem dirs (`find_problem_dirs`), fills a
`BenchSettings` and calls `campaigns.run_bench` with `write_suite` as its writer, so each problem
is run exactly as `scripts/bench_campaign.py` runs a built-in one (campaign, then baselines, then
its `ProblemRow`). This module turns the run's progress into one `SuiteRow` per problem (ok,
failed and why, or not reached), the suite summary, and suite.json / suite.md, rewritten after
every problem, so a run killed by its wall-clock cap still leaves every finished problem and
lists the rest as not reached.
"""

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelarc.benchmark.outputs import BenchProgress, write_text_atomic
from kernelarc.benchmark.report import (
    CI_METHOD,
    Interval,
    ProblemRow,
    SpeedupSummary,
    baseline_cell,
    fmt,
    fmt_ci,
    speedup_line,
    summarize_speedups,
)
from kernelarc.benchmark.settings import BenchSettings, is_problem_dir
from kernelarc.errors import ConfigError

OK = "ok"
FAILED = "failed"
NOT_REACHED = "not reached"
NO_PASS = "no candidate PASSED"
"""Failure cause of a problem whose campaign ran but found nothing that PASSED."""
TRITON_PREFIX = "triton/"
"""Families of generated Triton kernels (not torch.compile, not eager)."""


def find_problem_dirs(paths: Sequence[Path]) -> list[Path]:
    """The problem dirs under `paths`, in order: a dir holding definition.json is a problem;
    otherwise each of its subdirs that holds one (sorted by name). Plain files among the paths
    (import_report.json in a `.kb/*` glob) are ignored.

    Raises:
        ConfigError: a path does not exist, a dir holds no problem, or two problems share a name.
    """
    found: list[Path] = []
    for path in paths:
        if is_problem_dir(path):
            found.append(path)
            continue
        if path.is_file():
            continue
        if not path.is_dir():
            msg = f"{path}: no such directory; give problem dirs (with definition.json) or dirs"
            raise ConfigError(msg)
        subdirs = sorted(p for p in path.iterdir() if p.is_dir() and is_problem_dir(p))
        if not subdirs:
            msg = (
                f"{path}: no definition.json in it or in its subdirectories; give problem dirs "
                "(with definition.json) or dirs of them"
            )
            raise ConfigError(msg)
        found.extend(subdirs)
    if not found:
        msg = f"no problem dirs among {[str(p) for p in paths]} (only files)"
        raise ConfigError(msg)
    seen: dict[str, Path] = {}
    for path in found:
        if path.name in seen:
            msg = (
                f"two problems named {path.name!r}: {seen[path.name]} and {path}; rows and run "
                "dirs are named after the problem dir, so rename one"
            )
            raise ConfigError(msg)
        seen[path.name] = path
    return found


@dataclass
class SuiteRow:
    """One problem's line of the suite table (latencies in ms, intervals [low, high])."""

    problem: str
    dir: str
    status: str
    """ok / failed / not reached."""
    reason: str
    """Why failed or not reached ('' when ok)."""
    cause: str
    """Failure class: the exception type, `no candidate PASSED`, or '' when ok."""
    eager_ms: float | None = None
    compile_status: str = ""
    compile_ms: float | None = None
    best_compile_variant: str = ""
    best_compile_ms: float | None = None
    best_ms: float | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_compile_ci: Interval | None = None
    speedup_vs_best_compile: float | None = None
    speedup_vs_best_compile_ci: Interval | None = None
    fraction_of_roofline: float | None = None
    best_agent: str = ""
    best_family: str = ""
    evaluated: int = 0
    passed: int = 0
    triton_passed: bool = False
    """A generated Triton kernel (family triton/*) PASSED."""


def _row_of(label: str, source: str, row: ProblemRow) -> SuiteRow:
    ok = row.best_ms is not None
    return SuiteRow(
        problem=label,
        dir=source,
        status=OK if ok else FAILED,
        reason="" if ok else f"{NO_PASS} in {row.attempts} evaluated",
        cause="" if ok else NO_PASS,
        eager_ms=row.eager_ms,
        compile_status=row.compile_status,
        compile_ms=row.compile_ms,
        best_compile_variant=row.best_compile_variant,
        best_compile_ms=row.best_compile_ms,
        best_ms=row.best_ms,
        speedup_vs_compile=row.speedup_vs_compile,
        speedup_vs_compile_ci=row.speedup_vs_compile_ci,
        speedup_vs_best_compile=row.speedup_vs_best_compile,
        speedup_vs_best_compile_ci=row.speedup_vs_best_compile_ci,
        fraction_of_roofline=row.fraction_of_roofline,
        best_agent=row.best_agent,
        best_family=row.best_family,
        evaluated=row.attempts,
        passed=row.passed,
        triton_passed=any(f.startswith(TRITON_PREFIX) for f in row.passed_families),
    )


def suite_rows(progress: BenchProgress) -> list[SuiteRow]:
    """One row per problem given, in order; a problem with no outcome yet is not reached."""
    rows: list[SuiteRow] = []
    for label, source in progress.sources.items():
        if label in progress.results:
            rows.append(_row_of(label, source, progress.results[label].row))
        elif label in progress.failed:
            reason = progress.failed[label]
            cause = reason.split(":", 1)[0] if ":" in reason else reason
            rows.append(SuiteRow(label, source, FAILED, reason, cause))
        else:
            reason = progress.not_reached.get(label, "not started (run in progress or cut off)")
            rows.append(SuiteRow(label, source, NOT_REACHED, reason, ""))
    return rows


@dataclass(frozen=True)
class SuiteSummary:
    """The suite's headline numbers against issue 15's goals."""

    problems: int
    ok: int
    failed: int
    not_reached: int
    at_least_best_compile: int
    """Problems whose best is at least as fast as their best PASSED compile variant."""
    with_best_compile: int
    """Problems with a best and a PASSED compile variant (goal: all of them)."""
    vs_compile: SpeedupSummary
    """Geometric-mean speedup over torch.compile default (goal >= 1.3)."""
    vs_best_compile: SpeedupSummary
    triton_passed: int
    """Problems with a PASSED generated Triton kernel (goal >= 70 % of the corpus)."""
    run: int
    """Problems that ran (ok + failed): the share's denominator."""
    failures_by_cause: dict[str, list[str]]
    """Cause -> problems (`not reached` included)."""


def summarize_suite(rows: Sequence[SuiteRow]) -> SuiteSummary:
    """Headline numbers of the suite rows."""
    compared = [r for r in rows if r.best_ms is not None and r.best_compile_ms is not None]
    causes: dict[str, list[str]] = {}
    for row in rows:
        if row.status != OK:
            causes.setdefault(row.cause or row.status, []).append(row.problem)
    ran = [r for r in rows if r.status != NOT_REACHED]
    return SuiteSummary(
        problems=len(rows),
        ok=sum(1 for r in rows if r.status == OK),
        failed=sum(1 for r in rows if r.status == FAILED),
        not_reached=len(rows) - len(ran),
        at_least_best_compile=sum(
            1 for r in compared if (r.best_ms or 0.0) <= (r.best_compile_ms or 0.0)
        ),
        with_best_compile=len(compared),
        vs_compile=summarize_speedups(
            [(r.speedup_vs_compile, r.speedup_vs_compile_ci) for r in rows]
        ),
        vs_best_compile=summarize_speedups(
            [(r.speedup_vs_best_compile, r.speedup_vs_best_compile_ci) for r in rows]
        ),
        triton_passed=sum(1 for r in ran if r.triton_passed),
        run=len(ran),
        failures_by_cause=causes,
    )


SUITE_HEADER = (
    "| problem | status | eager ms | compile ms | best compile variant (ms) | best ms "
    "| x compile [CI] | x best compile [CI] | T_SOL/T_best | won by | family "
    "| evaluated (passed) | Triton PASSED |"
)


def suite_markdown(rows: Sequence[SuiteRow]) -> str:
    """The suite table, the CI method, the summary and the failures."""
    lines = [SUITE_HEADER, "|" + " --- |" * SUITE_HEADER.count(" | ") + " --- |"]
    for r in rows:
        ran = r.status == OK or bool(r.evaluated)
        best_compile = (
            f"{r.best_compile_variant} ({fmt(r.best_compile_ms)})"
            if r.best_compile_variant
            else "-"
        )
        status = r.status if r.status == OK else f"{r.status}: {r.reason}"
        cells = [
            r.problem,
            status.replace("|", "/").replace("\n", " ")[:160],
            fmt(r.eager_ms),
            baseline_cell(r.compile_status, r.compile_ms) if r.compile_status else "-",
            best_compile,
            fmt(r.best_ms),
            fmt_ci(r.speedup_vs_compile, r.speedup_vs_compile_ci),
            fmt_ci(r.speedup_vs_best_compile, r.speedup_vs_best_compile_ci),
            fmt(r.fraction_of_roofline, 3),
            r.best_agent or "-",
            r.best_family or "-",
            f"{r.evaluated} ({r.passed})" if ran else "-",
            ("yes" if r.triton_passed else "no") if ran else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    s = summarize_suite(rows)
    share = f"{s.triton_passed / s.run:.0%}" if s.run else "-"
    lines += [
        "",
        CI_METHOD,
        "",
        f"Problems: {s.problems} ({s.ok} ok, {s.failed} failed, {s.not_reached} not reached).",
        f"Best at least as fast as the best PASSED compile variant: {s.at_least_best_compile} of "
        f"{s.with_best_compile} problems with one (goal: all).",
        speedup_line("torch.compile default", s.vs_compile, s.problems) + " (goal >= 1.3)",
        speedup_line("the best PASSED compile variant", s.vs_best_compile, s.problems),
        f"PASSED generated Triton kernel (family triton/*): {s.triton_passed} of {s.run} problems "
        f"run ({share}; goal >= 70%).",
        "Failures by cause: "
        + (
            "; ".join(
                f"{cause}: {', '.join(names)}" for cause, names in s.failures_by_cause.items()
            )
            or "none"
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def write_suite(settings: BenchSettings, progress: BenchProgress) -> tuple[Path, Path]:
    """suite.json and suite.md (a `run_bench` writer; rewritten after every problem)."""
    rows = suite_rows(progress)
    json_path = settings.json_path or settings.out / "suite.json"
    md_path = settings.markdown_path or settings.out / "suite.md"
    data: dict[str, Any] = {
        **progress.meta,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "ci_method": CI_METHOD,
        "rows": [asdict(r) for r in rows],
        "summary": asdict(summarize_suite(rows)),
        "details": {
            name: {"row": res.row.as_dict(), **{k: v for k, v in asdict(res).items() if k != "row"}}
            for name, res in progress.results.items()
        },
    }
    write_text_atomic(json_path, json.dumps(data, indent=2, default=str) + "\n")
    meta = progress.meta
    header = (
        f"Suite: offline team, budget {settings.budget}, seed {settings.seed}, {settings.device} "
        f"({meta['machine'].get('gpu', '')}), workloads {settings.workloads}, {meta['date']}\n\n"
    )
    write_text_atomic(md_path, header + suite_markdown(rows))
    return json_path, md_path
