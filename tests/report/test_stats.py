"""Per-run results, per-arm statistics and intervals on hand-built campaigns (pure)."""

import math

import pytest

from kernelarc.report.stats import UNIT, mean_interval, run_result, summarize_arms
from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import Attempt, EvalStatus, Verdict
from tests.tracking.conftest import build_attempt

NEW_BEST = Verdict.NEW_BEST
T_975_DF3 = 3.182446305284263
"""Student t quantile 0.975 with 3 degrees of freedom (any statistics table)."""


def _campaign(attempts: list[Attempt], label: str = "run", seed: str = "0") -> CampaignSource:
    return CampaignSource(
        label=label,
        problem_name=attempts[0].problem,
        seed=seed,
        overrides={},
        config={},
        attempts=tuple(attempts),
        sol_scores={a.index: (0.1 * a.index if a.speedup else None) for a in attempts},
    )


def _history() -> list[Attempt]:
    return [
        build_attempt(0, agent="tiler", strategy="tiling", speedup=1.2, verdict=NEW_BEST),
        build_attempt(1, agent="fuser", strategy="fusion", status=EvalStatus.RUNTIME_ERROR),
        build_attempt(2, agent="fuser", strategy="fusion", speedup=2.0, verdict=NEW_BEST),
        # Looked faster, was not accepted: never the incumbent.
        build_attempt(3, agent="tiler", strategy="tiling", speedup=2.5, verdict=Verdict.CHALLENGER),
        build_attempt(4, agent="tiler2", strategy="tiling", speedup=2.6, verdict=NEW_BEST),
    ]


def test_run_result_follows_the_incumbent_within_the_budget() -> None:
    result = run_result(_campaign(_history()), "arm", budget=4)
    assert result.best_so_far == (1.2, 1.2, 2.0, 2.0)
    assert result.final_best == 2.0
    assert result.final_sol == pytest.approx(0.2)  # attempt 2's score
    assert result.candidates_to(1.5) == 3
    assert result.candidates_to(1.2) == 1
    assert result.candidates_to(2.1) is None
    assert result.credit("agent") == pytest.approx({"tiler": 1.2, "fuser": 0.8})
    assert sum(result.credit("agent").values()) == pytest.approx(result.final_best)


def test_a_larger_budget_sees_later_gains_and_strategies_pool_agents() -> None:
    result = run_result(_campaign(_history()), "arm", budget=5)
    assert result.final_best == 2.6
    assert [g.index for g in result.gains] == [0, 2, 4]
    assert result.credit("strategy") == pytest.approx({"tiling": 1.8, "fusion": 0.8})


def test_no_correct_kernel_counts_as_zero_and_a_short_run_keeps_its_last_value() -> None:
    failed = [build_attempt(0, status=EvalStatus.COMPILE_ERROR)]
    result = run_result(_campaign(failed), "arm", budget=3)
    assert result.best_so_far == (0.0, 0.0, 0.0)
    assert result.final_sol is None
    assert result.gains == ()


def test_t_interval_matches_the_textbook_formula() -> None:
    values = [10.0, 11.0, 12.0, 15.0]  # the interval stays above 0: nothing is cut
    got = mean_interval(values, 0.95, "t")
    sd = math.sqrt(sum((v - 12.0) ** 2 for v in values) / 3)
    half = T_975_DF3 * sd / 2
    assert (got.mean, got.n) == (12.0, 4)
    assert got.low == pytest.approx(12.0 - half)
    assert got.high == pytest.approx(12.0 + half)


def test_intervals_never_leave_the_quantitys_range() -> None:
    # Issue 17: four speedups of one noisy CPU sweep gave `5.66 [-61.6, 72.9]`.
    speedups = [10.96, 0.37]
    for method in ("t", "bootstrap"):
        got = mean_interval(speedups, 0.95, method)
        assert 0.0 <= got.low <= got.mean <= got.high
    sols = [0.99, 0.2]
    t_sol = mean_interval(sols, 0.95, "t", UNIT)
    assert t_sol.low >= 0.0 and t_sol.high <= 1.0


def test_bootstrap_interval_is_seeded_and_inside_the_data() -> None:
    values = [1.0, 2.0, 3.0, 6.0]
    first = mean_interval(values, 0.9, "bootstrap")
    assert first == mean_interval(values, 0.9, "bootstrap")
    assert 1.0 <= first.low < 3.0 < first.high <= 6.0
    narrow = mean_interval(values, 0.5, "bootstrap")
    assert first.low <= narrow.low and narrow.high <= first.high


def test_one_value_has_no_interval_and_bad_arguments_are_refused() -> None:
    single = mean_interval([2.0], 0.95)
    assert single.mean == 2.0 and math.isnan(single.low) and math.isnan(single.high)
    assert mean_interval([], 0.95).n == 0
    with pytest.raises(ValueError, match="bootstrap"):
        mean_interval([1.0, 2.0], 0.95, "jackknife")
    with pytest.raises(ValueError, match="confidence"):
        mean_interval([1.0, 2.0], 1.5)


def test_summarize_arms_groups_by_problem_and_arm() -> None:
    a = run_result(_campaign(_history(), "a"), "x", budget=4)
    b = run_result(_campaign(_history()[:1], "b", seed="1"), "x", budget=4)
    c = run_result(_campaign(_history(), "c"), "y", budget=5)
    arms = summarize_arms([a, b, c], {"axpby_h1024": 1.5}, 0.95, "t")
    assert [(s.problem, s.arm, len(s.runs)) for s in arms] == [
        ("axpby_h1024", "x", 2),
        ("axpby_h1024", "y", 1),
    ]
    x = arms[0]
    assert x.final_best.mean == pytest.approx((2.0 + 1.2) / 2)
    assert x.reached == 1 and x.to_target.mean == 3.0
    assert x.curve == pytest.approx((1.2, 1.2, 1.6, 1.6))
    assert x.curve_low == (1.2, 1.2, 1.2, 1.2)
    assert x.curve_high == (1.2, 1.2, 2.0, 2.0)
    # An agent absent from a run counts 0 there: credits average to the mean final best.
    assert x.credit_agents == pytest.approx({"tiler": 1.2, "fuser": 0.4})
    assert sum(x.credit_agents.values()) == pytest.approx(x.final_best.mean)
