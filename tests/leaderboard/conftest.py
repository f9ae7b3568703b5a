"""Fixtures for export tests: hand-built Attempts written to a real run dir's attempts.jsonl."""

from collections.abc import Callable, Sequence
from pathlib import Path

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
from kernelarc.tracking.attempts_log import AttemptLog


def build_attempt(
    index: int,
    *,
    problem: str = "rmsnorm",
    status: EvalStatus = EvalStatus.PASSED,
    speedup: float = 1.5,
    latency_ms: float = 0.2,
    agent: str = "tiler",
    sources: dict[str, str] | None = None,
    languages: Sequence[str] = ("pytorch",),
    entry_point: str = "kernel.py::run",
) -> Attempt:
    """A valid Attempt with one trace per workload (two workloads)."""
    files = sources or {"kernel.py": f"def run(x, w):\n    return x * w  # v{index}\n"}
    solution = Solution(
        name=f"{problem}_{agent}_{index}",
        definition=problem,
        author=agent,
        description=None,
        spec=BuildSpec(
            languages=list(languages),
            target_hardware=["B200", "LOCAL"],
            entry_point=entry_point,
            destination_passing_style=False,
        ),
        sources=[SourceFile(path=p, content=c) for p, c in files.items()],
    )
    passed = status == EvalStatus.PASSED
    traces = [
        Trace(
            definition=problem,
            solution=solution.name,
            workload=Workload(uuid=f"w{n}", axes={"M": 4 * (n + 1)}),
            evaluation=Evaluation(
                status=status,
                environment=Environment(hardware="NVIDIA H200", libs={"torch": "2.13.0"}),
                timestamp="2026-12-02T10:00:00+00:00",
                correctness=(
                    Correctness(max_absolute_error=1e-5)
                    if status in (EvalStatus.PASSED, EvalStatus.INCORRECT_NUMERICAL)
                    else None
                ),
                performance=(
                    Performance(
                        latency_ms=latency_ms,
                        reference_latency_ms=latency_ms * speedup,
                        speedup_factor=speedup,
                    )
                    if passed
                    else None
                ),
            ),
        )
        for n in range(2)
    ]
    return Attempt(
        index=index,
        problem=problem,
        proposal=Proposal(
            id=proposal_id_for(solution), agent=agent, strategy="tiling", solution=solution
        ),
        status=status,
        traces=traces,
        speedup=speedup if passed else None,
        latency_ms=latency_ms if passed else None,
        verdict=Verdict.CORRECT if passed else Verdict.FAILED,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:00:01+00:00",
    )


@pytest.fixture
def make_attempt() -> Callable[..., Attempt]:
    """Factory of valid Attempts (see build_attempt)."""
    return build_attempt


@pytest.fixture
def write_run(tmp_path: Path) -> Callable[[Sequence[Attempt]], Path]:
    """Write attempts to `<tmp>/run/attempts.jsonl` with the real AttemptLog; return the run dir."""

    def write(attempts: Sequence[Attempt]) -> Path:
        run_dir = tmp_path / "run"
        run_dir.mkdir(exist_ok=True)
        log = AttemptLog(run_dir / "attempts.jsonl")
        for attempt in attempts:
            log.append(attempt)
        return run_dir

    return write
