"""Shapes of a KernelBench problem at chosen sizes (meta device only), and which dims each size
constant controls.

Place in the flow: `convert.py` takes a `Snapshot` at the file's own sizes, then one per
candidate constant with that constant perturbed (doubled, else plus one). A dim is controlled by
a constant when it equals the constant's value in the file and the perturbed value in the probe,
and no other probe moves it; that resolves equal values (`height = width = 128`: the probe of
`height` moves only the height dims). A constant that controls an input dim becomes an axis.
Dims that move but are controlled by nothing (a convolution's output size) are derived; dims
no probe moves are literals. Nothing here allocates memory for a tensor: every tensor is meta.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.source_scan import ConversionError, SizeConstant

#: torch dtype -> SOL-ExecBench dtype name (the format has no uint8, uint16+, complex).
DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.bool: "bool",
}
#: Python scalar forward inputs and the dtype their (shape null) input gets.
SCALAR_DTYPES: dict[type, str] = {bool: "bool", int: "int64", float: "float32"}
_ITEM_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2}
_ITEM_BYTES.update({"int16": 2, "int8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1})

#: (group, tensor index, dim): one dimension of one tensor. Groups: forward, state, output.
Slot = tuple[str, int, int]


@dataclass(frozen=True)
class TensorInfo:
    """One forward input, parameter/buffer or output: its shape (None: a Python scalar)."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str
    kind: str = "forward input"
    """forward input, parameter, buffer or output."""


@dataclass(frozen=True)
class Snapshot:
    """Every tensor's shape and dtype at one choice of sizes."""

    forward: tuple[TensorInfo, ...]
    state: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    def groups(self) -> dict[str, tuple[TensorInfo, ...]]:
        """The three groups by name."""
        return {"forward": self.forward, "state": self.state, "output": self.outputs}

    def dims(self) -> dict[Slot, int]:
        """The size of every dim of every tensor."""
        return {
            (group, i, d): size
            for group, infos in self.groups().items()
            for i, info in enumerate(infos)
            for d, size in enumerate(info.shape or ())
        }

    def structure(self) -> tuple[object, ...]:
        """Everything but the sizes: a probe that changes this changed the model's structure."""
        return tuple(
            (group, info.name, info.dtype, None if info.shape is None else len(info.shape))
            for group, infos in self.groups().items()
            for info in infos
        )

    def nbytes(self) -> int:
        """Bytes of all inputs (forward, parameters, buffers) and outputs."""
        return sum(
            math.prod(info.shape) * _ITEM_BYTES[info.dtype]
            for infos in self.groups().values()
            for info in infos
            if info.shape is not None
        )


@dataclass(frozen=True)
class SizeAxis:
    """A size axis: the constant(s) it sets and their value in the file."""

    axis: str
    value: int
    targets: tuple[tuple[str, int | None], ...]
    """(constant, tuple index or None) it sets; several for a tied axis."""


@dataclass
class Probes:
    """What perturbing each candidate constant showed."""

    base: Snapshot
    axes: list[SizeAxis] = field(default_factory=list)
    """Constants that control at least one input dim: the size axes."""
    owner: dict[Slot, str] = field(default_factory=dict)
    """Dim -> the axis that alone controls it."""
    moved: set[Slot] = field(default_factory=set)
    """Dims some probe changed (owned or derived); the rest are literals."""
    signature: dict[Slot, tuple[int, ...]] = field(default_factory=dict)
    """Dim -> its size in the base and in each usable probe."""
    counts: dict[str, int] = field(default_factory=dict)
    """Group and head counts that are not size axes (`num_groups = 512`): an axis they divide
    should keep several members per group when it shrinks."""


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 400 else first[:397] + "..."


def _tensor_info(name: str, value: Any, what: str) -> TensorInfo:
    if isinstance(value, torch.Tensor):
        dtype = DTYPE_NAMES.get(value.dtype)
        if dtype is None:
            msg = f"{what} {name!r} has dtype {value.dtype}, which SOL-ExecBench lacks"
            raise ConversionError(FailureCause.UNSUPPORTED_DTYPE, msg)
        return TensorInfo(name, tuple(int(s) for s in value.shape), dtype, what)
    scalar = SCALAR_DTYPES.get(type(value))
    if scalar is None or what != "forward input":
        cause = FailureCause.UNSUPPORTED_INPUT
        if what == "output":
            cause = FailureCause.UNSUPPORTED_OUTPUT
        msg = f"{what} {name!r} is a {type(value).__name__}, not a tensor or Python scalar"
        raise ConversionError(cause, msg)
    return TensorInfo(name, None, scalar, what)


def _outputs(out: Any) -> tuple[TensorInfo, ...]:
    values = list(out) if isinstance(out, tuple | list) else [out]
    if not values:
        raise ConversionError(FailureCause.UNSUPPORTED_OUTPUT, "the forward returns nothing")
    return tuple(_tensor_info(str(i), v, "output") for i, v in enumerate(values))


