"""The campaign benchmark's table, built from campaign records (no clocks, no GPU).

Two sources of records: hand-built attempts with chosen latencies (tests/benchmark/records.py;
every number in a row is then recomputed here from those inputs), and the records of a real CPU
run of scripts/bench_campaign.py kept in tests/samples/bench/ (attempts.jsonl, campaign.json,
bench.json), against which the row is recomputed independently from the raw traces.
"""

import json
import math
from pathlib import Path

import pytest

from kernelarc.benchmark.report import (
    CI_METHOD,
    TABLE_HEADER,
    BaselineRun,
    build_row,
    candidates_to_fraction,
    geomean,
    incumbent,
    markdown_table,
    summarize,
)
from kernelarc.guard.score import sol_score
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_record
from kernelarc.schema import Attempt, Verdict
from kernelarc.schema.guard_record import RooflineBound
from tests.benchmark.records import (
    REFERENCE_MS,
    UUIDS,
    make_attempt,
    make_record,
    memory_bounds,
)

RECORDED = Path(__file__).resolve().parents[1] / "samples" / "bench" / "rmsnorm"
NO_GRAPHS = "compile-max-autotune-no-cudagraphs"


@pytest.fixture
def campaign() -> list[Attempt]:
    return [
        make_attempt(
            0,
            REFERENCE_MS,
            Verdict.NEW_BEST,
            agent="compiler",
            knobs={"variant": "eager", "compiled": False},
        ),
        make_attempt(
            1,
            (1.0, 2.0),
            Verdict.NEW_BEST,
            agent="compiler",
            knobs={"variant": NO_GRAPHS, "compiled": True},
        ),
        make_attempt(2, None, Verdict.FAILED),
        make_attempt(3, (0.54, 1.08), Verdict.NEW_BEST),
        make_attempt(4, (0.45, 0.9), Verdict.CHALLENGER),  # faster, but the guard did not accept it
        make_attempt(5, (0.5, 1.0), Verdict.NEW_BEST),
    ]


def test_row_numbers_follow_from_the_records(campaign: list[Attempt]) -> None:
    t_sol = (0.4, 0.8)
    extra = [
        BaselineRun("compile-default", "PASSED", {"w0": 1.5, "w1": 3.0}, {}, "bench"),
        BaselineRun("compile-max-autotune", "PASSED", {"w0": 0.9, "w1": 1.8}, {}, "bench"),
    ]
    row = build_row("p", campaign, make_record(campaign[5], memory_bounds(t_sol)), extra)
    best = (0.5, 1.0)
    t_b = (0.9, 1.8)  # the faster of the two max-autotune runs
    assert row.best_ms == pytest.approx(math.sqrt(best[0] * best[1]))
    assert row.best_by == f"triton_template: {campaign[5].proposal.solution.name}"
    assert row.eager_ms == pytest.approx(math.sqrt(REFERENCE_MS[0] * REFERENCE_MS[1]))
    assert row.compile_ms == pytest.approx(math.sqrt(1.5 * 3.0))
    assert row.max_autotune_ms == pytest.approx(math.sqrt(t_b[0] * t_b[1]))
    assert (row.max_autotune_variant, row.max_autotune_status) == ("compile-max-autotune", "PASSED")
    # The fastest PASSED compile variant: max-autotune (0.9, 1.8) beats the campaign's
    # no-cudagraphs attempt (1.0, 2.0) and compile default (1.5, 3.0).
    assert row.best_compile_variant == "compile-max-autotune"
    assert row.best_compile_ms == pytest.approx(math.sqrt(t_b[0] * t_b[1]))
    assert row.speedup_vs_compile == pytest.approx(3.0)
    assert row.speedup_vs_best_compile == pytest.approx(1.8)
    assert (row.best_agent, row.best_family) == ("triton_template", "triton_template")
    assert row.passed_families == ["compile", "eager", "triton_template"]
    assert row.compile_variants[NO_GRAPHS]["source"] == "campaign attempt 1"
    assert row.roofline_ms == pytest.approx(math.sqrt(t_sol[0] * t_sol[1]))
    assert row.fraction_of_roofline == pytest.approx(0.8)
    assert row.speedup_vs_max_autotune == pytest.approx(1.8)
    expected_sol = sum(sol_score(k, s, b) for k, s, b in zip(best, t_sol, t_b, strict=True)) / 2
    assert row.sol_score == pytest.approx(expected_sol)
    # Attempt 3 (index 3, the 4th evaluated) is within 90% of the final best's speed.
    assert geomean([0.54, 1.08]) <= geomean(list(best)) / 0.9  # type: ignore[operator]
    assert row.candidates_to_90 == 4
    assert (row.attempts, row.passed, row.memory_bound) == (6, 5, True)
    assert row.ceiling_source == "cache" and row.notes == []
    # One timing each: no interval anywhere.
    assert row.best_ci is None and row.speedup_vs_compile_ci is None


