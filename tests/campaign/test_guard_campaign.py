"""CPU campaigns through real sandboxes with the guard on and off (scripted team, tracking off):
a hostile proposal is never evaluated, a challenger is re-timed against the incumbent and the
best is confirmed on fresh inputs; `guard=off` accepts naively; replay reproduces every verdict."""

from pathlib import Path

import pytest

from kernelarc.agents import Agent, AgentContext
from kernelarc.agents.proposals import build_proposal
from kernelarc.campaign import run_campaign
from kernelarc.config import (
    BudgetConfig,
    CampaignConfig,
    EvalConfig,
    ExecutorConfig,
    GuardConfig,
    TrackingConfig,
)
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.rejudge import replay_run
from kernelarc.schema import Attempt, EvalStatus, Language, Proposal, Verdict
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow

_REFERENCE = (
    "import torch\n\n\ndef _rmsnorm(x, weight):\n    xf = x.float()\n"
    "    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)\n"
    "    return (xf * inv * weight.float()).to(torch.bfloat16)\n\n\n"
)
# Slow by waiting (50 ms, far above CPU timing noise for these small shapes), not by computing:
# the runner's timing plausibility check judges a waiting kernel by its (small) CPU time.
SLOW = (
    "import time\n\n"
    + _REFERENCE
    + ("def run(x, weight):\n    time.sleep(0.05)\n    return _rmsnorm(x, weight)\n")
)
FAST = _REFERENCE + "def run(x, weight):\n    return _rmsnorm(x, weight)\n"
HOSTILE = "import subprocess\n\n\n" + FAST
WRONG = "def run(x, weight):\n    return x\n"


class ScriptedAgent:
    """Proposes fixed sources in order (a test double of the Agent protocol)."""

    strategy = "scripted"

    def __init__(self, sources: list[tuple[str, str]]) -> None:
        self.name = "scripted"
        self._queue = [
            build_proposal(
                problem="rmsnorm",
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


def _run(tmp_path: Path, sources: list[tuple[str, str]], guard: GuardConfig) -> list[Attempt]:
    cfg = CampaignConfig(
        name="guard-test",
        problem="rmsnorm",
        device="cpu",
        budget=BudgetConfig(candidates=len(sources), max_parallel=1),
        # Three timed calls (blocks of three interleaved) instead of up to 50 within 1 s: the
        # slow candidate waits 50 ms per call, so the default protocol spent ~10 s of waiting per
        # full evaluation of it; 50 ms against ~1 ms still decides the re-timing in two rounds.
        eval=EvalConfig(correctness_rounds=2, warmup=0, iterations=3),
        tracking=TrackingConfig(kind="none"),
        guard=guard,
        # Timed slot only: each candidate is one sandbox run, not a screen and then a timed run
        # (the screen is tested in tests/executor/; the guard's own runs are the same either way).
        executor=ExecutorConfig(correctness_slots=0),
    )
    team: list[Agent] = [ScriptedAgent(sources)]
    summary = run_campaign(cfg, tmp_path, NullTracker(), team=team)
    attempts = read_attempts(tmp_path / "attempts.jsonl")
    assert summary.attempts == len(sources) == len(attempts)
    assert replay_run(tmp_path) == [], "replay must reproduce every recorded decision"
    return attempts


def test_guard_on_retimes_the_challenger_and_confirms_the_best(tmp_path: Path) -> None:
    attempts = _run(
        tmp_path,
        [("slow", SLOW), ("hostile", HOSTILE), ("fast", FAST), ("wrong", WRONG)],
        GuardConfig(min_repeats=2),  # two rounds exercise the ABBA order
    )
    slow, hostile, fast, wrong = attempts
    assert (slow.verdict, slow.confirmed) == (Verdict.NEW_BEST, True)
    assert slow.guard is not None and slow.guard.confirmation is not None
    assert slow.guard.confirmation.seed == 200 + 1 + 0  # eval.seed + 1 + candidate ordinal
    assert slow.guard.samples == []  # no incumbent yet: confirmation only
    assert slow.guard.extra_evaluations == 1
    assert {f.rule for f in slow.guard.findings} == {"KA-S033"}  # `time` is flagged, not blocked

    assert hostile.status == "REJECTED_STATIC" and hostile.verdict == Verdict.FAILED
    assert hostile.traces == [] and hostile.guard is not None
    assert "KA-S009" in {f.rule for f in hostile.guard.findings}

    assert fast.guard is not None and fast.guard.incumbent_id == slow.proposal.id
    roles = [(s.round, s.role) for s in fast.guard.samples]
    assert roles == [(0, "challenger"), (0, "incumbent"), (1, "incumbent"), (1, "challenger")]
    assert all(s.status == "PASSED" and len(s.latencies_ms) == 3 for s in fast.guard.samples)
    assert fast.guard.decision is not None and fast.guard.decision.outcome == "accept"
    assert fast.guard.decision.ci_high is not None and fast.guard.decision.ci_high < 0.99
    assert (fast.verdict, fast.confirmed) == (Verdict.NEW_BEST, True)
    assert fast.guard.confirmation is not None and fast.guard.confirmation.seed == 203
    assert fast.guard.extra_evaluations == 5
    assert len(fast.guard.roofline) == 3 and fast.guard.device == "cpu"

    assert wrong.status == EvalStatus.INCORRECT_NUMERICAL and wrong.verdict == Verdict.FAILED


def test_guard_off_accepts_naively(tmp_path: Path) -> None:
    attempts = _run(
        tmp_path,
        [("slow", SLOW), ("hostile", HOSTILE), ("fast", FAST)],
        GuardConfig(enabled=False, confirm=False),
    )
    slow, hostile, fast = attempts
    assert [a.verdict for a in attempts] == [Verdict.NEW_BEST, Verdict.FAILED, Verdict.NEW_BEST]
    assert hostile.status == "REJECTED_STATIC"  # static rules are the same in the ablation
    for attempt in (slow, fast):
        assert attempt.guard is not None and not attempt.confirmed
        assert attempt.guard.samples == [] and attempt.guard.confirmation is None
        assert attempt.guard.extra_evaluations == 0


def test_latency_below_the_roofline_is_rejected(tmp_path: Path) -> None:
    guard = GuardConfig()
    guard.roofline.cpu.copy_bytes_per_s = 1.0  # a 1 B/s "ceiling": every latency beats it
    (attempt,) = _run(tmp_path, [("fast", FAST)], guard)
    assert attempt.status == "REJECTED_GUARD" and attempt.verdict == Verdict.FAILED
    assert attempt.guard is not None and "speed of light" in attempt.guard.reason
    assert attempt.guard.extra_evaluations == 0  # rejected before any re-timing
