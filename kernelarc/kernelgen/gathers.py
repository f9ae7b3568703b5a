"""Reads at a loaded index: embedding lookups, `gather`, `index_select` and `x[idx]`.

Place in the flow: `graph_build` classifies these ops as `Kind.GATHER`; when a kernel pulls
one at an index, `ValueEmitter` asks `gather_plan` where: the index tensor is pulled at the
output index's share of it (`index`), and the source, which must be a buffer, is loaded at the
output index with one dim replaced by the loaded index (negative indices wrap, as `x[idx]`
does). So an embedding lookup and its scale, or a gather and the reduction that follows it, are
one kernel instead of a torch call between two. Forms outside these (several index tensors,
boolean masks) stay torch calls: `gather_plan` raises `GatherError` and the node is not fused.
"""

from dataclasses import dataclass
from typing import Any

from kernelarc.kernelgen.graph_ir import Graph, Node, Ref
from kernelarc.kernelgen.index_expr import Lin

GATHER_TARGETS = frozenset(
    {
        "aten.embedding.default",
        "aten.gather.default",
        "aten.index_select.default",
        "aten.index.Tensor",
    }
)


class GatherError(ValueError):
    """A gather this module does not express."""


@dataclass(frozen=True)
class GatherPlan:
    """Where a gather reads, for one output index."""

    source: Ref
    """The tensor read (must be a buffer)."""
    source_index: tuple[Lin, ...]
    """The source index with `dim`'s entry 0: the loaded index times its stride is added."""
    dim: int
    """The source dim the loaded index selects."""
    index: Ref
    """The index tensor."""
    index_at: tuple[Lin, ...]
    """Where the index tensor is read."""


def gather_plan(graph: Graph, node: Node, out: tuple[Lin, ...]) -> GatherPlan:
    """The reads of `node` at output index `out`.

    Raises:
        GatherError: a form not expressed here (see the module docstring).
    """
    target = node.target
    args = node.args
    if target == "aten.embedding.default":
        weight, ids = _ref(args[0]), _ref(args[1])
        k = len(graph.meta(ids).shape)
        return GatherPlan(weight, (Lin(), *out[k:]), 0, ids, out[:k])
    if target == "aten.gather.default":
        source, dim, ids = _ref(args[0]), _dim(args[1], graph.meta(_ref(args[0])).shape), args[2]
        if len(args) > 3 and args[3]:
            msg = "gather with sparse_grad"
            raise GatherError(msg)
        return GatherPlan(source, _replace(out, dim), dim, _ref(ids), out)
    if target == "aten.index_select.default":
        source = _ref(args[0])
        dim = _dim(args[1], graph.meta(source).shape)
        return GatherPlan(source, _replace(out, dim), dim, _ref(args[2]), (out[dim],))
    if target == "aten.index.Tensor":
        source = _ref(args[0])
        given = [i for i, item in enumerate(args[1]) if item is not None]
        if len(given) != 1:
            msg = f"x[...] with {len(given)} index tensors"
            raise GatherError(msg)
        dim = given[0]
        ids = _ref(args[1][dim])
        if graph.meta(ids).dtype == "bool":
            msg = "a boolean mask index"
            raise GatherError(msg)
        k = len(graph.meta(ids).shape)
        source_index = (*out[:dim], Lin(), *out[dim + k :])
        return GatherPlan(source, source_index, dim, ids, out[dim : dim + k])
    msg = f"{target} is not a gather"
    raise GatherError(msg)


def _ref(value: Any) -> Ref:
    if not isinstance(value, Ref):
        msg = f"operand {value!r} is not a tensor"
        raise GatherError(msg)
    return value


def _dim(value: Any, shape: list[int]) -> int:
    if not isinstance(value, int):
        msg = f"dim {value!r}"
        raise GatherError(msg)
    return value % max(len(shape), 1)


def _replace(index: tuple[Lin, ...], dim: int) -> tuple[Lin, ...]:
    return (*index[:dim], Lin(), *index[dim + 1 :])
