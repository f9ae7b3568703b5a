"""A short CPU campaign of the offline compiler agent on a converted KernelBench problem: its
candidates embed the converted reference, which must not get them rejected by the guard's static
scan (it did while the reference ran the KernelBench file with exec and registered a module in
sys.modules)."""

from pathlib import Path

import pytest
from conftest import Imported

from kernelarc.campaign import run_campaign
from kernelarc.config import AgentsConfig, AgentSpec, BudgetConfig, CampaignConfig, TrackingConfig
from kernelarc.schema import EvalStatus
from kernelarc.tracking.attempts_log import read_attempts
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow


def test_compiler_candidates_on_a_converted_problem_are_evaluated(
    imported: Imported, tmp_path: Path
) -> None:
    cfg = CampaignConfig(
        name="kb-campaign",
        problem=str(imported.out / "kb_l1_1_leakyrelu"),
        device="cpu",
        budget=BudgetConfig(candidates=2, max_parallel=1),
        agents=AgentsConfig(team=[AgentSpec(kind="compiler")]),
        tracking=TrackingConfig(kind="none"),
    )
    run_campaign(cfg, tmp_path, NullTracker())
    statuses = [a.status for a in read_attempts(tmp_path / "attempts.jsonl")]
    assert len(statuses) == 2
    assert "REJECTED_STATIC" not in statuses
    assert EvalStatus.PASSED in statuses