def test_another_max_autotune_variant_never_stands_in_for_max_autotune(
    campaign: list[Attempt],
) -> None:
    """On CUDA max-autotune is compile-max-autotune; the campaign's no-cudagraphs attempt is a
    compile variant (here the fastest), not T_b."""
    row = build_row("p", campaign, make_record(campaign[5], memory_bounds((0.4, 0.8))))
    assert row.max_autotune_status == "NOT_RUN"
    assert row.max_autotune_ms is None and row.speedup_vs_max_autotune is None
    assert row.sol_score is None
    assert row.best_compile_variant == NO_GRAPHS
    assert row.best_compile_ms == pytest.approx(math.sqrt(1.0 * 2.0))
    assert row.compile_ms is None and row.compile_status == "NOT_RUN"
    assert row.notes == ["max-autotune (compile-max-autotune) NOT_RUN: no T_b, no speedup over it"]


def test_a_failed_max_autotune_is_shown_failed_with_no_speedup_over_it(
    campaign: list[Attempt],
) -> None:
    """The previous GPU run's failure mode: max-autotune RUNTIME_ERROR while another compile
    variant passed. The row must say RUNTIME_ERROR, not report a speedup over something else."""
    extra = [
        BaselineRun("compile-default", "PASSED", {"w0": 1.5, "w1": 3.0}, {}, "bench"),
        BaselineRun("compile-max-autotune", "RUNTIME_ERROR", {}, {}, "bench"),
    ]
    rows = [
        build_row("p", campaign, make_record(campaign[5], memory_bounds((0.4, 0.8))), extra),
        build_row(
            "q",
            campaign,
            make_record(campaign[5], memory_bounds((0.4, 0.8))),
            [
                *extra[:1],
                BaselineRun("compile-max-autotune", "PASSED", {"w0": 1.2, "w1": 2.4}, {}, "bench"),
            ],
        ),
    ]
    p, q = rows
    assert (p.max_autotune_status, p.max_autotune_ms, p.speedup_vs_max_autotune) == (
        "RUNTIME_ERROR",
        None,
        None,
    )
    assert p.sol_score is None
    assert p.compile_variants["compile-max-autotune"]["status"] == "RUNTIME_ERROR"
    assert p.best_compile_variant == NO_GRAPHS  # fastest PASSED; still not T_b
    assert q.speedup_vs_max_autotune == pytest.approx(2.4)
    summary = summarize(rows)
    assert summary.max_autotune_not_passed == {"p": "RUNTIME_ERROR"}
    assert summary.vs_max_autotune.problems == 1
    assert summary.vs_max_autotune.geomean == pytest.approx(2.4)
    table = markdown_table(rows)
    p_line = next(line for line in table.splitlines() if line.startswith("| p |"))
    cells = [c.strip() for c in p_line.strip("|").split("|")]
    header = [c.strip() for c in TABLE_HEADER.strip("|").split("|")]
    assert cells[header.index("max-autotune ms (T_b)")] == "RUNTIME_ERROR"
    assert cells[header.index("x max-autotune [CI]")] == "-"
    assert "max-autotune did not pass on: p RUNTIME_ERROR." in table


