"""A CPU campaign that meets hostile candidates keeps going and finishes (real LocalSandbox,
tracking off, a scripted team proposing samples of tests/samples/hostile in order)."""

import sys
from pathlib import Path

import pytest

from kernelarc.agents import Agent, AgentContext
from kernelarc.agents.proposals import build_proposal
from kernelarc.campaign import run_campaign
from kernelarc.config import BudgetConfig, CampaignConfig, EvalConfig, SandboxConfig, TrackingConfig
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema import EvalStatus, Language, Proposal, Verdict
from kernelarc.tracking.null_tracker import NullTracker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sandboxes"))
from hostile_suite import HOSTILE, PROBLEM, runner_descendants

pytestmark = pytest.mark.slow

# name -> status the attempt must get (REJECTED_STATIC: the guard's static rules stop it first).
SEQUENCE = {
    "sleep_at_import": EvalStatus.TIMEOUT,
    "kill_process_group": "REJECTED_STATIC",
    "nan_output": EvalStatus.INCORRECT_NUMERICAL,
    "segfault_at_import": "REJECTED_STATIC",
    "cached_output": EvalStatus.INCORRECT_NUMERICAL,
}
HONEST = "def run(x, y):\n    return x + y\n"


class ScriptedAgent:
    """Proposes fixed sources in order (a test double of the Agent protocol)."""

    strategy = "scripted"

    def __init__(self, sources: list[tuple[str, str]]) -> None:
        self.name = "scripted"
        self._queue = [
            build_proposal(
                problem="vector_add_f32",
                agent=self.name,
                strategy=self.strategy,
                language=Language.PYTORCH,
                source=source,
                tag=tag,
                knobs={},
                rationale=tag,
            )
            for tag, source in sources
        ]

    def propose(self, ctx: AgentContext) -> Proposal | None:
        return self._queue.pop(0) if self._queue else None


def test_campaign_meets_hostile_candidates_and_finishes(tmp_path: Path) -> None:
    sources = [(name, (HOSTILE / name / "kernel.py").read_text()) for name in SEQUENCE]
    sources.append(("honest", HONEST))
    cfg = CampaignConfig(
        name="hostile-campaign",
        problem=str(PROBLEM),
        device="cpu",
        budget=BudgetConfig(candidates=len(sources), max_parallel=1),
        eval=EvalConfig(correctness_rounds=2, timeout_s=20.0),
        tracking=TrackingConfig(kind="none"),
        sandbox=SandboxConfig(memory_limit_gb=4.0),
    )
    team: list[Agent] = [ScriptedAgent(sources)]
    summary = run_campaign(cfg, tmp_path / "run", NullTracker(), team=team)

    attempts = read_attempts(tmp_path / "run" / "attempts.jsonl")
    assert summary.attempts == len(sources) == len(attempts)
    assert summary.status == "FINISHED", summary
    got = {a.proposal.solution.description: a.status for a in attempts}
    for name, status in SEQUENCE.items():
        assert got[name] == status, (name, got)
    honest = attempts[-1]
    assert honest.status == EvalStatus.PASSED and honest.verdict == Verdict.NEW_BEST
    assert summary.best is not None and summary.best.proposal.id == honest.proposal.id
    assert runner_descendants() == []
