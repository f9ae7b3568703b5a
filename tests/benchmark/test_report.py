"""The campaign benchmark's table, built from campaign records (no clocks, no GPU).

Two sources of records: hand-built attempts with chosen latencies (every number in a row is
then recomputed here from those inputs), and the records of a real CPU run of
scripts/bench_campaign.py kept in tests/samples/bench/ (attempts.jsonl, campaign.json,
bench.json), against which the row is recomputed independently from the raw traces.
"""

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelarc.benchmark.report import (
    TABLE_HEADER,
    BaselineRun,
    build_row,
    candidates_to_fraction,
    geomean,
    incumbent,
    markdown_table,
    summarize,
)
from kernelarc.campaign.run_record import CampaignRecord, CampaignRoofline, read_campaign_record
from kernelarc.guard.ceilings import ResolvedCeiling
from kernelarc.guard.score import sol_score
from kernelarc.schema import (
    Attempt,
    BuildSpec,
    Correctness,
    Environment,
    EvalStatus,
    Evaluation,
    Performance,
    Proposal,
    Solution,
    SourceFile,
    Trace,
    Verdict,
    Workload,
    proposal_id_for,
)
from kernelarc.schema.guard_record import RooflineBound
from kernelarc.tracking.attempts_log import read_attempts

RECORDED = Path(__file__).resolve().parents[1] / "samples" / "bench" / "rmsnorm"
UUIDS = ("w0", "w1")
REFERENCE_MS = (2.0, 4.0)


def _attempt(
    index: int,
    latencies: Sequence[float] | None,
    verdict: Verdict,
    *,
    agent: str = "triton_template",
    knobs: dict[str, str | int | float | bool] | None = None,
) -> Attempt:
    """An attempt over workloads w0, w1; latencies None: it failed correctness."""
    solution = Solution(
        name=f"p-{agent}-{index}",
        definition="p",
        author=agent,
        spec=BuildSpec(languages=["pytorch"], target_hardware=["LOCAL"], entry_point="k.py::run"),
        sources=[SourceFile(path="k.py", content=f"def run(x):\n    return x  # {index}\n")],
    )
    status = EvalStatus.PASSED if latencies is not None else EvalStatus.INCORRECT_NUMERICAL
    traces = [
        Trace(
            definition="p",
            solution=solution.name,
            workload=Workload(uuid=uuid, axes={"T": 8}),
            evaluation=Evaluation(
                status=status,
                environment=Environment(hardware="NVIDIA H200"),
                timestamp="2026-12-02T10:00:00+00:00",
                correctness=Correctness(max_absolute_error=1e-3),
                performance=(
                    Performance(
                        latency_ms=latencies[n],
                        reference_latency_ms=REFERENCE_MS[n],
                        speedup_factor=REFERENCE_MS[n] / latencies[n],
                    )
                    if latencies is not None
                    else None
                ),
            ),
        )
        for n, uuid in enumerate(UUIDS)
    ]
    return Attempt(
        index=index,
        problem="p",
        proposal=Proposal(
            id=proposal_id_for(solution),
            agent=agent,
            strategy=agent,
            solution=solution,
            knobs=knobs or {},
        ),
        status=status,
        traces=traces,
        latency_ms=geomean(latencies) if latencies is not None else None,
        verdict=verdict,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:00:01+00:00",
        confirmed=verdict == Verdict.NEW_BEST,
    )


def _record(best: Attempt | None, bounds: list[RooflineBound]) -> CampaignRecord:
    ceiling = ResolvedCeiling(
        key="NVIDIA H200", copy_bytes_per_s=4e12, matmul_flops_per_s=8e14, source="cache"
    )
    return CampaignRecord(
        name="bench-p",
        problem="p",
        problem_dir="p",
        source_problem_dir="p",
        workloads="workload_gpu.jsonl",
        device="cuda",
        seed=0,
        started_at="2026-12-02T10:00:00+00:00",
        status="FINISHED",
        best_proposal_id=best.proposal.id if best else None,
        roofline=CampaignRoofline(ceiling=ceiling, bounds=bounds),
    )


def _memory_bounds(t_sol: Sequence[float]) -> list[RooflineBound]:
    """Bounds set by bytes (4e12 B/s): bound_ms = bytes / 4e9."""
    return [
        RooflineBound(workload=u, bound_ms=t, bytes=t * 4e9, flops=0.0)
        for u, t in zip(UUIDS, t_sol, strict=True)
    ]


@pytest.fixture
def campaign() -> list[Attempt]:
    return [
        _attempt(
            0,
            REFERENCE_MS,
            Verdict.NEW_BEST,
            agent="compiler",
            knobs={"variant": "eager", "compiled": False},
        ),
        _attempt(
            1,
            (1.0, 2.0),
            Verdict.NEW_BEST,
            agent="compiler",
            knobs={"variant": "compile-max-autotune-no-cudagraphs", "compiled": True},
        ),
        _attempt(2, None, Verdict.FAILED),
        _attempt(3, (0.54, 1.08), Verdict.NEW_BEST),
        _attempt(4, (0.45, 0.9), Verdict.CHALLENGER),  # faster, but the guard did not accept it
        _attempt(5, (0.5, 1.0), Verdict.NEW_BEST),
    ]


