"""Interleaved reference/solution timing (runner/interleaved.py, interleaved_session.py): the
ABBA block order, the adaptive stop, and the interval a real evaluation's trace carries."""

from pathlib import Path

import pytest
from pydantic import ValidationError
from vector_add_request import vector_add_request

from kernelarc.runner.interleaved import (
    Side,
    block_schedule,
    run_blocks,
    speedup_interval,
)
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalStatus, Performance, TimingConfig


def test_blocks_run_in_abba_order() -> None:
    r, s = "reference", "solution"
    assert block_schedule(4) == [r, s, s, r, r, s, s, r]
    assert block_schedule(1) == [r, s]


def _recording_timer(ratio_of: list[float], order: list[Side]) -> object:
    """A block timer whose reference block takes ratio_of[pair] ms and solution block 1 ms."""

    def time_block(side: Side, pair: int) -> list[float]:
        order.append(side)
        return [ratio_of[pair]] * 3 if side == "reference" else [1.0] * 3

    return time_block


def test_a_steady_ratio_stops_at_the_minimum_pairs_in_abba_order() -> None:
    config = TimingConfig(min_block_pairs=3, max_block_pairs=10)
    order: list[Side] = []
    interval = run_blocks(_recording_timer([2.0] * 10, order), config, "cpu_monotonic")  # type: ignore[arg-type]
    assert interval.pairs == 3
    assert order == block_schedule(3)
    assert (interval.low, interval.estimate, interval.high) == pytest.approx((2.0, 2.0, 2.0))
    assert "interleaved ABBA blocks (cpu_monotonic)" in interval.method
    assert "95% CI" in interval.method and "3 pairs x 3 calls" in interval.method


def test_a_noisy_ratio_runs_to_the_cap_and_the_interval_holds_the_estimate() -> None:
    config = TimingConfig(min_block_pairs=2, max_block_pairs=6, ci_half_width=0.01)
    noisy = [1.5, 2.5, 1.8, 2.2, 1.6, 2.4]
    order: list[Side] = []
    interval = run_blocks(_recording_timer(noisy, order), config, "cuda_events")  # type: ignore[arg-type]
    assert interval.pairs == 6
    assert order == block_schedule(6)
    assert interval.low < interval.estimate < interval.high
    assert interval.relative_half_width > 0.01
    assert interval.reference_ms == pytest.approx(sorted(noisy)[2] / 2 + sorted(noisy)[3] / 2)


def test_slow_blocks_stop_at_the_minimum_once_the_stage_budget_is_spent() -> None:
    noisy = [1500.0, 2500.0, 1800.0, 2200.0, 1600.0, 2400.0]  # ms: 3 x 1.5-2.5 s per block
    config = TimingConfig(min_block_pairs=2, max_block_pairs=6, interleave_budget_s=5.0)
    order: list[Side] = []
    interval = run_blocks(_recording_timer(noisy, order), config, "cuda_events")  # type: ignore[arg-type]
    assert interval.pairs == 2 and interval.relative_half_width > config.ci_half_width
    roomy = config.model_copy(update={"interleave_budget_s": 1e6})
    assert run_blocks(_recording_timer(noisy, []), roomy, "cuda_events").pairs == 6  # type: ignore[arg-type]


def test_mismatched_blocks_are_an_error() -> None:
    with pytest.raises(ValueError, match="2 reference blocks vs 1 solution blocks"):
        speedup_interval([[1.0], [1.0]], [[1.0]], confidence=0.95, clock="cupti")


def test_pair_limits_in_the_wrong_order_are_refused_naming_the_fields() -> None:
    with pytest.raises(
        ValidationError, match=r"max_block_pairs \(4\) is below timing.min_block_pairs \(8\)"
    ):
        TimingConfig(min_block_pairs=8, max_block_pairs=4)


def test_an_old_performance_without_the_interval_still_loads() -> None:
    old = {"latency_ms": 1.0, "reference_latency_ms": 2.0, "speedup_factor": 2.0}
    perf = Performance.model_validate(old)
    assert perf.speedup_ci_low is None and perf.speedup_ci_method is None


def test_a_real_evaluation_carries_the_interval_and_keeps_the_official_numbers(
    tmp_path: Path,
) -> None:
    request = vector_add_request(
        "def run(x, y):\n    return x + y\n",
        timing=TimingConfig(warmup=1, iterations=5, max_block_pairs=6),
        first_workload_only=False,
    )
    with LocalSandbox() as sandbox:
        result = sandbox.evaluate(request, timeout_s=120)
    assert len(result.traces) == len(request.workloads)
    for trace in result.traces:
        ev = trace.evaluation
        assert ev is not None and ev.status == EvalStatus.PASSED, ev and ev.log
        perf = ev.performance
        assert perf is not None
        # the official numbers mean what they meant: the protocol's medians and their ratio
        assert perf.speedup_factor == pytest.approx(perf.reference_latency_ms / perf.latency_ms)
        assert perf.timing_method == "cpu_monotonic"
        low, point, high = perf.speedup_ci_low, perf.interleaved_speedup, perf.speedup_ci_high
        assert low is not None and point is not None and high is not None
        assert 0 < low <= point <= high
        assert perf.speedup_ci_method is not None
        assert perf.speedup_ci_method.startswith("interleaved ABBA blocks (cpu_monotonic)")
        assert "x 5 calls" in perf.speedup_ci_method  # block_calls capped by iterations
        assert perf.interleaved_latency_ms and perf.interleaved_reference_latency_ms
    assert result.stage_s.get("interleaved_timing", 0.0) > 0.0


def test_interleaving_off_leaves_the_interval_out() -> None:
    request = vector_add_request(
        "def run(x, y):\n    return x + y\n",
        timing=TimingConfig(warmup=0, iterations=2, interleave=False),
    )
    with LocalSandbox() as sandbox:
        result = sandbox.evaluate(request, timeout_s=120)
    perf = result.traces[0].evaluation.performance  # type: ignore[union-attr]
    assert perf is not None and perf.speedup_ci_low is None and perf.interleaved_speedup is None
    assert "interleaved_timing" not in result.stage_s