def take_snapshot(source: KernelBenchSource, sizes: Mapping[str, int]) -> Snapshot:
    """Build the model and its inputs at `sizes` on the meta device and run the forward there.

    Raises:
        ConversionError: a stage raised (its cause names the stage) or a value is unsupported.
    """
    stage = FailureCause.MODULE_FAILED
    try:
        ns = source.namespace(sizes)
        stage = FailureCause.INIT_FAILED
        model = source.build_model(ns, "meta")
        stage = FailureCause.INPUTS_FAILED
        inputs = source.forward_inputs(ns, "meta")
        stage = FailureCause.FORWARD_FAILED
        with torch.no_grad():
            out = model(*inputs)
    except ConversionError:
        raise
    except Exception as exc:
        where = {
            FailureCause.MODULE_FAILED: "the file's top-level code raised",
            FailureCause.INIT_FAILED: "Model(*get_init_inputs()) raised on the meta device",
            FailureCause.INPUTS_FAILED: "get_inputs() raised on the meta device",
            FailureCause.FORWARD_FAILED: "the forward raised on meta tensors",
        }[stage]
        raise ConversionError(stage, f"{where}: {_describe(exc)}") from exc
    forward = tuple(_tensor_info(str(i), v, "forward input") for i, v in enumerate(inputs))
    state = [_tensor_info(n, t, "parameter") for n, t in model.named_parameters()]
    state += [_tensor_info(n, t, "buffer") for n, t in model.named_buffers()]
    return Snapshot(forward=forward, state=tuple(state), outputs=_outputs(out))


def try_snapshot(source: KernelBenchSource, sizes: Mapping[str, int]) -> Snapshot | None:
    """A snapshot, or None when these sizes do not build or run."""
    try:
        return take_snapshot(source, sizes)
    except ConversionError:
        return None


_Move = tuple[SizeAxis, dict[Slot, int], int]


def probe_constants(
    source: KernelBenchSource, base: Snapshot, candidates: list[SizeConstant]
) -> Probes:
    """Perturb each candidate (value >= 2) alone and see which dims follow it. Candidates that
    break the problem whenever they move alone but share a value are then moved together: if
    that works they are one tied axis (`batch_size = 32768`, `input_shape = (32768,)` where the
    forward broadcasts one against the other)."""
    probes = Probes(base=base)
    base_dims = base.dims()
    moves: list[_Move] = []
    broken: list[SizeConstant] = []
    for constant in candidates:
        if constant.value < 2:
            continue
        axis = SizeAxis(constant.axis, constant.value, ((constant.constant, constant.index),))
        kind, dims, value = _probe(source, base, [constant.axis], constant.value)
        if kind == "broken":
            broken.append(constant)
        elif kind == "moved":
            moves.append((axis, dims, value))
    moves += _tied_moves(source, base, broken)
    seen = [dims for _, dims, _ in moves]
    for slot, size in base_dims.items():
        probes.signature[slot] = (size, *(dims[slot] for dims in seen))
        if any(dims[slot] != size for dims in seen):
            probes.moved.add(slot)
    for axis, dims, value in moves:
        # Owned: equals the axis in the file and in the probe, and no other probe moved it.
        owned = {
            s
            for s, v in dims.items()
            if base_dims[s] == axis.value and v == value and _moved_by(s, seen, base_dims) == 1
        }
        if any(group != "output" for group, _, _ in owned):
            probes.axes.append(axis)
            for slot in owned:
                probes.owner.setdefault(slot, axis.axis)
    axes = {a.axis for a in probes.axes}
    probes.counts = {
        c.axis: c.value for c in candidates if c.axis not in axes and _COUNT.search(c.axis)
    }
    return probes


_COUNT = re.compile(r"group|head", re.IGNORECASE)


def _tied_moves(
    source: KernelBenchSource, base: Snapshot, broken: list[SizeConstant]
) -> list[_Move]:
    """Constants of equal value that only work when moved together."""
    moves: list[_Move] = []
    for value in sorted({c.value for c in broken}):
        group = [c for c in broken if c.value == value]
        if len(group) < 2:
            continue
        kind, dims, new = _probe(source, base, [c.axis for c in group], value)
        if kind == "moved":
            targets = tuple((c.constant, c.index) for c in group)
            moves.append((SizeAxis(group[0].axis, value, targets), dims, new))
    return moves


def _probe(
    source: KernelBenchSource, base: Snapshot, axes: list[str], value: int
) -> tuple[str, dict[Slot, int], int]:
    """`("moved", dims, new value)` with `axes` set to a new value (doubled, else plus one);
    `("structural", ...)` when that changes the model's structure (parameters, ranks) rather than
    sizes; `("broken", ...)` when neither value builds and runs."""
    for new in (value * 2, value + 1):
        snap = try_snapshot(source, dict.fromkeys(axes, new))
        if snap is None:
            continue
        if snap.structure() != base.structure():
            return "structural", {}, new
        return "moved", snap.dims(), new
    return "broken", {}, value


def _moved_by(slot: Slot, seen: list[dict[Slot, int]], base_dims: dict[Slot, int]) -> int:
    return sum(1 for dims in seen if dims[slot] != base_dims[slot])
