"""Build and call a KernelBench model at chosen sizes: the runtime half of every converted problem.

Place in the flow: the source of this module is copied verbatim into the `reference` of every
definition the importer writes, where `run` and the `custom_inputs_entrypoint` delegate to
`KernelBenchProblem`; the importer (`convert.py`, in its subprocess) runs the same code while it
probes shapes. So it imports only the standard library and torch, it must keep working as plain
text inside another file, and, as part of every candidate derived from the reference, it must
pass the guard's static scan: no exec/eval/compile, no sys.modules, no code objects.

A KernelBench file sets its sizes as module-level constants (`batch_size = 16`,
`depth, height, width = 16, 32, 32`, `input_shape = (4096,)`) that `get_inputs()` and
`get_init_inputs()` read. The importer writes the file's top-level statements, as they are, into
the body of a builder function of the reference (`builder_source.py`): `def _kb_namespace(sizes)`
returns the file's `Model`, `get_inputs` and `get_init_inputs`, and right after each statement
that assigns a size constant the builder has a line `name = sizes.apply(name, axis, index)` that
replaces its value with the one asked for, so constants derived later
(`bias_shape = (out_channels, 1, 1)`) follow and the file's functions read the final values from
the enclosing scope. An entry of a tuple constant is addressed by its index; one axis may set
several constants that must stay equal (a tied axis).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

#: The names a builder returns: what a KernelBench file defines at its top level.
Namespace = Mapping[str, Any]


class Sizes:
    """The axis values asked for, as the builder sees them: `apply` after each size constant."""

    def __init__(self, sizes: Mapping[str, int]) -> None:
        self.sizes = {axis: int(value) for axis, value in sizes.items()}

    def apply(self, current: Any, axis: str, index: int | None = None) -> Any:
        """`current` (the constant as the file assigned it) with `axis`'s value, if one was asked,
        in place of the whole constant (`index` None) or of its entry `index` (a tuple)."""
        if axis not in self.sizes:
            return current
        value = self.sizes[axis]
        if index is None:
            return value
        items = list(current)
        items[index] = value
        return tuple(items)


def build_model(ns: Namespace, device: torch.device | str) -> torch.nn.Module:
    """`Model(*get_init_inputs())` with every factory call on `device`."""
    with torch.device(device), torch.no_grad():
        model: torch.nn.Module = ns["Model"](*ns["get_init_inputs"]())
    return model


def forward_inputs(ns: Namespace, device: torch.device | str) -> list[Any]:
    """`get_inputs()` with every factory call on `device`."""
    with torch.device(device), torch.no_grad():
        return list(ns["get_inputs"]())


def _key(sizes: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((axis, int(value)) for axis, value in sizes.items()))


class KernelBenchProblem:
    """The converted problem: the definition's inputs are the forward arguments, then the
    model's parameters and buffers; each axis that is a size constant is read back from the
    shape of one input, so `run` rebuilds (on the meta device, cached) the model those sizes
    give and calls it with `torch.func.functional_call`."""

    def __init__(
        self,
        builder: Callable[[Sizes], Namespace],
        forward_inputs: Sequence[str],
        state_inputs: Mapping[str, str],
        size_of: Mapping[str, tuple[str, int]],
    ) -> None:
        self.builder = builder
        self.forward_inputs = list(forward_inputs)
        self.state_inputs = dict(state_inputs)  # input name -> parameter/buffer name
        names = [*self.forward_inputs, *self.state_inputs]
        self._size_at = {axis: (names.index(n), dim) for axis, (n, dim) in size_of.items()}
        self._namespaces: dict[tuple[tuple[str, int], ...], Namespace] = {}
        self._models: dict[tuple[tuple[str, int], ...], torch.nn.Module] = {}

    def namespace(self, sizes: Mapping[str, int]) -> Namespace:
        """The file's `Model`, `get_inputs` and `get_init_inputs` at these sizes (built once)."""
        key = _key(sizes)
        ns = self._namespaces.get(key)
        if ns is None:
            ns = self.builder(Sizes(dict(key)))
            self._namespaces[key] = ns
        return ns

    def meta_model(self, sizes: Mapping[str, int]) -> torch.nn.Module:
        """The model at these sizes, built once on the meta device (it holds no data)."""
        key = _key(sizes)
        model = self._models.get(key)
        if model is None:
            model = build_model(self.namespace(sizes), "meta")
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
        ns = self.namespace(sizes)
        model = build_model(ns, device)
        forward = forward_inputs(ns, device)
        made: dict[str, Any] = dict(zip(self.forward_inputs, forward, strict=True))
        tensors: dict[str, torch.Tensor] = dict(model.named_parameters())
        tensors.update(model.named_buffers())
        for name, qualified in self.state_inputs.items():
            made[name] = tensors[qualified].detach()
        return made
