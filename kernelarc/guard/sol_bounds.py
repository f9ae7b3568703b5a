"""The T_SOL bounds an attempt is scored against: the guard's recorded roofline, else one computed
from the problem files with the device's default ceilings.

Place in the flow: the one source of SOL-score bounds for the live metric
(`report/sol_score.py`, MLflow `eval/sol_score`), the report and the exporter
(`leaderboard/export.py`), so an attempt has one SOL score everywhere. It sits below all three:
`leaderboard` imports it, never the reverse (issue #19).
"""

from collections.abc import Mapping

from kernelarc.config import RooflineConfig
from kernelarc.guard.roofline import Ceiling, roofline_bounds
from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt


def sol_bounds(attempt: Attempt, problem: Problem | None) -> tuple[Mapping[str, float] | None, str]:
    """T_SOL per workload uuid for an attempt, and its label; (None, '') when unavailable.

    The guard's recorded roofline bounds come first (computed for the device that measured the
    attempt). Otherwise, when the problem files are here, the bound is computed with the default
    ceilings of that device; else there is none.
    """
    guard = attempt.guard
    recorded = guard.roofline if guard is not None else []
    if guard is not None and recorded:
        device = guard.device or "unknown device"
        return {b.workload: b.bound_ms for b in recorded}, f"guard roofline ({device})"
    if problem is None:
        return None, ""

    cpu = any(
        t.evaluation.performance.timing_method == "cpu_monotonic"
        for t in attempt.traces
        if t.evaluation is not None and t.evaluation.performance is not None
    )
    hardware = next((t.evaluation.environment.hardware for t in attempt.traces if t.evaluation), "")
    key, ceiling = RooflineConfig().ceiling_for("cpu" if cpu else "cuda", hardware)
    workloads = {w.uuid: w for w in problem.workloads}
    wanted = [workloads[t.workload.uuid] for t in attempt.traces if t.workload.uuid in workloads]
    try:
        bounds = roofline_bounds(
            problem.definition,
            wanted,
            Ceiling(ceiling.copy_bytes_per_s, ceiling.matmul_flops_per_s),
        )
    except (ValueError, KeyError):
        return None, ""
    return {b.workload: b.bound_ms for b in bounds}, f"roofline ({key}, default ceilings)"
