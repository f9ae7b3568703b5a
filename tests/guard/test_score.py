"""The one SOL score (kernelarc/guard/score.py): formula, range, and per-attempt scoring."""

import pytest

from kernelarc.guard.score import score_attempt, score_traces, sol_score
from tests.leaderboard.conftest import build_attempt, with_speedup_interval


@pytest.mark.parametrize(
    ("t_k", "t_sol", "t_b", "expected"),
    [
        pytest.param(2.0, 1.0, 2.0, 0.5, id="at-baseline-half"),
        pytest.param(1.0, 1.0, 2.0, 1.0, id="at-speed-of-light-one"),
        # SOL-ExecBench's unclamped formula gives -5 here (issue 17: scores outside [0, 1]).
        pytest.param(0.4, 1.0, 1.5, 1.0, id="below-sol-clamped-to-one"),
        pytest.param(0.9, 1.0, 3.0, 1.0, id="slightly-below-sol"),
        pytest.param(0.5, 1.0, 1.0, 1.0, id="tb-le-tsol-fast"),
        pytest.param(1.5, 1.0, 0.8, 0.0, id="tb-le-tsol-slow"),
    ],
)
def test_sol_score(t_k: float, t_sol: float, t_b: float, expected: float) -> None:
    assert sol_score(t_k, t_sol, t_b) == pytest.approx(expected)


@pytest.mark.parametrize("t_k", [1e-9, 0.3, 1.0, 7.0, 1e6])
@pytest.mark.parametrize(("t_sol", "t_b"), [(0.5, 0.6), (0.5, 40.0), (0.0, 1.0), (2.0, 1.0)])
def test_sol_score_stays_in_its_range(t_k: float, t_sol: float, t_b: float) -> None:
    assert 0.0 <= sol_score(t_k, t_sol, t_b) <= 1.0


def test_t_b_is_the_traces_own_reference() -> None:
    attempt = build_attempt(0, latencies=[0.1, 0.4], speedup=2.0, bounds_ms=[0.0, 0.0])
    score = score_attempt(attempt, {"w0": 0.0, "w1": 0.0}, "guard roofline (x)")
    assert score.t_b_source == "reference" and score.t_b_ms == pytest.approx(0.4)
    assert [w.reference_latency_ms for w in score.workloads] == [0.2, 0.8]
    assert score.sol_score == pytest.approx(1 / (1 + 0.5))  # T_b = 2 T_k on both workloads
    assert not score.cpu_timed


def test_score_without_bounds_is_empty_and_with_partial_bounds_too() -> None:
    attempt = build_attempt(0, latencies=[0.1, 0.4], speedup=2.0)
    score = score_attempt(attempt, None, "")
    assert (score.sol_score, score.t_sol_ms, score.t_b_source) == (None, None, "reference")
    assert score.latency_ms == pytest.approx(0.2)
    partial = score_attempt(attempt, {"w0": 0.01}, "guard roofline (x)")
    assert (partial.sol_score, partial.t_sol_source) == (None, "")
    assert partial.workloads[0].sol_score is not None


def test_a_failed_attempt_has_no_score() -> None:
    with pytest.raises(ValueError, match="without performance"):
        score_attempt(build_attempt(0, status="RUNTIME_ERROR"), None, "")


def test_the_interval_of_several_workloads_combines_their_bounds_and_says_how() -> None:
    attempt = with_speedup_interval(
        build_attempt(0, speedup=2.0), [(1.8, 2.0, 2.2), (3.2, 4.0, 5.0)]
    )
    traces = attempt.traces
    interval = score_traces(traces).interval
    assert interval is not None
    assert interval.low == pytest.approx((1.8 * 3.2) ** 0.5)
    assert interval.estimate == pytest.approx((2.0 * 4.0) ** 0.5)
    assert interval.high == pytest.approx((2.2 * 5.0) ** 0.5)
    assert interval.method.startswith("geometric mean over 2 workloads of the per-workload bounds")
    assert "per workload: interleaved ABBA blocks (cupti)" in interval.method
    assert (attempt.speedup_ci_low, attempt.speedup_ci_high) == (interval.low, interval.high)
    score = score_attempt(attempt, None, "")
    assert score.interval == interval


def test_one_workload_without_an_interval_leaves_the_aggregate_out() -> None:
    attempt = with_speedup_interval(build_attempt(0), [(1.4, 1.5, 1.6), (1.4, 1.5, 1.6)])
    old = build_attempt(1)  # recorded before intervals existed
    mixed = [attempt.traces[0], old.traces[1]]
    assert score_traces(mixed).interval is None
    assert score_traces([attempt.traces[0]]).interval is not None
    assert score_traces(old.traces).interval is None
