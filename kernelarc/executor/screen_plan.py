"""The correctness screen's requests: cheapest workload first, stop at the first failure, and the
timed evaluation that follows a passing screen.

Place in the flow: `PooledExecutor.evaluate_candidate` screens a new candidate in the
correctness pool with `screening_request` (timing cut to one iteration, no reference timing,
workloads smallest first, the rest left unevaluated after the first failure), and times a
candidate that passed with `timed_after_screen` (only the last correctness round compared: the
screen compared every round on the same inputs), whose traces then carry the worst errors of
both (`merge_screen_correctness`).

Why the inputs are the same: the runner evaluates a screen's workloads out of order on the
request-order RNG stream (`kernelarc/runner/stream_order.py`), and a timed run with
`checked_rounds="last"` still draws every round, so each workload sees the official inputs in
both, and the inputs timing uses are the official last round's.
"""

import math

from kernelarc.guard.roofline import matmul_flops, tensor_bytes
from kernelarc.schema import (
    Correctness,
    Definition,
    EvalRequest,
    EvalResult,
    EvalStatus,
    TimingConfig,
    Workload,
)

SCREEN_NOTE = (
    "correctness screen failed: these traces are the screen's (timing cut to one iteration, "
    "smallest workload first, workloads after the first failure not evaluated); the candidate "
    "was not timed"
)
TIMED_AFTER_SCREEN_NOTE = (
    "correctness: every round compared by the screen; this timed run compared the last round "
    "and the timing probe on the same inputs"
)
#: A size for ordering only: FLOPs weigh like bytes at this many FLOPs per byte.
_FLOPS_PER_BYTE = 100.0


def workload_size(definition: Definition, workload: Workload) -> float:
    """A cost estimate of one call: bytes of every input and output, plus matmul FLOPs scaled to
    bytes; infinite when the workload's axes do not resolve (it goes last)."""
    try:
        axes = definition.resolve_axes(workload.axes)
        specs = [*definition.inputs.values(), *definition.outputs.values()]
        total = sum(tensor_bytes(definition, spec, axes) for spec in specs)
        return total + matmul_flops(definition, axes) / _FLOPS_PER_BYTE
    except (ValueError, KeyError):
        return math.inf


def size_order(definition: Definition, workloads: list[Workload]) -> list[int]:
    """Workload indices, smallest first (ties keep request order)."""
    sizes = [workload_size(definition, w) for w in workloads]
    return sorted(range(len(workloads)), key=lambda i: (sizes[i], i))


def screening_request(request: EvalRequest) -> EvalRequest:
    """The correctness screen of `request`: the same inputs, rounds and workloads, smallest
    workload first, stopping at the first failure; timing cut to one iteration (no warm-up, no
    L2 flush, no reference timing)."""
    return request.model_copy(
        update={
            "timing": TimingConfig(warmup=0, iterations=1, flush_l2=False, time_reference=False),
            "workload_order": size_order(request.definition, request.workloads),
            "stop_at_first_failure": True,
        }
    )


def timed_after_screen(request: EvalRequest) -> EvalRequest:
    """The timed evaluation of a candidate whose screen passed: the same request, but only the
    last correctness round (and the timing probe) compared again."""
    return request.model_copy(update={"checked_rounds": "last"})


def merge_screen_correctness(timed: EvalResult, screen: EvalResult) -> EvalResult:
    """The timed result with, per workload that passed in both, the worst errors of both runs,
    and a note saying the screen compared the rounds."""
    traces = []
    for mine, theirs in zip(timed.traces, screen.traces, strict=True):
        ours, other = mine.evaluation, theirs.evaluation
        if ours is None or other is None or ours.correctness is None or other.correctness is None:
            traces.append(mine)
            continue
        if ours.status != EvalStatus.PASSED or other.status != EvalStatus.PASSED:
            traces.append(mine)
            continue
        worst = _worst(ours.correctness, other.correctness)
        evaluation = ours.model_copy(update={"correctness": worst})
        traces.append(mine.model_copy(update={"evaluation": evaluation}))
    notes = [*timed.sandbox_notes, TIMED_AFTER_SCREEN_NOTE]
    return timed.model_copy(update={"traces": traces, "sandbox_notes": notes})


def _worst(a: Correctness, b: Correctness) -> Correctness:
    return Correctness(
        max_relative_error=max(a.max_relative_error, b.max_relative_error),
        max_absolute_error=max(a.max_absolute_error, b.max_absolute_error),
        has_nan=a.has_nan or b.has_nan,
        has_inf=a.has_inf or b.has_inf,
        extra=a.extra or b.extra,
    )
