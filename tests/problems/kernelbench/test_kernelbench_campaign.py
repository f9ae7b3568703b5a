"""A short CPU campaign of the offline compiler agent on a converted KernelBench problem: its
candidates embed the converted reference, which must not get them rejected by the guard's static
scan (it did while the reference ran the KernelBench file with exec and registered a module in
sys.modules)."""

from pathlib import Path

import pytest
from conftest import Imported

from kernelarc.campaign import run_campaign
from kernelarc.config import (
    AgentsConfig,
    AgentSpec,
    BudgetConfig,
    CampaignConfig,
    ExecutorConfig,
    TrackingConfig,
)
from kernelarc.guard.static_rules import blocking
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema import EvalStatus
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow


def test_compiler_candidates_on_a_converted_problem_are_evaluated(
    imported: Imported, tmp_path: Path
) -> None:
    cfg = CampaignConfig(
        name="kb-campaign",
        problem=str(imported.out / "kb_l1_1_leakyrelu"),
        device="cpu",
        # One candidate (the compiler agent's first, the reference wrapped as a solution: it
        # embeds the converted reference whole) and no screen: the static scan is what is tested,
        # and a CPU torch.compile build would add a minute without testing more of it.
        budget=BudgetConfig(candidates=1, max_parallel=1),
        agents=AgentsConfig(team=[AgentSpec(kind="compiler")]),
        tracking=TrackingConfig(kind="none"),
        executor=ExecutorConfig(correctness_slots=0),
    )
    run_campaign(cfg, tmp_path, NullTracker())
    attempts = read_attempts(tmp_path / "attempts.jsonl")
    assert [a.status for a in attempts] == [EvalStatus.PASSED]
    guard = attempts[0].guard
    assert guard is not None and not blocking(guard.findings)