def test_row_numbers_follow_from_the_records(campaign: list[Attempt]) -> None:
    t_sol = (0.4, 0.8)
    extra = [
        BaselineRun("compile-default", "PASSED", {"w0": 1.5, "w1": 3.0}, {}, "bench"),
        BaselineRun("compile-max-autotune", "PASSED", {"w0": 0.9, "w1": 1.8}, {}, "bench"),
    ]
    row = build_row("p", campaign, _record(campaign[5], _memory_bounds(t_sol)), extra)
    best = (0.5, 1.0)
    t_b = (0.9, 1.8)  # the faster of the two max-autotune runs
    assert row.best_ms == pytest.approx(math.sqrt(best[0] * best[1]))
    assert row.best_by == f"triton_template: {campaign[5].proposal.solution.name}"
    assert row.eager_ms == pytest.approx(math.sqrt(REFERENCE_MS[0] * REFERENCE_MS[1]))
    assert row.compile_ms == pytest.approx(math.sqrt(1.5 * 3.0))
    assert row.max_autotune_ms == pytest.approx(math.sqrt(t_b[0] * t_b[1]))
    assert row.max_autotune_variant == "compile-max-autotune (bench)"
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


def test_the_campaigns_own_max_autotune_attempt_is_t_b_when_nothing_else_ran(
    campaign: list[Attempt],
) -> None:
    row = build_row("p", campaign, _record(campaign[5], _memory_bounds((0.4, 0.8))))
    assert row.max_autotune_ms == pytest.approx(math.sqrt(1.0 * 2.0))
    assert row.max_autotune_variant == "compile-max-autotune-no-cudagraphs (campaign attempt 1)"
    assert row.compile_ms is None


def test_no_baseline_and_no_best_leave_gaps_with_a_note() -> None:
    failed = [_attempt(0, None, Verdict.FAILED)]
    row = build_row("p", failed, _record(None, _memory_bounds((0.4, 0.8))))
    assert row.best_ms is None and row.fraction_of_roofline is None and row.sol_score is None
    assert row.candidates_to_90 is None and row.max_autotune_ms is None
    assert row.notes == ["no passing torch.compile max-autotune run: no T_b"]
    failing_baseline = [BaselineRun("compile-max-autotune", "RUNTIME_ERROR", {}, {}, "bench")]
    row = build_row("p", failed, _record(None, _memory_bounds((0.4, 0.8))), failing_baseline)
    assert row.max_autotune_ms is None


def test_compute_bound_when_flops_set_the_bound(campaign: list[Attempt]) -> None:
    bounds = [
        RooflineBound(workload=u, bound_ms=1.0, bytes=1e6, flops=8e11) for u in UUIDS
    ]  # 8e11 FLOP at 8e14 FLOP/s = 1 ms; 1e6 B at 4e12 B/s = 0.25 us
    row = build_row("p", campaign, _record(campaign[5], bounds))
    assert row.memory_bound is False


def test_incumbent_is_the_named_accepted_best(campaign: list[Attempt]) -> None:
    assert incumbent(campaign, _record(campaign[3], [])) is campaign[3]
    assert incumbent(campaign, _record(None, [])) is campaign[5]
    assert candidates_to_fraction(campaign, 0.5, 1.0) == 6


def test_markdown_table_and_summary(campaign: list[Attempt]) -> None:
    extra = [BaselineRun("compile-max-autotune", "PASSED", {"w0": 0.9, "w1": 1.8}, {}, "bench")]
    rows = [
        build_row("p", campaign, _record(campaign[5], _memory_bounds((0.4, 0.8))), extra),
        build_row("q", campaign, _record(campaign[3], _memory_bounds((0.4, 0.8))), extra),
    ]
    summary = summarize(rows)
    vs_q = geomean([0.9 / 0.54, 1.8 / 1.08])
    assert summary.geomean_speedup_vs_max_autotune == pytest.approx(math.sqrt(1.8 * vs_q))  # type: ignore[operator]
    assert set(summary.memory_bound_fractions) == {"p", "q"}
    table = markdown_table(rows)
    lines = table.splitlines()
    assert lines[0] == TABLE_HEADER
    assert lines[1].count("---") == TABLE_HEADER.count("|") - 1
    assert lines[2].startswith("| p | memory | 2.828 |")
    assert lines[3].startswith("| q | memory |")
    assert "Geometric-mean speedup over torch.compile max-autotune: " in table
    assert "p 0.800" in table


def test_recorded_cpu_run_rebuilds_its_row() -> None:
    """The row of a real CPU run (scripts/bench_campaign.py --device cpu --budget 4 --problems
    rmsnorm), recomputed from its raw records."""
    attempts = read_attempts(RECORDED / "attempts.jsonl")
    record = read_campaign_record(RECORDED)
    bench = json.loads((RECORDED / "bench.json").read_text())
    extra = [BaselineRun(**b) for b in bench["problems"]["rmsnorm"]["baselines"]]
    row = build_row("rmsnorm", attempts, record, extra)
    assert set(row.as_dict()) == set(bench["rows"][0])
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
