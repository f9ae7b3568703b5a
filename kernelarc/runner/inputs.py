"""Input generation for one correctness round of one workload, as the official evaluator does it.

The seed is set once per request (`seed_everything`); every call to `generate_inputs` draws
from the continuing RNG stream, so the data of workload k depends on every round before it.
Given the same torch build and device, the tensors equal the official evaluator's bit for bit
because the generator calls are the same and come in the same order:

1. safetensors inputs are read (no RNG);
2. the definition's `custom_inputs_entrypoint`, when it has one, is called with all resolved
   axes plus the workload's scalar inputs (upstream calls it every round even for workloads
   without custom inputs, and so do we: its draws move the stream);
3. then per input, in definition order: scalar -> the workload's value; safetensors -> the file's
   tensor; custom -> the entrypoint's value; anything else (random or unlisted) -> for a scalar
   (`shape: null`) `.item()` of a 0-d draw of the dtype generator, for a tensor the first
   matching name heuristic (`input_heuristics`), else the dtype generator; with
   `op_type == "sampling"` the input `probs` is then softmaxed over its last dim.

Dtype generators: f32/f16/bf16 `randn`; fp8 `randn` (float32) clamped to [-2, 2] then cast;
fp4 `randn` (float32) of the logical shape quantised to E2M1 and packed (last dim halved);
bool `randint(0, 2)`; int8 `randint(-128, 128)`; int16/32/64 `randint(-1024, 1024)`; float64
raises (an input-generation failure, RUNTIME_ERROR), unless a name heuristic applies.
"""

import os
import random
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from kernelarc.runner.dtypes import FP8_DTYPES, is_fp4, is_fp4_torch, quantize_fp4x2, torch_dtype
from kernelarc.runner.input_heuristics import heuristic_tensor
from kernelarc.runner.safetensors_reader import load_tensor
from kernelarc.schema import (
    AxisConst,
    AxisExpr,
    CustomInput,
    Definition,
    SafetensorsInput,
    ScalarInput,
    TensorSpec,
    Workload,
)

Value = torch.Tensor | int | float | bool
CustomFn = Callable[[dict[str, Any], torch.device], dict[str, Any]]

TRACE_DIR_ENV = "FLASHINFER_TRACE_DIR"
_INT_RANGES = {
    torch.int8: (-128, 128),
    torch.int16: (-1024, 1024),
    torch.int32: (-1024, 1024),
    torch.int64: (-1024, 1024),
}


def seed_everything(seed: int) -> None:
    """Seed Python's and torch's RNGs (every CUDA device included) once for the whole request."""
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The plain dtype generator (no name heuristics); ValueError for float64 and other types."""
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype in FP8_DTYPES:
        return torch.randn(shape, dtype=torch.float32, device=device).clamp_(-2.0, 2.0).to(dtype)
    if is_fp4_torch(dtype):
        return quantize_fp4x2(torch.randn(shape, dtype=torch.float32, device=device))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.bool, device=device)
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        return torch.randint(low, high, shape, dtype=dtype, device=device)
    msg = f"no random generator for dtype {dtype} (name the input so a heuristic applies)"
    raise ValueError(msg)


def _random_scalar(spec: TensorSpec, device: torch.device) -> int | float | bool:
    value = random_tensor((), torch_dtype(spec.dtype), device).item()
    if isinstance(value, complex):
        msg = f"no random scalar generator for dtype {spec.dtype}"
        raise TypeError(msg)
    return value


def _random_input(
    definition: Definition,
    name: str,
    spec: TensorSpec,
    shape: tuple[int, ...],
    device: torch.device,
) -> torch.Tensor:
    dtype = torch_dtype(spec.dtype)
    made = heuristic_tensor(name, shape, dtype, device, spec.description)
    if made is None:
        made = random_tensor(shape, dtype, device)
    if definition.op_type == "sampling" and name == "probs":
        made = torch.softmax(made, dim=-1)
    return made


# -- axes as the official evaluator resolves them ---------------------------------------------


def custom_context(definition: Definition, workload: Workload) -> dict[str, Any]:
    """What `custom_inputs_entrypoint` receives: const axes, the workload's axes, expr axes,
    then the workload's scalar inputs (in that order, as upstream builds the dict)."""
    context: dict[str, Any] = {
        name: axis.value for name, axis in definition.axes.items() if isinstance(axis, AxisConst)
    }
    context.update(workload.axes)
    resolved = definition.resolve_axes(dict(workload.axes))
    for name, axis in definition.axes.items():
        if isinstance(axis, AxisExpr):
            context[name] = resolved[name]
    for name, spec in workload.inputs.items():
        if isinstance(spec, ScalarInput):
            context[name] = spec.value
    return context


# -- safetensors ------------------------------------------------------------------------------


def blob_roots(problem_dir: str | None) -> list[Path]:
    """Where safetensors paths are looked up: the problem dir, then `$FLASHINFER_TRACE_DIR`."""
    roots = [Path(problem_dir)] if problem_dir else []
    trace_dir = os.environ.get(TRACE_DIR_ENV)
    if trace_dir:
        roots.append(Path(trace_dir))
    return roots


