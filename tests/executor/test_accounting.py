"""ThroughputMeter: the report's rates, fractions and counts follow from the recorded timings."""

import pytest

from kernelarc.executor.accounting import EvalTiming, ThroughputMeter


def test_report_from_timings() -> None:
    meter = ThroughputMeter("local", "cuda", timed_slots=2, correctness_slots=1)
    meter.record(EvalTiming("timed", queue_wait_s=0.0, slot_s=30.0, sandbox_s=29.0))
    meter.record(EvalTiming("timed", queue_wait_s=4.0, slot_s=30.0, sandbox_s=28.0, retries=1))
    meter.record(EvalTiming("correctness", queue_wait_s=1.0, slot_s=10.0, sandbox_s=10.0))
    meter.record(EvalTiming("timed", queue_wait_s=2.0, slot_s=5.0, sandbox_s=0.0, failed=True))
    meter.count_screened_out()
    report = meter.report(wall_s=60.0, candidates=3)
    assert report.candidates_per_min == pytest.approx(3.0)
    assert report.candidates_per_min_per_gpu == pytest.approx(1.5)
    assert (report.timed_evaluations, report.correctness_evaluations) == (3, 1)
    assert report.timed_busy_fraction == pytest.approx(65.0 / 120.0, abs=1e-4)
    assert report.correctness_busy_fraction == pytest.approx(10.0 / 60.0, abs=1e-4)
    assert report.queue_wait_s_mean == pytest.approx(2.0)
    assert report.queue_wait_s_max == pytest.approx(4.0)
    # Failed evaluations have no sandbox time: they stay out of the sandbox/dispatch means.
    assert report.sandbox_s_mean == pytest.approx(67.0 / 3, abs=1e-3)
    assert report.dispatch_overhead_s_mean == pytest.approx((1.0 + 2.0 + 0.0) / 3, abs=1e-3)
    assert (report.infra_retries, report.infra_failures, report.screened_out) == (1, 1, 1)
    numbers = report.numbers()
    assert "executor" not in numbers and numbers["infra_retries"] == 1.0


def test_empty_campaign_reports_zeros() -> None:
    report = ThroughputMeter("ray", "cpu", 1, 0).report(wall_s=0.0, candidates=0)
    assert report.candidates_per_min == 0.0 and report.timed_busy_fraction == 0.0


def test_time_per_stage_from_labels_and_runner_stages() -> None:
    meter = ThroughputMeter("local", "cpu", timed_slots=1, correctness_slots=1)
    runner = {"build": 6.0, "worker_start": 1.0, "correctness": 2.0}
    meter.record(
        EvalTiming(
            "correctness",
            queue_wait_s=0.5,
            slot_s=12.0,
            sandbox_s=11.5,
            stage="screen",
            runner_stage_s=runner,
            build_cached=False,
        )
    )
    meter.record(
        EvalTiming(
            "timed",
            queue_wait_s=3.0,
            slot_s=5.0,
            sandbox_s=4.5,
            stage="timing",
            runner_stage_s={"build": 0.1, "timing": 2.0},
            build_cached=True,
        )
    )
    meter.record(EvalTiming("timed", queue_wait_s=1.0, slot_s=4.0, sandbox_s=4.0, stage="guard"))
    report = meter.report(wall_s=60.0, candidates=1, propose_s=2.5)
    stages = report.stages
    assert (stages["screen"], stages["timing"], stages["guard"]) == (12.0, 5.0, 4.0)
    assert (stages["screen_queue_wait"], stages["timing_queue_wait"]) == (0.5, 3.0)
    assert stages["guard_queue_wait"] == 1.0 and stages["propose"] == 2.5
    assert stages["runner_build"] == pytest.approx(6.1)
    assert stages["runner_timing"] == 2.0 and stages["runner_correctness"] == 2.0
    # Sandbox time outside the judge's stages: process start, imports, the jail.
    assert stages["sandbox_other"] == pytest.approx(20.0 - 11.1)
    assert (report.builds, report.build_cache_hits) == (1, 1)
    assert report.numbers()["stage_runner_build_s"] == pytest.approx(6.1)