def test_a_variant_that_fails_on_a_repeat_is_not_passed(campaign: list[Attempt]) -> None:
    """The campaign's no-cudagraphs attempt PASSED, the bench's repeat of it crashed: the
    variant is shown failed and cannot be the best compile variant."""
    extra = [
        BaselineRun(NO_GRAPHS, "RUNTIME_ERROR", {}, {}, "bench"),
        BaselineRun("compile-default", "PASSED", {"w0": 1.5, "w1": 3.0}, {}, "bench"),
    ]
    row = build_row("p", campaign, make_record(campaign[5], memory_bounds((0.4, 0.8))), extra)
    assert row.compile_variants[NO_GRAPHS]["status"] == "RUNTIME_ERROR"
    assert row.compile_variants[NO_GRAPHS]["source"] == "campaign attempt 1, bench"
    assert row.best_compile_variant == "compile-default"


def test_speedup_intervals_come_from_both_latency_intervals() -> None:
    """Best re-timed by the guard twice, compile default repeated: with three rounds of
    per-round geometric means g, the 95% bootstrap interval of 2000 resamples is [min g, max g]
    (each extreme is drawn with probability 1/27 > 2.5%), and the speedup's is
    [base_lo / best_hi, base_hi / best_lo]."""
    best_rounds = [(0.5, 1.0), (0.6, 1.1), (0.45, 0.95)]
    base_rounds = [(1.5, 3.0), (1.4, 2.9), (1.7, 3.2)]
    best = make_attempt(0, best_rounds[0], Verdict.NEW_BEST, retimed=best_rounds[1:])
    extra = [
        BaselineRun(
            "compile-default",
            "PASSED",
            dict(zip(UUIDS, base_rounds[0], strict=True)),
            {},
            "bench",
            rounds_ms=[dict(zip(UUIDS, r, strict=True)) for r in base_rounds[1:]],
        )
    ]
    row = build_row("p", [best], make_record(best, memory_bounds((0.4, 0.8))), extra)
    g_best = [geomean(list(r)) or 0.0 for r in best_rounds]
    g_base = [geomean(list(r)) or 0.0 for r in base_rounds]
    assert row.best_ms == pytest.approx(g_best[0])
    assert row.best_ci == pytest.approx([min(g_best), max(g_best)])
    assert row.compile_ci == pytest.approx([min(g_base), max(g_base)])
    assert row.speedup_vs_compile == pytest.approx(g_base[0] / g_best[0])
    assert row.speedup_vs_compile_ci == pytest.approx(
        [min(g_base) / max(g_best), max(g_base) / min(g_best)]
    )
    low, high = row.speedup_vs_compile_ci or [0.0, 0.0]
    assert low < (row.speedup_vs_compile or 0.0) < high
    line = markdown_table([row]).splitlines()[2]
    assert f"{row.speedup_vs_compile:.3g} [{low:.3g}, {high:.3g}]" in line
    summary = summarize([row])
    assert summary.vs_compile.ci == pytest.approx([low, high])


def test_no_baseline_and_no_best_leave_gaps_with_a_note() -> None:
    failed = [make_attempt(0, None, Verdict.FAILED)]
    row = build_row("p", failed, make_record(None, memory_bounds((0.4, 0.8))))
    assert row.best_ms is None and row.fraction_of_roofline is None and row.sol_score is None
    assert row.candidates_to_90 is None and row.max_autotune_ms is None
    assert row.notes == ["max-autotune (compile-max-autotune) NOT_RUN: no T_b, no speedup over it"]
    failing_baseline = [BaselineRun("compile-max-autotune", "RUNTIME_ERROR", {}, {}, "bench")]
    row = build_row("p", failed, make_record(None, memory_bounds((0.4, 0.8))), failing_baseline)
    assert row.max_autotune_ms is None


