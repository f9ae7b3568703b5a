"""Fixtures for export tests: hand-built Attempts in real run dirs (attempts.jsonl, problem/)."""

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.rundir.run_record import CampaignRecord, write_campaign_record
from kernelarc.schema import (
    Attempt,
    BuildSpec,
    CompileOptions,
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

AXES = (4, 8)
"""Workload w<n> binds M = AXES[n]."""


def definition_json(
    problem: str, reference: str = "def run(x, w):\n    return x * w\n"
) -> dict[str, Any]:
    """A small elementwise definition (float32, one var axis M)."""
    return {
        "name": problem,
        "op_type": "elementwise",
        "axes": {"M": {"type": "var"}},
        "inputs": {
            "x": {"shape": ["M"], "dtype": "float32"},
            "w": {"shape": ["M"], "dtype": "float32"},
        },
        "outputs": {"out": {"shape": ["M"], "dtype": "float32"}},
        "reference": reference,
    }


def build_attempt(
    index: int,
    *,
    problem: str = "rmsnorm",
    status: EvalStatus | str = EvalStatus.PASSED,
    verdict: Verdict | None = None,
    confirmed: bool = True,
    speedup: float = 1.5,
    latency_ms: float = 0.2,
    latencies: Sequence[float] | None = None,
    agent: str = "tiler",
    knobs: dict[str, str | int | float | bool] | None = None,
    sources: dict[str, str] | None = None,
    languages: Sequence[str] = ("pytorch",),
    entry_point: str = "kernel.py::run",
    compile_options: CompileOptions | None = None,
    hardware: str = "NVIDIA H200",
    bounds_ms: Sequence[float] | None = None,
    finished_at: str = "2026-12-02T10:00:01+00:00",
    timing_method: str | None = None,
) -> Attempt:
    """A valid Attempt with one trace per workload (two workloads, w0 and w1).

    PASSED attempts default to an accepted one: verdict NEW_BEST, confirmed. `latencies` gives
    T_k per workload (default `latency_ms` for both); reference = T_k * speedup. `bounds_ms`
    records guard roofline bounds (T_SOL) per workload.
    """
    files = sources or {"kernel.py": f"def run(x, w):\n    return x * w  # v{index}\n"}
    solution = Solution(
        name=f"{problem}_{agent}_{index}",
        definition=problem,
        author=agent,
        spec=BuildSpec(
            languages=list(languages),
            target_hardware=["B200", "LOCAL"],
            entry_point=entry_point,
            destination_passing_style=False,
            compile_options=compile_options,
        ),
        sources=[SourceFile(path=p, content=c) for p, c in files.items()],
    )
    passed = status == EvalStatus.PASSED
    trace_status = (
        EvalStatus(status) if status in EvalStatus.__members__ else EvalStatus.RUNTIME_ERROR
    )
    with_correctness = trace_status in (EvalStatus.PASSED, EvalStatus.INCORRECT_NUMERICAL)
    times = list(latencies) if latencies is not None else [latency_ms] * len(AXES)
    traces = [
        Trace(
            definition=problem,
            solution=solution.name,
            workload=Workload(uuid=f"w{n}", axes={"M": m}),
            evaluation=Evaluation(
                status=trace_status,
                environment=Environment(hardware=hardware, libs={"torch": "2.13.0"}),
                timestamp="2026-12-02T10:00:00+00:00",
                correctness=Correctness(max_absolute_error=1e-5) if with_correctness else None,
                performance=(
                    Performance(
                        latency_ms=times[n],
                        reference_latency_ms=times[n] * speedup,
                        speedup_factor=speedup,
                        timing_method=timing_method,
                    )
                    if passed
                    else None
                ),
            ),
        )
        for n, m in enumerate(AXES)
    ]
    guard = None
    if bounds_ms is not None:
        roofline = [
            RooflineBound(workload=f"w{n}", bound_ms=b, bytes=1.0, flops=0.0)
            for n, b in enumerate(bounds_ms)
        ]
        guard = GuardRecord(roofline=roofline, device="NVIDIA H200")
    return Attempt(
        index=index,
        problem=problem,
        proposal=Proposal(
            id=proposal_id_for(solution),
            agent=agent,
            strategy="tiling",
            solution=solution,
            knobs=knobs or {},
        ),
        status=status,
        traces=traces if status != "REJECTED_STATIC" else [],
        speedup=speedup if passed else None,
        latency_ms=latency_ms if passed else None,
        verdict=verdict or (Verdict.NEW_BEST if passed else Verdict.FAILED),
        started_at="2026-12-02T10:00:00+00:00",
        finished_at=finished_at,
        confirmed=confirmed and passed,
        guard=guard,
    )


def write_run_dir(
    run_dir: Path,
    attempts: Sequence[Attempt],
    *,
    definition: dict[str, Any] | None = None,
    record: bool = True,
) -> Path:
    """A run dir: attempts.jsonl (the real AttemptLog), problem/, campaign.json, config.yaml."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log = AttemptLog(run_dir / "attempts.jsonl")
    for attempt in attempts:
        log.append(attempt)
    problem = attempts[0].problem if attempts else "rmsnorm"
    folder = run_dir / "problem"
    folder.mkdir(exist_ok=True)
    (folder / "definition.json").write_text(
        json.dumps(definition or definition_json(problem), indent=2) + "\n"
    )
    (folder / "workload.jsonl").write_text(
        "".join(
            json.dumps({"uuid": f"w{n}", "axes": {"M": m}, "inputs": {}}) + "\n"
            for n, m in enumerate(AXES)
        )
    )
    (run_dir / "config.yaml").write_text(f"name: {run_dir.name}\nproblem: {problem}\n")
    if record:
        write_campaign_record(
            run_dir,
            CampaignRecord(
                name=run_dir.name,
                problem=problem,
                problem_dir=str(folder),
                source_problem_dir=str(folder),
                workloads="workload.jsonl",
                device="cuda",
                seed=0,
                started_at="2026-12-02T09:59:00+00:00",
                finished_at="2026-12-02T10:05:00+00:00",
                status="FINISHED",
            ),
        )
    return run_dir


MakeAttempt = Callable[..., Attempt]
WriteRun = Callable[..., Path]


@pytest.fixture
def make_attempt() -> MakeAttempt:
    """Factory of valid Attempts (see build_attempt)."""
    return build_attempt


@pytest.fixture
def write_run(tmp_path: Path) -> WriteRun:
    """Write a run dir `<tmp>/<name>` (default `run`) holding the attempts; return it."""

    def write(
        attempts: Sequence[Attempt],
        name: str = "run",
        *,
        definition: dict[str, Any] | None = None,
        record: bool = True,
    ) -> Path:
        return write_run_dir(tmp_path / name, attempts, definition=definition, record=record)

    return write


def with_speedup_interval(
    attempt: Attempt, bounds: Sequence[tuple[float, float, float]]
) -> Attempt:
    """The attempt as if the runner had interleaved its timing: trace n gets the interval
    (low, estimate, high) = bounds[n], and the attempt the aggregate the campaign loop records
    (`guard.score.score_traces`, `interval_fields`)."""
    from kernelarc.guard.score import interval_fields, score_traces

    traces = []
    for trace, (low, point, high) in zip(attempt.traces, bounds, strict=True):
        ev = trace.evaluation
        assert ev is not None and ev.performance is not None
        perf = ev.performance.model_copy(
            update={
                "speedup_ci_low": low,
                "interleaved_speedup": point,
                "speedup_ci_high": high,
                "speedup_ci_method": "interleaved ABBA blocks (cupti), bootstrap 95% CI of the "
                "geometric-mean ratio of block medians, 8 pairs x 10 calls",
            }
        )
        traces.append(
            trace.model_copy(update={"evaluation": ev.model_copy(update={"performance": perf})})
        )
    interval = score_traces(traces).interval
    return attempt.model_copy(update={"traces": traces, **interval_fields(interval)})
