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
