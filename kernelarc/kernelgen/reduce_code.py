"""How a reduction is spelled in Triton, and which reductions of a kernel share one loop.

Place in the flow: `emit.KernelEmitter` asks these for a reduction's neutral value, accumulator
dtype and combine step (`identity`, `accumulator_dtype`, `reduce_input`, `combine`, `REDUCER`),
and for the groups it computes together: `online_pairs` (a max and the sum of exp(x - max):
softmax) and `welford_groups` (the mean and M2 of one variance). Apart from the emitter because
these read only the graph and an op name: no kernel state, so they can be checked and changed
alone.
"""

from kernelarc.kernelgen.graph_ir import WELFORD_OPS, Graph, Kind, Node, Ref
from kernelarc.kernelgen.pointwise_ops import compute_dtype
from kernelarc.kernelgen.values import Val, as_dtype

_INT_BITS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
REDUCER = {
    "sum": "tl.sum({t}, 1)",
    "any": "tl.max({t}, 1)",
    "max": "tl.max({t}, 1)",
    "all": "tl.min({t}, 1)",
    "min": "tl.min({t}, 1)",
    "prod": "tl.reduce({t}, 1, _kg_mul)",
}
"""Reduction op -> the Triton expression reducing a [XBLOCK, RBLOCK] tile `{t}` over its rows."""


def online_pairs(graph: Graph, order: list[str]) -> dict[str, str]:
    """max -> sum pairs where the sum reduces exp(x - max) of the max's own source x (every
    softmax, log-softmax and logsumexp): both are then computed in one loop, with the sum
    rescaled whenever the running max grows, so a looped softmax reads its rows twice (this
    loop and the stores), not three times."""
    pairs: dict[str, str] = {}
    for name in order:
        node = graph.node(name)
        if node.reduce_op != "sum" or accumulator_dtype(node) not in ("float32", "float64"):
            continue
        exp = graph.node(node.args[0])
        if exp.kind != Kind.POINTWISE or exp.target != "aten.exp.default":
            continue
        sub = graph.node(exp.args[0])
        if sub.kind != Kind.POINTWISE or sub.target != "aten.sub.Tensor" or sub.kwargs:
            continue
        if not isinstance(sub.args[1], Ref):
            continue
        found = graph.node(_through_views(graph, sub.args[1]))
        if (
            found.name in order
            and found.name not in pairs
            and found.reduce_op == "max"
            and found.dims == node.dims
            and found.args[0] == sub.args[0]
            and accumulator_dtype(found) == accumulator_dtype(node)
        ):
            pairs[found.name] = name
    return pairs


def _through_views(graph: Graph, ref: Ref) -> str:
    node = graph.node(ref)
    while node.kind == Kind.VIEW:
        node = graph.node(node.args[0])
    return node.name


def welford_groups(graph: Graph, order: list[str]) -> dict[str, list[Node]]:
    """Welford node -> every Welford node of the same source and dims (one computation)."""
    by_rows: dict[tuple[Ref, tuple[int, ...]], list[Node]] = {}
    for name in order:
        node = graph.node(name)
        if node.reduce_op in WELFORD_OPS:
            by_rows.setdefault((node.args[0], node.dims), []).append(node)
    return {node.name: group for group in by_rows.values() for node in group}


def identity(op: str, dtype: str) -> str:
    """The neutral value of a reduction in the accumulator's dtype."""
    if op in ("sum", "any"):
        return "0"
    if op in ("prod", "all"):
        return "1"
    if dtype in _INT_BITS:
        bits = _INT_BITS[dtype]
        return str(-(2**bits)) if op in ("max", "argmax") else str(2**bits - 1)
    return 'float("-inf")' if op in ("max", "argmax") else 'float("inf")'


def accumulator_dtype(node: Node) -> str:
    """The dtype a reduction accumulates in: int32 for any/all (0/1 counts), float32 for an
    arg-reduction's values, else the compute dtype of its output (16-bit floats in float32)."""
    if node.reduce_op in ("any", "all"):
        return "int32"
    if node.reduce_op in ("argmax", "argmin"):
        return "float32"
    return compute_dtype(node.meta.dtype)


def reduce_input(op: str, source: Val, acc_dtype: str) -> str:
    """What a reduction accumulates: the value itself, or 0/1 for any/all."""
    if op in ("any", "all"):
        return f"({source.code} != 0).to(tl.int32)"
    return as_dtype(source, acc_dtype)


def combine(op: str, acc: str, value: str) -> str:
    """The expression folding `value` into the running accumulator `acc` (NaN-propagating
    max/min through `_kg_max` / `_kg_min`, as torch does)."""
    if op == "sum":
        return f"{acc} + {value}"
    if op == "prod":
        return f"{acc} * {value}"
    if op in ("max", "any"):
        return f"_kg_max({acc}, {value})"
    return f"_kg_min({acc}, {value})"
