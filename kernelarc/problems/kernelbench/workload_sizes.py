"""Choose the workload sizes of a converted problem: KernelBench's own for the GPU, scaled-down
ones for the CPU.

Place in the flow: after `shape_probe` has found the size axes, `convert.py` asks for the
workloads here. Sizes shrink by halving one size constant at a time (the largest first), never
the tensors directly, so dims that must agree (in_channels of the input and of the weight) keep
agreeing; every step is checked by building the model and running the forward on the meta device
at those sizes, and a constant whose halving breaks the problem (a group count that no longer
divides, a spatial size below the kernel) is left where it is. Constants that set a kernel,
stride, padding, dilation, group or head count are never scaled, and an axis that a group or
head count divides is halved below two members per group only when nothing else is left.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.shape_probe import Probes, Snapshot, try_snapshot
from kernelarc.problems.kernelbench.source_scan import ConversionError

#: The CPU workloads: the first sizes at or under each bound (inputs + outputs).
CPU_BYTES = (1 << 20, 256 << 10)
#: The smallest CPU workload may not be larger than this.
CPU_MAX_BYTES = 4 << 20
#: The second GPU workload: the first sizes at or under this share of KernelBench's bytes.
GPU_SECOND_SHARE = 0.25
_NEVER_SCALED = re.compile(r"kernel|stride|pad|dilation|group|head|pool|window", re.IGNORECASE)
_SMALLEST_SCALED = 4


@dataclass(frozen=True)
class Sizing:
    """One choice of the size axes and the shapes it gives."""

    sizes: dict[str, int]
    """Size axis -> value."""
    snapshot: Snapshot
    """Every tensor's shape at these sizes (meta run)."""


@dataclass(frozen=True)
class WorkloadPlan:
    """The sizes of the CPU file (workload.jsonl) and of the GPU file (workload_gpu.jsonl)."""

    cpu: list[Sizing]
    gpu: list[Sizing]


def consistent(probes: Probes, sizes: Mapping[str, int], snapshot: Snapshot) -> bool:
    """Whether the shapes at `sizes` keep the structure the probes found: every owned dim equals
    its axis, every literal dim is unchanged, no dim is empty."""
    if snapshot.structure() != probes.base.structure():
        return False
    base = probes.base.dims()
    for slot, size in snapshot.dims().items():
        owner = probes.owner.get(slot)
        if owner is not None and size != sizes[owner]:
            return False
        if owner is None and slot not in probes.moved and size != base[slot]:
            return False
        if size < 1 <= base[slot]:
            return False
    return True


def _scalable(probes: Probes) -> list[str]:
    return [
        c.axis
        for c in probes.axes
        if c.value >= _SMALLEST_SCALED and not _NEVER_SCALED.search(c.axis)
    ]


def group_floors(
    source: KernelBenchSource, sizes: Mapping[str, int], counts: Mapping[str, int]
) -> dict[str, int]:
    """Axis -> twice the largest group or head count it is tied to: a count that divides it in
    KernelBench's sizes and that the model needs to divide it (off by half the count, it does
    not build). Below that a group has one member (GroupNorm over one channel is 0 everywhere,
    and a CPU workload of zeros cannot tell a correct kernel from one that writes zeros)."""
    floors: dict[str, int] = {}
    for axis, size in sizes.items():
        for count in counts.values():
            if count < 2 or size % count or size < 2 * count or floors.get(axis, 0) >= 2 * count:
                continue
            if try_snapshot(source, {**sizes, axis: size + count // 2}) is None:
                floors[axis] = 2 * count
    return floors


def shrink_path(source: KernelBenchSource, probes: Probes, floor_bytes: int) -> list[Sizing]:
    """KernelBench's sizes, then each accepted halving, until at or under `floor_bytes`."""
    sizes = {c.axis: c.value for c in probes.axes}
    path = [Sizing(dict(sizes), probes.base)]
    movable = _scalable(probes)
    floors = group_floors(source, sizes, probes.counts)
    while path[-1].snapshot.nbytes() > floor_bytes and movable:
        # Largest first; an axis that would drop below two members per group goes last.
        order = sorted(
            movable,
            key=lambda a: (sizes[a] // 2 < floors.get(a, 0), -sizes[a], movable.index(a)),
        )
        for axis in order:
            trial = dict(sizes)
            trial[axis] = sizes[axis] // 2
            snap = try_snapshot(source, trial)
            if snap is not None and consistent(probes, trial, snap):
                sizes = trial
                path.append(Sizing(dict(sizes), snap))
                if sizes[axis] < _SMALLEST_SCALED:
                    movable.remove(axis)
                break
            movable.remove(axis)  # halving it breaks the problem: leave it
    return path


def plan_workloads(source: KernelBenchSource, probes: Probes) -> WorkloadPlan:
    """CPU and GPU sizes.

    Raises:
        ConversionError: NOT_SCALABLE when even the smallest sizes exceed CPU_MAX_BYTES.
    """
    path = shrink_path(source, probes, min(CPU_BYTES))
    smallest = path[-1]
    if smallest.snapshot.nbytes() > CPU_MAX_BYTES:
        fixed = [c.axis for c in probes.axes if c.axis not in _scalable(probes)]
        msg = (
            f"cannot shrink below {smallest.snapshot.nbytes() / 2**20:.1f} MiB of inputs and "
            f"outputs (the CPU limit is {CPU_MAX_BYTES >> 20} MiB); sizes reached "
            f"{smallest.sizes}; never scaled: {fixed or 'none'}; literal sizes stay as written"
        )
        raise ConversionError(FailureCause.NOT_SCALABLE, msg)
    cpu: list[Sizing] = []
    for bound in CPU_BYTES:
        pick = next((s for s in path if s.snapshot.nbytes() <= bound), smallest)
        if pick not in cpu:
            cpu.append(pick)
    gpu = [path[0]]
    share = path[0].snapshot.nbytes() * GPU_SECOND_SHARE
    second = next((s for s in path if s.snapshot.nbytes() <= share), None)
    if second is not None and second.snapshot.nbytes() > max(CPU_BYTES):
        gpu.append(second)
    return WorkloadPlan(cpu=cpu, gpu=gpu)