def test_compute_bound_when_flops_set_the_bound(campaign: list[Attempt]) -> None:
    bounds = [
        RooflineBound(workload=u, bound_ms=1.0, bytes=1e6, flops=8e11) for u in UUIDS
    ]  # 8e11 FLOP at 8e14 FLOP/s = 1 ms; 1e6 B at 4e12 B/s = 0.25 us
    row = build_row("p", campaign, make_record(campaign[5], bounds))
    assert row.memory_bound is False


def test_incumbent_is_the_named_accepted_best(campaign: list[Attempt]) -> None:
    assert incumbent(campaign, make_record(campaign[3], [])) is campaign[3]
    assert incumbent(campaign, make_record(None, [])) is campaign[5]
    assert candidates_to_fraction(campaign, 0.5, 1.0) == 6


def test_markdown_table_and_summary(campaign: list[Attempt]) -> None:
    extra = [BaselineRun("compile-max-autotune", "PASSED", {"w0": 0.9, "w1": 1.8}, {}, "bench")]
    rows = [
        build_row("p", campaign, make_record(campaign[5], memory_bounds((0.4, 0.8))), extra),
        build_row("q", campaign, make_record(campaign[3], memory_bounds((0.4, 0.8))), extra),
    ]
    summary = summarize(rows)
    vs_q = geomean([0.9 / 0.54, 1.8 / 1.08])
    assert summary.vs_max_autotune.geomean == pytest.approx(math.sqrt(1.8 * vs_q))  # type: ignore[operator]
    assert summary.vs_max_autotune.ci is None  # single timings: no interval
    assert (summary.at_least_best_compile, summary.with_best_compile) == (2, 2)
    assert set(summary.memory_bound_fractions) == {"p", "q"}
    table = markdown_table(rows)
    lines = table.splitlines()
    assert lines[0] == TABLE_HEADER
    assert lines[1].count("---") == TABLE_HEADER.count("|") - 1
    assert lines[2].startswith("| p | memory | 2.828 |")
    assert lines[3].startswith("| q | memory |")
    assert (
        "Geometric-mean speedup over max-autotune (compile-max-autotune), where it PASSED" in table
    )
    assert CI_METHOD in table
    assert "p 0.800" in table


def test_recorded_cpu_run_rebuilds_its_row() -> None:
    """The row of a real CPU run (scripts/bench_campaign.py --device cpu --budget 4 --problems
    rmsnorm), recomputed from its raw records."""
    attempts = read_attempts(RECORDED / "attempts.jsonl")
    record = read_campaign_record(RECORDED)
    bench = json.loads((RECORDED / "bench.json").read_text())
    extra = [BaselineRun(**b) for b in bench["problems"]["rmsnorm"]["baselines"]]
    row = build_row("rmsnorm", attempts, record, extra)
    recorded_row = bench["rows"][0]
    for key in ("best_ms", "compile_ms", "roofline_ms", "attempts", "passed"):
        assert row.as_dict()[key] == pytest.approx(recorded_row[key]), key
    assert record.roofline is not None and record.roofline.ceiling.source == "config"
    uuids = [b.workload for b in record.roofline.bounds]
    best = next(a for a in attempts if a.proposal.id == record.best_proposal_id)
    latency = {t.workload.uuid: t.evaluation.performance.latency_ms for t in best.traces}  # type: ignore[union-attr]
    assert row.best_ms == pytest.approx(geomean([latency[u] for u in uuids]))
    t_sol = {b.workload: b.bound_ms for b in record.roofline.bounds}
    assert row.fraction_of_roofline == pytest.approx(
        geomean([t_sol[u] / latency[u] for u in uuids])
    )
    assert row.attempts == len(attempts)
    assert row.candidates_to_90 is not None and 1 <= row.candidates_to_90 <= len(attempts)
    eager = next(a for a in attempts if a.proposal.knobs.get("variant") == "eager")
    assert row.eager_ms == pytest.approx(eager.latency_ms)
    default = next(b for b in extra if b.variant == "compile-default")
    assert row.compile_ms == pytest.approx(geomean([default.latencies_ms[u] for u in uuids]))
