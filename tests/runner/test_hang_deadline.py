"""The per-workload deadline of a silent candidate (runner/hang_deadline.py), as pure arithmetic."""

import time

import pytest
from vector_add_request import vector_add_request

from kernelarc.runner.hang_deadline import WorkloadClock, candidate_calls
from kernelarc.schema import HangPolicy, TimingConfig


def _request(**update: object) -> object:
    base = vector_add_request(
        "def run(x, y):\n    return x + y\n",
        correctness_rounds=3,
        timing=TimingConfig(warmup=2, iterations=5, interleave=False),
    )
    return base.model_copy(
        update={"hang": HangPolicy(reference_factor=10, allowance_s=4), **update}
    )


def test_the_deadline_grows_with_the_reference_time_and_the_calls_made() -> None:
    request = _request()
    assert candidate_calls(request) == 3 + 1 + 2 + 5  # rounds, probe, warm-up, timed
    clock = WorkloadClock.for_request(request, import_allowance_s=0.0)
    budget = clock.begin_workload()
    assert budget.limit_s == pytest.approx(4.0)  # before the reference ran: the allowance only
    clock.reference_ran(0.5)
    assert budget.limit_s == pytest.approx(4.0 + 10 * 0.5 * 11)
    clock.reference_ran(9.0)  # only the workload's first reference run sets the pace
    assert budget.limit_s == pytest.approx(59.0)
    budget.charge(50.0)
    assert budget.remaining_s() == pytest.approx(9.0)
    fresh = clock.begin_workload()
    assert fresh is not budget and fresh.limit_s == pytest.approx(4.0)


def test_the_interleaved_blocks_count_as_calls() -> None:
    timing = TimingConfig(warmup=2, iterations=5, block_calls=8, block_warmup=1, max_block_pairs=6)
    request = _request(timing=timing)
    # 6 pairs at most, each with one block of the candidate: 1 warm-up + min(8, 5) timed calls
    assert candidate_calls(request) == 3 + 1 + 2 + 5 + 6 * (1 + 5)
    no_reference = timing.model_copy(update={"time_reference": False})
    assert candidate_calls(_request(timing=no_reference)) == 3 + 1 + 2 + 5


def test_a_worker_start_adds_the_build_allowance_and_caps_apply() -> None:
    clock = WorkloadClock.for_request(_request(workload_timeout_s=30.0), import_allowance_s=300.0)
    budget = clock.begin_workload()
    clock.worker_started()
    assert budget.limit_s == pytest.approx(30.0)  # 304 s derived, capped by workload_timeout_s
    assert "capped by workload_timeout_s=30 s" in clock.describe()


def test_the_overall_timeout_is_a_wall_clock_deadline() -> None:
    clock = WorkloadClock.for_request(_request(overall_timeout_s=100.0), import_allowance_s=0.0)
    budget = clock.begin_workload()
    assert budget.wall_deadline is not None
    left = budget.remaining_s()
    assert left is not None and left <= 4.0  # the allowance is the smaller here
    clock.started -= 95.0  # as if the judge had run for 95 s: less than the margin is left
    budget = clock.begin_workload()
    left = budget.remaining_s()
    assert left is not None and left <= 0.0
    assert time.monotonic() >= (budget.wall_deadline or 0.0)
