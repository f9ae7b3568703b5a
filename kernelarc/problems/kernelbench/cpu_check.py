"""Run a converted problem for real on the CPU, at its smallest workload, before writing it.

Place in the flow: `convert.py` calls `check_on_cpu` on the definition it built. The reference is
loaded from a file as the evaluator loads it and its inputs come from the evaluator's own input
generator (seed 200, `custom_inputs_entrypoint`). The conversion is refused when the forward is
not deterministic (run twice with different RNG states: dropout in training mode, torch.rand in
the forward), when the outputs contain NaN/Inf, or when they differ from running the KernelBench
`Model` directly with the same parameters, or do not have the definition's shapes and dtypes.
Warnings: inputs the forward changes in place, and constant outputs.
"""

import tempfile
from pathlib import Path
from typing import Any

import torch

from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.report import FailureCause
from kernelarc.problems.kernelbench.shape_probe import DTYPE_NAMES
from kernelarc.problems.kernelbench.source_scan import ConversionError
from kernelarc.runner.inputs import generate_inputs, seed_everything
from kernelarc.runner.staging import load_reference
from kernelarc.schema import Definition, Workload

_SEED = 200


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor)
        and isinstance(y, torch.Tensor)
        and x.shape == y.shape
        and x.dtype == y.dtype
        and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
        and torch.equal(x.isnan(), y.isnan())
        for x, y in zip(a, b, strict=True)
    )


def check_on_cpu(
    definition: Definition,
    workload: Workload,
    source: KernelBenchSource,
    sizes: dict[str, int],
) -> list[str]:
    """Warnings about the converted problem; ConversionError if it must not be written."""
    with tempfile.TemporaryDirectory(prefix="kernelarc-kb-") as tmp:
        try:
            module = load_reference(definition, Path(tmp))
            seed_everything(_SEED)
            custom = getattr(module, definition.custom_inputs_entrypoint or "")
            inputs = generate_inputs(definition, workload, "cpu", custom=custom)
        except Exception as exc:
            msg = (
                f"the converted reference fails on CPU before running: {type(exc).__name__}: {exc}"
            )
            raise ConversionError(FailureCause.VERIFY_FAILED, msg) from exc
        runs: list[list[Any]] = []
        args: list[Any] = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            args = _clone(inputs)
            try:
                with torch.no_grad():
                    runs.append(_as_list(module.run(*args)))
            except Exception as exc:
                msg = f"the converted reference raises on CPU: {type(exc).__name__}: {exc}"
                raise ConversionError(FailureCause.VERIFY_FAILED, msg) from exc
    outputs = runs[0]
    _check_outputs(definition, workload, outputs)
    try:
        model, direct = _run_directly(source, sizes, definition, inputs)
    except Exception as exc:
        msg = f"running the KernelBench Model directly on CPU raised: {type(exc).__name__}: {exc}"
        raise ConversionError(FailureCause.VERIFY_FAILED, msg) from exc
    if not _same(runs[0], runs[1]):
        raise ConversionError(FailureCause.NONDETERMINISTIC, _nondeterminism(model))
    if not _same(outputs, direct):
        msg = "the converted reference differs from running the KernelBench Model directly"
        raise ConversionError(FailureCause.VERIFY_FAILED, msg)
    for name, out in zip(definition.outputs, outputs, strict=True):
        if out.is_floating_point() and not bool(torch.isfinite(out).all()):
            msg = f"output {name!r} has NaN or Inf at {workload.uuid}: no kernel could pass"
            raise ConversionError(FailureCause.NONFINITE_OUTPUT, msg)
    return _warnings(definition, inputs, args, outputs)


def _check_outputs(definition: Definition, workload: Workload, outputs: list[Any]) -> None:
    axes = definition.resolve_axes(dict(workload.axes))
    if len(outputs) != len(definition.outputs):
        msg = (
            f"the reference returned {len(outputs)} outputs, "
            f"the definition has {len(definition.outputs)}"
        )
        raise ConversionError(FailureCause.VERIFY_FAILED, msg)
    for (name, spec), out in zip(definition.outputs.items(), outputs, strict=True):
        want = definition.shape_of(spec, axes)
        if not isinstance(out, torch.Tensor):
            msg = f"output {name!r} is a {type(out).__name__} on CPU"
            raise ConversionError(FailureCause.UNSUPPORTED_OUTPUT, msg)
        if tuple(out.shape) != want or DTYPE_NAMES.get(out.dtype) != spec.dtype:
            msg = (
                f"output {name!r} is {tuple(out.shape)} {out.dtype} on CPU at {workload.uuid}, "
                f"the definition says {want} {spec.dtype}"
            )
            raise ConversionError(FailureCause.VERIFY_FAILED, msg)


def _run_directly(
    source: KernelBenchSource, sizes: dict[str, int], definition: Definition, inputs: list[Any]
) -> tuple[torch.nn.Module, list[Any]]:
    """The KernelBench Model built on CPU at these sizes, given the same parameters and buffers,
    called as KernelBench calls it: `model(*get_inputs())`."""
    ns = source.namespace(sizes)
    model = source.build_model(ns, "cpu")
    state = list(model.named_parameters()) + list(model.named_buffers())
    forward = _clone(inputs[: len(inputs) - len(state)])
    with torch.no_grad():
        for (_, tensor), value in zip(state, inputs[len(forward) :], strict=True):
            tensor.copy_(value)
        torch.manual_seed(1)
        direct = _as_list(model(*forward))
    return model, direct


def _nondeterminism(model: torch.nn.Module) -> str:
    dropouts = [
        f"{name or 'model'} (p={module.p})"
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0
    ]
    if dropouts:
        return (
            "the forward is not deterministic: dropout in training mode (KernelBench never "
            f"calls .eval()): {', '.join(dropouts)}"
        )
    return (
        "the forward is not deterministic: two runs on the same inputs differ (random numbers "
        "drawn in the forward: torch.rand*, F.dropout, ...)"
    )


def _warnings(
    definition: Definition, before: list[Any], after: list[Any], outputs: list[Any]
) -> list[str]:
    notes: list[str] = []
    changed = [
        name
        for name, a, b in zip(definition.inputs, before, after, strict=True)
        if isinstance(a, torch.Tensor) and not _same([a], [b])
    ]
    if changed:
        notes.append(
            f"the forward changes input(s) in place: {', '.join(changed)} (training-mode "
            "BatchNorm updates its running statistics); a kernel may do the same or not"
        )
    for name, out in zip(definition.outputs, outputs, strict=True):
        flat = out.reshape(-1)
        if flat.numel() > 1 and bool((flat == flat[0]).all()):
            notes.append(
                f"output {name!r} is constant ({flat[0].item():g}) on the CPU workload: "
                "a kernel that writes that constant passes"
            )
    return notes
