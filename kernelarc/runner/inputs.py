"""Deterministic input generation for one correctness round of one workload.

The seed is set once per request (`seed_everything`); every call to `generate_inputs` draws
from the continuing RNG stream, as the official evaluator does, so the data of workload k depends
on every round before it. Name heuristics follow the simple official rules; full fidelity with
the official generator (masks, SSM ranges, softmax inputs) is a later issue.
"""

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelarc.runner.dtypes import FP8_DTYPES, is_fp4, torch_dtype
from kernelarc.runner.safetensors_reader import load_tensor
from kernelarc.schema import (
    CustomInput,
    Definition,
    SafetensorsInput,
    ScalarInput,
    TensorSpec,
    Workload,
)

Value = torch.Tensor | int | float | bool
CustomFn = Callable[[dict[str, Any], torch.device], dict[str, Any]]


def seed_everything(seed: int) -> None:
    """Seed Python's and torch's RNGs (CUDA included) once for the whole request."""
    random.seed(seed)
    torch.manual_seed(seed)


def _random_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype in FP8_DTYPES:
        return torch.randn(shape, device=device).clamp_(-2.0, 2.0).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).to(torch.bool)
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=dtype, device=device)
    if not dtype.is_floating_point:
        return torch.randint(-1024, 1024, shape, dtype=dtype, device=device)
    return torch.randn(shape, dtype=dtype, device=device)


def _heuristic_tensor(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, device: str
) -> torch.Tensor | None:
    """Values that keep typical model inputs well-conditioned (the simple official rules)."""
    lower = name.lower()
    if "norm" in lower and lower.endswith("weight"):
        return torch.ones(shape, dtype=dtype, device=device)
    if "norm" in lower and lower.endswith("bias"):
        return torch.zeros(shape, dtype=dtype, device=device)
    if lower.startswith(("cos", "sin")):
        angles = torch.rand(shape, device=device) * (2 * math.pi)
        trig = torch.cos if lower.startswith("cos") else torch.sin
        return trig(angles).to(dtype)
    is_weight = lower == "weight" or lower.endswith(("_weight", "_weights", "_proj"))
    if is_weight and len(shape) >= 2:
        fan_in = max(shape[-1], 1)
        return (torch.randn(shape, device=device) / math.sqrt(fan_in)).to(dtype)
    return None


def _fp4_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    # Packed two codes per byte along the last dim, which is therefore half the declared size.
    packed = (*shape[:-1], max(shape[-1] // 2, 0)) if shape else shape
    return torch.randint(0, 256, packed, dtype=torch.uint8, device=device).view(dtype)


def _tensor_for(name: str, spec: TensorSpec, shape: tuple[int, ...], device: str) -> torch.Tensor:
    dtype = torch_dtype(spec.dtype)
    if is_fp4(spec.dtype):
        return _fp4_tensor(shape, dtype, device)
    if dtype.is_floating_point and dtype not in FP8_DTYPES:
        made = _heuristic_tensor(name, shape, dtype, device)
        if made is not None:
            return made
    return _random_tensor(shape, dtype, device)


def _random_scalar(spec: TensorSpec, device: str) -> int | float | bool:
    value = _random_tensor((), torch_dtype(spec.dtype), device).item()
    if isinstance(value, complex):
        msg = f"no random scalar generator for dtype {spec.dtype}"
        raise TypeError(msg)
    return value


def _load_safetensors(
    name: str,
    spec: SafetensorsInput,
    shape: tuple[int, ...] | None,
    tspec: TensorSpec,
    problem_dir: str | None,
    device: str,
) -> torch.Tensor:
    if problem_dir is None:
        msg = f"input {name!r} is a safetensors input but the request has no problem_dir"
        raise ValueError(msg)
    base = Path(problem_dir).resolve()
    path = (base / spec.path).resolve()
    if not path.is_relative_to(base):
        msg = f"input {name!r}: safetensors path {spec.path!r} leaves the problem dir"
        raise ValueError(msg)
    tensor = load_tensor(path, spec.tensor_key)
    want_dtype = torch_dtype(tspec.dtype)
    if shape is not None and tuple(tensor.shape) != shape:
        msg = f"input {name!r}: safetensors shape {tuple(tensor.shape)} != definition {shape}"
        raise ValueError(msg)
    if tensor.dtype != want_dtype:
        msg = f"input {name!r}: safetensors dtype {tensor.dtype} != definition {want_dtype}"
        raise ValueError(msg)
    return tensor.to(device)


def _custom_inputs(
    definition: Definition,
    workload: Workload,
    axes: dict[str, int],
    custom: CustomFn | None,
    device: str,
) -> list[Value]:
    if custom is None:
        msg = "workload has custom inputs but the reference has no custom_inputs_entrypoint"
        raise ValueError(msg)
    context: dict[str, Any] = dict(axes)
    for name, spec in workload.inputs.items():
        if isinstance(spec, ScalarInput):
            context[name] = spec.value
    made = custom(context, torch.device(device))
    if not isinstance(made, dict):
        msg = f"custom_inputs_entrypoint returned {type(made).__name__}, expected a dict"
        raise TypeError(msg)
    missing = [n for n in definition.inputs if n not in made]
    if missing:
        msg = f"custom_inputs_entrypoint did not produce inputs {missing}"
        raise ValueError(msg)
    return [made[n] for n in definition.inputs]


def generate_inputs(
    definition: Definition,
    workload: Workload,
    device: str,
    problem_dir: str | None = None,
    custom: CustomFn | None = None,
) -> list[Value]:
    """Inputs of one round, in the definition's input order, drawn from the global RNG stream."""
    axes = definition.resolve_axes(dict(workload.axes))
    if any(isinstance(s, CustomInput) for s in workload.inputs.values()):
        return _custom_inputs(definition, workload, axes, custom, device)
    values: list[Value] = []
    for name, tspec in definition.inputs.items():
        spec = workload.inputs.get(name)
        shape = definition.shape_of(tspec, axes)
        if isinstance(spec, ScalarInput):
            values.append(spec.value)
        elif isinstance(spec, SafetensorsInput):
            values.append(_load_safetensors(name, spec, shape, tspec, problem_dir, device))
        elif shape is None:
            values.append(_random_scalar(tspec, device))
        else:
            values.append(_tensor_for(name, tspec, shape, device))
    return values


def allocate_outputs(definition: Definition, workload: Workload, device: str) -> list[torch.Tensor]:
    """Zeroed destination buffers for a DPS call, in output order (scalars become 0-d tensors)."""
    axes = definition.resolve_axes(dict(workload.axes))
    outputs: list[torch.Tensor] = []
    for tspec in definition.outputs.values():
        shape = definition.shape_of(tspec, axes) or ()
        if is_fp4(tspec.dtype) and shape:
            shape = (*shape[:-1], shape[-1] // 2)
        outputs.append(torch.zeros(shape, dtype=torch_dtype(tspec.dtype), device=device))
    return outputs