def resolve_blob_path(path: str, roots: list[Path]) -> Path | None:
    """The first existing `root / tail` where `tail` drops 0, 1, ... leading components of path.

    Roots are tried in order. Unlike upstream, a candidate must stay inside its root (no `..`
    escapes) and an absolute path is accepted only when it lies inside a root.
    """
    rel = Path(path)
    for root in roots:
        base = root.resolve()
        if rel.is_absolute():
            candidates = [rel.resolve()]
        else:
            parts = rel.parts
            candidates = [(base / Path(*parts[i:])).resolve() for i in range(len(parts))]
        for candidate in candidates:
            if candidate.is_relative_to(base) and candidate.is_file():
                return candidate
    return None


@lru_cache(maxsize=16)
def _cached_blob(path: str, key: str, mtime_ns: int, size: int) -> torch.Tensor:
    del mtime_ns, size  # part of the cache key only: a rewritten file is read again
    return load_tensor(Path(path), key)


def load_safetensors_input(
    name: str,
    spec: SafetensorsInput,
    tspec: TensorSpec,
    shape: tuple[int, ...] | None,
    problem_dir: str | None,
    device: torch.device,
) -> torch.Tensor:
    """A fresh copy (on `device`) of a safetensors input, checked against the definition."""
    roots = blob_roots(problem_dir)
    found = resolve_blob_path(spec.path, roots)
    if found is None:
        where = (
            ", ".join(str(r) for r in roots)
            or "nowhere (no problem_dir, no $" + TRACE_DIR_ENV + ")"
        )
        msg = (
            f"input {name!r}: safetensors file {spec.path!r} not found under {where} "
            "(paths may not leave these dirs)"
        )
        raise ValueError(msg)
    stat = found.stat()
    tensor = _cached_blob(str(found), spec.tensor_key, stat.st_mtime_ns, stat.st_size)
    if shape is not None and tuple(tensor.shape) != shape:
        msg = f"input {name!r}: safetensors shape {tuple(tensor.shape)} != definition {shape}"
        raise ValueError(msg)
    want_dtype = torch_dtype(tspec.dtype)
    if tensor.dtype != want_dtype:
        msg = f"input {name!r}: safetensors dtype {tensor.dtype} != definition {want_dtype}"
        raise ValueError(msg)
    if device.type == "cpu":
        return tensor.clone()
    return tensor.to(device)


# -- one round ---------------------------------------------------------------------------------


def _call_custom(
    custom: CustomFn, definition: Definition, workload: Workload, device: torch.device
) -> Any:
    return custom(custom_context(definition, workload), device)


def _custom_value(made: Any, name: str, device: torch.device) -> Value:
    if not isinstance(made, Mapping):
        msg = f"custom_inputs_entrypoint returned {type(made).__name__}, expected a dict"
        raise TypeError(msg)
    if name not in made:
        msg = f"custom_inputs_entrypoint did not produce input {name!r} (got {sorted(made)})"
        raise ValueError(msg)
    value = made[name]
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value  # type: ignore[no-any-return]


def generate_inputs(
    definition: Definition,
    workload: Workload,
    device: str,
    problem_dir: str | None = None,
    custom: CustomFn | None = None,
) -> list[Value]:
    """Inputs of one round, in the definition's input order, drawn from the global RNG stream.

    `custom` is the definition's `custom_inputs_entrypoint` (None when it has none); pass it for
    every workload of such a definition, as upstream does. Raises on any generation failure
    (the caller reports RUNTIME_ERROR "input generation failed").
    """
    dev = torch.device(device)
    axes = definition.resolve_axes(dict(workload.axes))
    shapes = {name: definition.shape_of(spec, axes) for name, spec in definition.inputs.items()}
    loaded: dict[str, torch.Tensor] = {}
    for name, blob in workload.inputs.items():
        if isinstance(blob, SafetensorsInput) and name in definition.inputs:
            tspec = definition.inputs[name]
            loaded[name] = load_safetensors_input(name, blob, tspec, shapes[name], problem_dir, dev)
    made = _call_custom(custom, definition, workload, dev) if custom is not None else None
    values: list[Value] = []
    for name, tspec in definition.inputs.items():
        spec = workload.inputs.get(name)
        shape = shapes[name]
        if isinstance(spec, SafetensorsInput):
            values.append(loaded[name])
        elif isinstance(spec, ScalarInput):
            values.append(spec.value)
        elif isinstance(spec, CustomInput):
            if made is None:
                msg = (
                    "workload has custom inputs but the definition has no custom_inputs_entrypoint"
                )
                raise ValueError(msg)
            values.append(_custom_value(made, name, dev))
        elif shape is None:
            values.append(_random_scalar(tspec, dev))
        else:
            values.append(_random_input(definition, name, tspec, shape, dev))
    return values


def allocate_outputs(definition: Definition, workload: Workload, device: str) -> list[torch.Tensor]:
    """Zeroed destination buffers for a DPS call, in output order (scalars become 0-d tensors).

    fp4 outputs are packed, so their last dim is half the definition's (upstream allocates the
    logical shape, which a packed fp4 kernel cannot fill consistently).
    """
    axes = definition.resolve_axes(dict(workload.axes))
    outputs: list[torch.Tensor] = []
    for tspec in definition.outputs.values():
        shape = definition.shape_of(tspec, axes) or ()
        if is_fp4(tspec.dtype) and shape:
            shape = (*shape[:-1], shape[-1] // 2)
        outputs.append(torch.zeros(shape, dtype=torch_dtype(tspec.dtype), device=device))
    return outputs
