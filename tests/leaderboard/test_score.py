"""The SOL score formula and the T_b baseline (pure)."""

from typing import Any

import pytest

from kernelarc.schema import Attempt, EvalStatus, Verdict
from leaderboard.score import compile_baseline, score_attempt, sol_score
from tests.leaderboard.conftest import MakeAttempt


@pytest.mark.parametrize(
    ("t_k", "t_sol", "t_b", "expected"),
    [
        pytest.param(2.0, 1.0, 2.0, 0.5, id="at-baseline-half"),
        pytest.param(1.0, 1.0, 2.0, 1.0, id="at-speed-of-light-one"),
        pytest.param(0.4, 1.0, 1.5, -5.0, id="below-sol-unclamped"),
        pytest.param(0.5, 1.0, 1.0, 1.0, id="tb-le-tsol-fast"),
        pytest.param(1.5, 1.0, 0.8, 0.0, id="tb-le-tsol-slow"),
    ],
)
def test_sol_score(t_k: float, t_sol: float, t_b: float, expected: float) -> None:
    assert sol_score(t_k, t_sol, t_b) == pytest.approx(expected)


def test_baseline_is_the_fastest_passed_max_autotune_attempt(make_attempt: MakeAttempt) -> None:
    def compiled(index: int, variant: str, latency: float, **kw: Any) -> Attempt:
        knobs = {"variant": variant, "compiled": True}
        return make_attempt(index, latency_ms=latency, knobs=knobs, verdict=Verdict.CORRECT, **kw)

    attempts = [
        compiled(0, "compile-max-autotune", 0.5),
        compiled(1, "compile-max-autotune-no-cudagraphs", 0.3),
        compiled(2, "compile-default", 0.1),  # not a max-autotune variant
        compiled(3, "compile-max-autotune", 0.01, status=EvalStatus.RUNTIME_ERROR),
    ]
    baseline = compile_baseline(attempts)
    assert baseline is not None
    assert baseline.source == "torch.compile:compile-max-autotune-no-cudagraphs (attempt 1)"
    assert dict(baseline.latencies_ms) == {"w0": 0.3, "w1": 0.3}
    assert compile_baseline([attempts[2]]) is None


def test_score_without_bounds_is_empty_and_with_partial_bounds_too(
    make_attempt: MakeAttempt,
) -> None:
    attempt = make_attempt(0, latencies=[0.1, 0.4], speedup=2.0)
    score = score_attempt(attempt, None, None, "")
    assert (score.sol_score, score.t_sol_ms, score.t_b_source) == (None, None, "reference")
    assert score.latency_ms == pytest.approx(0.2)
    partial = score_attempt(attempt, None, {"w0": 0.01}, "guard roofline (x)")
    assert (partial.sol_score, partial.t_sol_source) == (None, "")
    assert partial.workloads[0].sol_score is not None
