"""Run a KernelBench problem file at chosen sizes: the runtime half of every converted problem.

Place in the flow: the importer (`convert.py`, in its subprocess) uses this module to build
KernelBench models on the meta device while it probes shapes, and the source of this module is
copied verbatim into the `reference` of every definition it writes, where `run` and the
`custom_inputs_entrypoint` delegate to `KernelBenchProblem`. So it imports only the standard
library and torch, and it must keep working as plain text inside another file.

A KernelBench file sets its sizes as module-level constants (`batch_size = 16`,
`depth, height, width = 16, 32, 32`, `input_shape = (4096,)`) that `get_inputs()` and
`get_init_inputs()` read. `KernelBenchSource.namespace(sizes)` executes the file one top-level
statement at a time and, right after a statement assigns a size constant, replaces its value with
the one asked for, so constants derived later (`bias_shape = (out_channels, 1, 1)`) follow. An
entry of a tuple constant is addressed as (`input_shape`, 0). One axis may set several constants
that must stay equal.
"""

import ast
import types
from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: Axis name -> the (module-level constant, index into it when the constant is a tuple, else
#: None) it sets; usually one, several when constants must stay equal (a tied axis).
SizeConstants = Mapping[str, Sequence[tuple[str, int | None]]]


class KernelBenchSource:
    """A KernelBench file, executable with some of its size constants replaced."""

    def __init__(self, source: str, filename: str, size_constants: SizeConstants) -> None:
        self.filename = filename
        self.size_constants = {axis: list(targets) for axis, targets in size_constants.items()}
        tree = ast.parse(source, filename)
        self._statements: list[tuple[types.CodeType, set[str]]] = [
            (compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec"), _assigned(stmt))
            for stmt in tree.body
        ]

    def namespace(self, sizes: Mapping[str, int]) -> dict[str, Any]:
        """The file's globals after running it with the given axes' constants replaced."""
        unknown = set(sizes) - set(self.size_constants)
        if unknown:
            msg = f"{self.filename}: no size constant for {sorted(unknown)}"
            raise KeyError(msg)
        ns: dict[str, Any] = {"__name__": "kernelbench_problem", "__file__": self.filename}
        for code, assigned in self._statements:
            exec(code, ns)
            for axis, value in sizes.items():
                for constant, index in self.size_constants[axis]:
                    if constant in assigned:
                        ns[constant] = _replaced(ns[constant], index, int(value))
        return ns

    def build_model(self, ns: Mapping[str, Any], device: torch.device | str) -> torch.nn.Module:
        """`Model(*get_init_inputs())` with every factory call on `device`."""
        with torch.device(device), torch.no_grad():
            model: torch.nn.Module = ns["Model"](*ns["get_init_inputs"]())
        return model

    def forward_inputs(self, ns: Mapping[str, Any], device: torch.device | str) -> list[Any]:
        """`get_inputs()` with every factory call on `device`."""
        with torch.device(device), torch.no_grad():
            return list(ns["get_inputs"]())


def _replaced(current: Any, index: int | None, value: int) -> Any:
    if index is None:
        return value
    items = list(current)
    items[index] = value
    return tuple(items)


def _assigned(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds by plain assignment."""
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


class KernelBenchProblem:
    """The converted problem: the definition's inputs are the forward arguments, then the
    model's parameters and buffers; each axis that is a size constant is read back from the
    shape of one input, so `run` rebuilds (on the meta device, cached) the model those sizes
    give and calls it with `torch.func.functional_call`."""

    def __init__(
        self,
        source: KernelBenchSource,
        forward_inputs: Sequence[str],
        state_inputs: Mapping[str, str],
        size_of: Mapping[str, tuple[str, int]],
    ) -> None:
        self.source = source
        self.forward_inputs = list(forward_inputs)
        self.state_inputs = dict(state_inputs)  # input name -> parameter/buffer name
        names = [*self.forward_inputs, *self.state_inputs]
        self._size_at = {axis: (names.index(n), dim) for axis, (n, dim) in size_of.items()}
        self._models: dict[tuple[tuple[str, int], ...], torch.nn.Module] = {}

    def meta_model(self, sizes: Mapping[str, int]) -> torch.nn.Module:
        """The model at these sizes, built once on the meta device (it holds no data)."""
        key = tuple(sorted((k, int(v)) for k, v in sizes.items()))
        model = self._models.get(key)
        if model is None:
            model = self.source.build_model(self.source.namespace(dict(key)), "meta")
            self._models[key] = model
        return model

    def run(self, values: Sequence[Any]) -> Any:
        """The model's forward on the inputs in definition order (outputs as it returns them)."""
        sizes = {axis: int(values[i].shape[dim]) for axis, (i, dim) in self._size_at.items()}
        model = self.meta_model(sizes)
        count = len(self.forward_inputs)
        state = dict(zip(self.state_inputs.values(), values[count:], strict=True))
        out = torch.func.functional_call(model, state, tuple(values[:count]))
        return tuple(out) if isinstance(out, list) else out

    def make_inputs(
        self, axes_and_scalars: Mapping[str, Any], device: torch.device
    ) -> dict[str, Any]:
        """Inputs as KernelBench draws them: `get_inputs()`, and the parameters and buffers of a
        freshly initialised `Model(*get_init_inputs())`, at the workload's sizes, on `device`.
        Draws from the caller's RNG stream (the evaluator seeds it; nothing here reseeds)."""
        sizes = {axis: int(axes_and_scalars[axis]) for axis in self._size_at}
        ns = self.source.namespace(sizes)
        model = self.source.build_model(ns, device)
        forward = self.source.forward_inputs(ns, device)
        made: dict[str, Any] = dict(zip(self.forward_inputs, forward, strict=True))
        tensors: dict[str, torch.Tensor] = dict(model.named_parameters())
        tensors.update(model.named_buffers())
        for name, qualified in self.state_inputs.items():
            made[name] = tensors[qualified].detach()
        return made
