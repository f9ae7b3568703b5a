"""Hand-built campaign records for the benchmark tests: attempts over workloads w0, w1 with
chosen latencies, guard re-timing rounds, and a campaign record with memory-bound roofline
bounds."""

from collections.abc import Sequence

from kernelarc.benchmark.report import geomean
from kernelarc.guard.ceilings import ResolvedCeiling
from kernelarc.rundir.run_record import CampaignRecord, CampaignRoofline
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
from kernelarc.schema.guard_record import GuardRecord, RetimingSample, RooflineBound

UUIDS = ("w0", "w1")
REFERENCE_MS = (2.0, 4.0)


def make_attempt(
    index: int,
    latencies: Sequence[float] | None,
    verdict: Verdict,
    *,
    agent: str = "triton_template",
    knobs: dict[str, str | int | float | bool] | None = None,
    retimed: Sequence[Sequence[float]] = (),
) -> Attempt:
    """An attempt over workloads w0, w1; latencies None: it failed correctness. `retimed`: the
    guard's further timings of it (challenger re-timing rounds, one list per round)."""
    solution = Solution(
        name=f"p-{agent}-{index}",
        definition="p",
        author=agent,
        spec=BuildSpec(languages=["pytorch"], target_hardware=["LOCAL"], entry_point="k.py::run"),
        sources=[SourceFile(path="k.py", content=f"def run(x):\n    return x  # {index}\n")],
    )
    status = EvalStatus.PASSED if latencies is not None else EvalStatus.INCORRECT_NUMERICAL
    traces = [
        Trace(
            definition="p",
            solution=solution.name,
            workload=Workload(uuid=uuid, axes={"T": 8}),
            evaluation=Evaluation(
                status=status,
                environment=Environment(hardware="NVIDIA H200"),
                timestamp="2026-12-02T10:00:00+00:00",
                correctness=Correctness(max_absolute_error=1e-3),
                performance=(
                    Performance(
                        latency_ms=latencies[n],
                        reference_latency_ms=REFERENCE_MS[n],
                        speedup_factor=REFERENCE_MS[n] / latencies[n],
                    )
                    if latencies is not None
                    else None
                ),
            ),
        )
        for n, uuid in enumerate(UUIDS)
    ]
    return Attempt(
        index=index,
        problem="p",
        proposal=Proposal(
            id=proposal_id_for(solution),
            agent=agent,
            strategy=agent,
            solution=solution,
            knobs=knobs or {},
        ),
        status=status,
        traces=traces,
        latency_ms=geomean(latencies) if latencies is not None else None,
        verdict=verdict,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:00:01+00:00",
        confirmed=verdict == Verdict.NEW_BEST,
        guard=GuardRecord(
            samples=[
                RetimingSample(
                    round=n,
                    role="challenger",
                    proposal_id=proposal_id_for(solution),
                    status="PASSED",
                    latencies_ms=list(r),
                )
                for n, r in enumerate(retimed)
            ]
        )
        if retimed
        else None,
    )


def make_record(
    best: Attempt | None, bounds: list[RooflineBound], device: str = "cuda"
) -> CampaignRecord:
    ceiling = ResolvedCeiling(
        key="NVIDIA H200", copy_bytes_per_s=4e12, matmul_flops_per_s=8e14, source="cache"
    )
    return CampaignRecord(
        name="bench-p",
        problem="p",
        problem_dir="p",
        source_problem_dir="p",
        workloads="workload_gpu.jsonl",
        device=device,
        seed=0,
        started_at="2026-12-02T10:00:00+00:00",
        status="FINISHED",
        best_proposal_id=best.proposal.id if best else None,
        roofline=CampaignRoofline(ceiling=ceiling, bounds=bounds),
    )


def memory_bounds(t_sol: Sequence[float]) -> list[RooflineBound]:
    """Bounds set by bytes (4e12 B/s): bound_ms = bytes / 4e9."""
    return [
        RooflineBound(workload=u, bound_ms=t, bytes=t * 4e9, flops=0.0)
        for u, t in zip(UUIDS, t_sol, strict=True)
    ]
