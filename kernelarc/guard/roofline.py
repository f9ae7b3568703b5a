"""Speed-of-light lower bound of a workload's latency: a time no correct kernel can beat.

Place in the flow: the campaign computes `roofline_bounds` once per problem and device; the
guard records them on each judged attempt, and `verdict.py` rejects any latency below
bound * (1 - slack) as a measurement error or a hack. Pure: definition + workloads + ceilings.

The bound is max(bytes / copy bandwidth, flops / matmul rate), where bytes are the unique input
and output bytes (each named tensor once; packed fp4 counts 0.5 byte per element, so the bound
stays a lower bound) and flops are 2*M*N*K for a matmul-like problem (op_type gemm, or a
reference using `@`, `matmul`, `mm`, `linear`, `einsum`), else 0.
"""

import math
from dataclasses import dataclass

from kernelarc.reference_ops import MATMUL_NAMES, uses_operations
from kernelarc.schema import Definition, DType, TensorSpec, Workload
from kernelarc.schema.definition import DTYPE_BYTES
from kernelarc.schema.guard_record import RooflineBound

#: Matmul rate multiplier over the 16-bit rate when the narrowest float input is this narrow.
_RATE_MULTIPLIER: dict[DType, float] = {
    DType.FLOAT8_E4M3FN: 2.0,
    DType.FLOAT8_E5M2: 2.0,
    DType.FLOAT4_E2M1: 4.0,
    DType.FLOAT4_E2M1FN_X2: 4.0,
}


@dataclass(frozen=True)
class Ceiling:
    """Peak rates the bound divides by."""

    copy_bytes_per_s: float
    """Sustained copy bandwidth."""
    matmul_flops_per_s: float
    """Dense 16-bit matmul rate."""


def tensor_bytes(definition: Definition, spec: TensorSpec, axes: dict[str, int]) -> float:
    """Bytes of one tensor under resolved axes (0 for a Python scalar)."""
    shape = definition.shape_of(spec, axes)
    if shape is None:
        return 0.0
    return float(math.prod(shape)) * DTYPE_BYTES[spec.dtype]


def is_matmul_like(definition: Definition) -> bool:
    """op_type gemm, or a reference that multiplies matrices."""
    if (definition.op_type or "").lower() in ("gemm", "matmul", "linear"):
        return True
    return uses_operations(definition.reference, MATMUL_NAMES)


def matmul_flops(definition: Definition, axes: dict[str, int]) -> float:
    """2 * (elements of the largest output) * K, where K is the largest axis shared by two
    inputs of rank >= 2 and absent from that output (the contracted dimension); 0 if none."""
    if not is_matmul_like(definition):
        return 0.0
    outputs = [s for s in definition.outputs.values() if s.shape]
    if not outputs:
        return 0.0
    out = max(outputs, key=lambda s: math.prod(definition.shape_of(s, axes) or ()))
    out_axes = {str(d) for d in out.shape or []}
    counts: dict[str, int] = {}
    for spec in definition.inputs.values():
        if spec.shape is not None and len(spec.shape) >= 2:
            for dim in {str(d) for d in spec.shape}:
                counts[dim] = counts.get(dim, 0) + 1
    shared = [d for d, n in counts.items() if n >= 2 and d not in out_axes and d in axes]
    if not shared:
        return 0.0
    k = max(axes[d] for d in shared)
    return 2.0 * float(math.prod(definition.shape_of(out, axes) or ())) * k


def _rate_multiplier(definition: Definition) -> float:
    return max((_RATE_MULTIPLIER.get(s.dtype, 1.0) for s in definition.inputs.values()), default=1)


def roofline_bound(definition: Definition, workload: Workload, ceiling: Ceiling) -> RooflineBound:
    """The speed-of-light bound of one workload.

    Raises:
        ValueError: the workload does not bind the definition's var axes.
    """
    axes = definition.resolve_axes(workload.axes)
    specs = [*definition.inputs.values(), *definition.outputs.values()]
    total_bytes = sum(tensor_bytes(definition, s, axes) for s in specs)
    flops = matmul_flops(definition, axes)
    seconds = total_bytes / ceiling.copy_bytes_per_s
    if flops:
        seconds = max(seconds, flops / (ceiling.matmul_flops_per_s * _rate_multiplier(definition)))
    return RooflineBound(
        workload=workload.uuid, bound_ms=seconds * 1e3, bytes=total_bytes, flops=flops
    )


def roofline_bounds(
    definition: Definition, workloads: list[Workload], ceiling: Ceiling
) -> list[RooflineBound]:
    """One bound per workload, in order."""
    return [roofline_bound(definition, w, ceiling) for w in workloads]


def below_speed_of_light(latency_ms: float, bound: RooflineBound, slack: float) -> bool:
    """True when a measured latency beats the bound by more than the slack."""
    return latency_ms < bound.bound_ms * (1.0 - slack)
