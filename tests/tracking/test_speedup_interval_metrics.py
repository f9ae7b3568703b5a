"""The speedup's confidence interval in what KernelArc logs to MLflow (mlflow_payload.py,
mlflow_tables.py): per-attempt metrics, the campaign's best and final ones, the attempts table."""

import pytest

from kernelarc.schema import Verdict
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_payload import CampaignProgress
from kernelarc.tracking.mlflow_tables import attempts_table
from tests.leaderboard.conftest import with_speedup_interval
from tests.tracking.conftest import build_attempt


def test_an_attempt_with_an_interval_logs_its_bounds_and_the_campaign_its_best() -> None:
    best = with_speedup_interval(
        build_attempt(0, speedup=2.0, verdict=Verdict.NEW_BEST), [(1.8, 2.0, 2.3)]
    )
    old = build_attempt(1, speedup=1.2, variant="old")  # recorded without an interval
    payload = CampaignProgress()
    logged = payload.add(best)
    metrics = {m.key: m.value for m in logged.agent_metrics}
    assert metrics[keys.EVAL_SPEEDUP_CI_LOW] == pytest.approx(1.8)
    assert metrics[keys.EVAL_SPEEDUP_CI_HIGH] == pytest.approx(2.3)
    assert metrics[keys.EVAL_INTERLEAVED_SPEEDUP] == pytest.approx(2.0)
    campaign = {m.key: m.value for m in logged.campaign_metrics}
    assert campaign[keys.CAMPAIGN_BEST_SPEEDUP_CI_LOW] == pytest.approx(1.8)
    assert campaign[keys.CAMPAIGN_BEST_SPEEDUP_CI_HIGH] == pytest.approx(2.3)
    without = {m.key for m in payload.add(old).agent_metrics}
    assert keys.EVAL_SPEEDUP in without and keys.EVAL_SPEEDUP_CI_LOW not in without
    final = payload.final_metrics()
    assert final[keys.FINAL_BEST_SPEEDUP_CI_HIGH] == pytest.approx(2.3)
    table = attempts_table([best, old], {}, {})
    assert table["speedup_ci_low"] == [pytest.approx(1.8), None]
    assert table["speedup_ci_method"][0].startswith("interleaved ABBA blocks")
