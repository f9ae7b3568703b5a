"""Lowering of ATen reductions to the generator's primitive `reduce.<op>` nodes.

Place in the flow: `graph_build.build_graph` calls `lower_reduction` for every node; a reduction
becomes one or two primitive reductions (reduced dims kept as size 1), pointwise nodes for the
arithmetic around them (`mean` divides a sum) and a squeeze when the op drops the dims. Returns
the edge(s) that replace the node's output(s).

A variance (`var`, `std`, `var_mean`) is, with `one_pass` (the VAR_ONEPASS knob, on by
default), the pair `welford_mean` / `welford_m2` of the same rows, which the emitter computes
in one pass (`emit.py`), and var = M2 / (count - correction). A plain mean of the same source
and dims shares the pair's mean (whichever comes first in the graph), so `x.mean(d)` next to
`x.var(d)` still reads the rows once. Without `one_pass`: a sum for the mean, then a sum of the
squared deviations from it (two passes over rows that do not fit one tile).
"""

from collections.abc import Sequence
from typing import Any

from kernelarc.kernelgen.graph_ir import (
    GenerationError,
    Graph,
    Kind,
    Node,
    Ref,
    contiguous,
    is_float,
)
from kernelarc.schema.op_graph import TensorMeta

_SUM_LIKE = {
    "aten.sum.dim_IntList": "sum",
    "aten.sum.default": "sum",
    "aten.prod.dim_int": "prod",
    "aten.prod.default": "prod",
    "aten.amax.default": "max",
    "aten.amin.default": "min",
    "aten.max.default": "max",
    "aten.min.default": "min",
    "aten.any.dim": "any",
    "aten.any.dims": "any",
    "aten.any.default": "any",
    "aten.all.dim": "all",
    "aten.all.dims": "all",
    "aten.all.default": "all",
    "aten.argmax.default": "argmax",
    "aten.argmin.default": "argmin",
}
_MEAN = {"aten.mean.dim", "aten.mean.default"}
_VAR = {"aten.var_mean.correction", "aten.var.correction", "aten.std.correction"}
_MAX_DIM = {"aten.max.dim": ("max", "argmax"), "aten.min.dim": ("min", "argmin")}


def lower_reduction(
    graph: Graph,
    name: str,
    target: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outputs: Sequence[TensorMeta | None],
    *,
    one_pass: bool = True,
) -> Ref | list[Ref] | None:
    """The replacement edge(s) of a reduction node, or None when `target` is not one (see the
    module docstring for `one_pass`)."""
    if (
        target not in _SUM_LIKE
        and target not in _MEAN
        and target not in _VAR
        and (target not in _MAX_DIM)
    ):
        return None
    source = args[0]
    if not isinstance(source, Ref):
        msg = f"{target} of a non-tensor"
        raise GenerationError(msg)
    shape = tuple(graph.meta(source).shape)
    dims, keepdim = _dims_and_keepdim(target, args, kwargs, len(shape))
    out_dtype = outputs[0].dtype if outputs and outputs[0] is not None else "float32"
    if target in _SUM_LIKE:
        op = _SUM_LIKE[target]
        reduced = _reduce(graph, name, op, source, dims, out_dtype)
        return _squeezed(graph, reduced, dims, keepdim)
    if target in _MAX_DIM:
        value_op, index_op = _MAX_DIM[target]
        values = _reduce(graph, name, value_op, source, dims, out_dtype)
        indices = _reduce(graph, name, index_op, source, dims, "int64")
        return [_squeezed(graph, values, dims, keepdim), _squeezed(graph, indices, dims, keepdim)]
    count = 1
    for d in dims:
        count *= shape[d]
    if target in _MEAN:
        shared = _find(graph, "welford_mean", source, dims, out_dtype)
        if shared is not None:
            return _squeezed(graph, shared, dims, keepdim)
        total = _reduce(graph, name, "sum", source, dims, out_dtype)
        mean = _pointwise(graph, name, "aten.div.Tensor", (total, float(count)), graph.meta(total))
        return _squeezed(graph, mean, dims, keepdim)
    graph.variances += 1
    return _variance(graph, name, target, source, dims, keepdim, count, kwargs, one_pass)


