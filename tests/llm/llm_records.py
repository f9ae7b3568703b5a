"""Attempt records built in memory for the prompt, parser and replay tests (no sandbox needed)."""

from kernelarc.agents.proposals import build_proposal
from kernelarc.problems.files import Problem
from kernelarc.schema import (
    Attempt,
    Correctness,
    Environment,
    EvalStatus,
    Evaluation,
    Language,
    Performance,
    Proposal,
    Trace,
    Verdict,
)
from kernelarc.schema.coordination import LLMExchange
from kernelarc.schema.guard_record import GuardRecord, StaticFinding


def proposal(
    problem: Problem, agent: str, source: str, *, llm: list[LLMExchange] | None = None
) -> Proposal:
    built = build_proposal(
        problem=problem.name,
        agent=agent,
        strategy="fusion",
        language=Language.PYTORCH,
        source=source,
        tag="t",
        knobs={},
        rationale=f"rationale of {agent}",
    )
    return built.model_copy(update={"llm": llm or []})


def passed(
    problem: Problem,
    index: int,
    prop: Proposal,
    speedup: float,
    hardware: str = "NVIDIA H200",
) -> Attempt:
    traces = [
        Trace(
            definition=problem.name,
            workload=w,
            solution=prop.solution.name,
            evaluation=Evaluation(
                status=EvalStatus.PASSED,
                environment=Environment(hardware=hardware),
                timestamp="2026-01-01T00:00:00",
                correctness=Correctness(),
                performance=Performance(
                    latency_ms=1.0 / speedup, reference_latency_ms=1.0, speedup_factor=speedup
                ),
            ),
        )
        for w in problem.workloads
    ]
    return Attempt(
        index=index,
        problem=problem.name,
        proposal=prop,
        status=EvalStatus.PASSED,
        traces=traces,
        speedup=speedup,
        latency_ms=1.0 / speedup,
        verdict=Verdict.NEW_BEST,
        started_at="2026-01-01T00:00:00",
        finished_at="2026-01-01T00:00:01",
    )


def failed(
    problem: Problem,
    index: int,
    prop: Proposal,
    log: str,
    findings: list[StaticFinding] | None = None,
    reason: str = "",
) -> Attempt:
    trace = Trace(
        definition=problem.name,
        workload=problem.workloads[0],
        solution=prop.solution.name,
        evaluation=Evaluation(
            status=EvalStatus.RUNTIME_ERROR,
            environment=Environment(hardware="cpu"),
            timestamp="2026-01-01T00:00:00",
            log=log,
        ),
    )
    return Attempt(
        index=index,
        problem=problem.name,
        proposal=prop,
        status=EvalStatus.RUNTIME_ERROR,
        traces=[trace],
        verdict=Verdict.FAILED,
        started_at="2026-01-01T00:00:00",
        finished_at="2026-01-01T00:00:01",
        guard=GuardRecord(findings=findings or [], reason=reason),
    )
