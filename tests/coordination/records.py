"""Attempt records for the coordination unit tests, built the way the campaign loop builds them.

(A plain module, not conftest.py: several test dirs have a conftest.)
"""

from kernelarc.agents.proposals import build_proposal
from kernelarc.schema import Attempt, EvalStatus, Language, Verdict
from kernelarc.schema.guard_record import (
    GuardRecord,
    GuardSettings,
    RetimingSample,
    RooflineBound,
)

PROBLEM = "rmsnorm"


def attempt(
    index: int,
    *,
    agent: str = "tiling",
    speedup: float | None = 1.0,
    latency_ms: float | None = None,
    status: str = "PASSED",
    source: str | None = None,
    guard: GuardRecord | None = None,
    knobs: dict[str, str | int | float | bool] | None = None,
) -> Attempt:
    """A judged attempt; the source defaults to one unique per (agent, index)."""
    proposal = build_proposal(
        problem=PROBLEM,
        agent=agent,
        strategy=agent,
        language=Language.PYTORCH,
        source=source or f"def run(x, weight):\n    return x  # {agent} {index}\n",
        tag=f"t{index}",
        knobs=knobs or {},
        rationale="test",
    )
    passed = status == EvalStatus.PASSED
    if latency_ms is None and speedup is not None:
        latency_ms = 1.0 / speedup
    return Attempt(
        index=index,
        problem=PROBLEM,
        proposal=proposal,
        status=status,  # type: ignore[arg-type]
        traces=[],
        speedup=speedup if passed or status == "REJECTED_GUARD" else None,
        latency_ms=latency_ms if passed or status == "REJECTED_GUARD" else None,
        verdict=Verdict.CORRECT if passed else Verdict.FAILED,
        started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:00:01+00:00",
        guard=guard,
    )


def retiming(
    incumbent: Attempt,
    *,
    status: str = "PASSED",
    latencies_ms: list[float] | None = None,
    bound_ms: float = 0.0,
    slack: float | None = 0.2,
) -> GuardRecord:
    """The guard record of a challenger re-timed against `incumbent` (two rounds)."""
    latencies = latencies_ms if latencies_ms is not None else [incumbent.latency_ms or 1.0]
    samples = []
    for round_index in range(2):
        samples.append(
            RetimingSample(
                round=round_index,
                role="challenger",
                proposal_id="p-challenger",
                status="PASSED",
                latencies_ms=[0.5] * len(latencies),
            )
        )
        samples.append(
            RetimingSample(
                round=round_index,
                role="incumbent",
                proposal_id=incumbent.proposal.id,
                status=status,
                latencies_ms=latencies if status == "PASSED" else [],
            )
        )
    bounds = [
        RooflineBound(workload=f"w{i}", bound_ms=bound_ms, bytes=1.0, flops=0.0)
        for i in range(len(latencies))
    ]
    return GuardRecord(
        settings=GuardSettings(roofline_slack=slack),
        incumbent_id=incumbent.proposal.id,
        incumbent_index=incumbent.index,
        roofline=bounds,
        samples=samples,
        extra_evaluations=len(samples),
    )
