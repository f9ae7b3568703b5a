"""Fixtures for tracking tests: hand-built Attempts and a real `mlflow server`."""

from collections.abc import Callable, Iterator

import pytest

from kernelarc.schema import (
    Attempt,
    BuildSpec,
    Correctness,
    Environment,
    EvalStatus,
    Evaluation,
    Performance,
    Proposal,
    Solution,
    SourceFile,
    Trace,
    Verdict,
    Workload,
    proposal_id_for,
)
from kernelarc.schema.guard_record import GuardRecord, RooflineBound
from tests.mlflow_server import MlflowServer

MakeAttempt = Callable[..., Attempt]


def _trace(problem: str, solution: str, status: EvalStatus, speedup: float) -> Trace:
    passed = status == EvalStatus.PASSED
    with_correctness = status in (EvalStatus.PASSED, EvalStatus.INCORRECT_NUMERICAL)
    return Trace(
        definition=problem,
        solution=solution,
        workload=Workload(uuid="w-0", axes={"N": 8}),
        evaluation=Evaluation(
            status=status,
            environment=Environment(hardware="cpu", libs={"torch": "2.13.0"}),
            timestamp="2026-12-02T10:00:00+00:00",
            log="" if passed else "boom",
            correctness=Correctness(max_absolute_error=1e-6) if with_correctness else None,
            performance=(
                Performance(latency_ms=1.0, reference_latency_ms=speedup, speedup_factor=speedup)
                if passed
                else None
            ),
        ),
    )


def build_attempt(
    index: int,
    *,
    agent: str = "tiler",
    strategy: str = "tiling",
    problem: str = "axpby_h1024",
    status: EvalStatus | str = EvalStatus.PASSED,
    speedup: float | None = 1.5,
    latency_ms: float | None = 0.25,
    variant: str = "",
    extra_sources: dict[str, str] | None = None,
    verdict: Verdict | None = None,
    best_speedup_after: float | None = None,
    roofline_ms: float | None = None,
) -> Attempt:
    """A small valid Attempt; `variant` changes the source so the proposal id differs.

    The verdict defaults to CORRECT (passed) or FAILED; pass NEW_BEST for an incumbent. Its one
    trace times the kernel at 1 ms and the reference at `speedup` ms; `roofline_ms` records a
    guard roofline bound for it (then a SOL score exists).
    """
    body = f"def run(x, y):\n    return x + y  # {variant or index}\n"
    sources = [SourceFile(path="kernel.py", content=body)]
    sources += [SourceFile(path=p, content=c) for p, c in (extra_sources or {}).items()]
    solution = Solution(
        name=f"{problem}_{agent}_{index}",
        definition=problem,
        author=agent,
        spec=BuildSpec(
            languages=["pytorch"],
            target_hardware=["LOCAL"],
            entry_point="kernel.py::run",
            destination_passing_style=False,
        ),
        sources=sources,
    )
    passed = status == EvalStatus.PASSED
    traces = (
        []
        if status == "INFRA_ERROR"
        else [_trace(problem, solution.name, EvalStatus(status), speedup or 1.0)]
    )
    return Attempt(
        index=index,
        problem=problem,
        proposal=Proposal(
            id=proposal_id_for(solution), agent=agent, strategy=strategy, solution=solution
        ),
        status=status,
        traces=traces,
        speedup=speedup if passed else None,
        latency_ms=latency_ms if passed else None,
        verdict=verdict or (Verdict.CORRECT if passed else Verdict.FAILED),
        best_speedup_after=best_speedup_after,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:00:01+00:00",
        wall_s=1.0,
        stderr_tail="" if passed else "Traceback: boom",
        guard=(
            GuardRecord(
                roofline=[
                    RooflineBound(workload="w-0", bound_ms=roofline_ms, bytes=1.0, flops=0.0)
                ],
                device="cpu",
            )
            if roofline_ms is not None
            else None
        ),
    )


@pytest.fixture
def make_attempt() -> MakeAttempt:
    """Factory of small valid Attempts (see build_attempt)."""
    return build_attempt


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `mlflow server` on 127.0.0.1 (1 worker, no job runner); yields its URI."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow_server"))
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()