def _variance(
    graph: Graph,
    name: str,
    target: str,
    source: Ref,
    dims: tuple[int, ...],
    keepdim: bool,
    count: int,
    kwargs: dict[str, Any],
    one_pass: bool,
) -> Ref | list[Ref]:
    dtype = graph.meta(source).dtype
    if not is_float(dtype):
        msg = f"{target} of {dtype}"
        raise GenerationError(msg)
    correction = kwargs.get("correction", 1)
    correction = 1 if correction is None else correction
    if one_pass:
        mean = _find(graph, "welford_mean", source, dims, dtype)
        if mean is None:
            mean = _reduce(graph, name, "welford_mean", source, dims, dtype)
            _share_earlier_sum(graph, mean, count)
        sq_total = _find(graph, "welford_m2", source, dims, dtype)
        if sq_total is None:
            sq_total = _reduce(graph, name, "welford_m2", source, dims, dtype)
    else:
        total = _reduce(graph, name, "sum", source, dims, dtype)
        mean = _pointwise(graph, name, "aten.div.Tensor", (total, float(count)), graph.meta(total))
        full = graph.meta(source)
        diff = _pointwise(
            graph, name, "aten.sub.Tensor", (source, mean), contiguous(full.shape, dtype)
        )
        square = _pointwise(graph, name, "aten.mul.Tensor", (diff, diff), graph.meta(diff))
        sq_total = _reduce(graph, name, "sum", square, dims, dtype)
    divisor = float(max(count - correction, 0))
    var = _pointwise(graph, name, "aten.div.Tensor", (sq_total, divisor), graph.meta(sq_total))
    if target == "aten.std.correction":
        std = _pointwise(graph, name, "aten.sqrt.default", (var,), graph.meta(var))
        return _squeezed(graph, std, dims, keepdim)
    if target == "aten.var.correction":
        return _squeezed(graph, var, dims, keepdim)
    return [_squeezed(graph, var, dims, keepdim), _squeezed(graph, mean, dims, keepdim)]


def _find(graph: Graph, op: str, source: Ref, dims: tuple[int, ...], dtype: str) -> Ref | None:
    """An existing primitive reduction `op` of `source` over `dims` in `dtype`."""
    for node in graph.nodes.values():
        if (
            node.kind == Kind.REDUCTION
            and node.reduce_op == op
            and node.args[0] == source
            and node.dims == dims
            and node.meta.dtype == dtype
        ):
            return Ref(node.name)
    return None


def _share_earlier_sum(graph: Graph, mean: Ref, count: int) -> None:
    """An earlier float sum of the Welford mean's rows (a plain mean's) becomes mean * count:
    the rows are read once. The Welford node moves before it (its source already is)."""
    node = graph.node(mean)
    earlier = _find(graph, "sum", node.args[0], node.dims, node.meta.dtype)
    if earlier is None or not is_float(node.meta.dtype):
        return
    total = graph.node(earlier)
    total.target, total.kind, total.reduce_op, total.dims = (
        "aten.mul.Tensor",
        Kind.POINTWISE,
        "",
        (),
    )
    total.args = (mean, float(count))
    order = [n for n in graph.nodes if n != node.name]
    order.insert(order.index(total.name), node.name)
    graph.nodes = {n: graph.nodes[n] for n in order}


def _dims_and_keepdim(
    target: str, args: tuple[Any, ...], kwargs: dict[str, Any], rank: int
) -> tuple[tuple[int, ...], bool]:
    """(reduced dims, normalised and sorted; keepdim) of a reduction call."""
    if target.endswith(".default") and target not in (
        "aten.amax.default",
        "aten.amin.default",
        "aten.argmax.default",
        "aten.argmin.default",
    ):
        return tuple(range(rank)), False
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if dim is None or dim == []:
        return tuple(range(rank)), bool(keepdim)
    dims = dim if isinstance(dim, list | tuple) else [dim]
    normal = sorted({int(d) % max(rank, 1) for d in dims})
    return tuple(normal), bool(keepdim)


def _reduce(
    graph: Graph, stem: str, op: str, source: Ref, dims: tuple[int, ...], dtype: str
) -> Ref:
    shape = list(graph.meta(source).shape)
    for d in dims:
        shape[d] = 1
    if op in ("sum", "prod") and not is_float(dtype) and dtype != "int64":
        dtype = "int64"
    if op in ("any", "all"):
        dtype = "bool"
    node = Node(
        graph.fresh(stem),
        f"reduce.{op}",
        Kind.REDUCTION,
        (source,),
        {},
        (contiguous(shape, dtype),),
        reduce_op=op,
        dims=dims,
    )
    return graph.add(node)


def _pointwise(
    graph: Graph, stem: str, target: str, args: tuple[Any, ...], meta: TensorMeta
) -> Ref:
    node = Node(graph.fresh(stem), target, Kind.POINTWISE, args, {}, (meta,))
    return graph.add(node)


def _squeezed(graph: Graph, ref: Ref, dims: tuple[int, ...], keepdim: bool) -> Ref:
    if keepdim or not dims:
        return ref
    meta = graph.meta(ref)
    shape = [s for i, s in enumerate(meta.shape) if i not in dims]
    node = Node(
        graph.fresh(ref.node),
        "aten.squeeze.dims",
        Kind.VIEW,
        (ref, list(dims)),
        {},
        (contiguous(shape, meta.dtype),),
    )
    return graph.add(node)
