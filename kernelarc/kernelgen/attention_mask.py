"""Masks of attention scores that depend on positions only (causal, sliding window, prefix).

Place in the flow: `attention.attention_space` asks `index_mask` about the scores its softmax
reads; `attention_emit` then bounds the key loop of each program to the blocks the mask keeps
for some of its rows. A causal mask drops the blocks above the diagonal, half the work of a
long sequence, as FlashAttention's causal kernels do.

A mask qualifies when the scores are `-inf` wherever a condition computed from index ranges
alone (iota / arange, comparisons, logical ops, constants: no tensor is read) says so, through
`where(c, -inf, s)`, `where(c, s, -inf)` (`masked_fill`), or `s + where(c, 0, -inf)` (an
additive mask), followed by nothing but float casts and scaling by a positive number, which
keep -inf as it is. Any other shape of mask still works, with every key block visited.
"""

from dataclasses import dataclass
from typing import Any

from kernelarc.kernelgen.graph_ir import CONSTANT_TARGET, Graph, Kind, Node, Ref, walk_up

_CAST = "prims.convert_element_type.default"
_SCALINGS = ("aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar")
_WHERE = "aten.where.self"
#: Ops that pass a value through unchanged (a tensor constant of the reference is lifted and
#: aliased before use).
_COPIES = ("aten.lift_fresh_copy.default", "aten.alias.default", "aten.clone.default")
_FLOATS = ("float16", "bfloat16", "float32", "float64")
#: What an index-only condition may be computed from.
_INDEX_ONLY = (Kind.FACTORY, Kind.POINTWISE, Kind.VIEW)


@dataclass(frozen=True)
class IndexMask:
    """Where the scores are -inf by position: at `node`, wherever `condition` is not `keep`."""

    node: str
    """The where / add node that puts the -inf in."""
    condition: Ref
    """A boolean tensor computed from positions only."""
    keep: bool
    """The condition's value where a score is kept."""
    scores: Ref | None = None
    """The scores the -inf is written into (the `where`'s other branch, the add's other term)."""


def index_mask(graph: Graph, scores: Ref) -> IndexMask | None:
    """The position-only mask of `scores` (the softmax's input), or None."""
    node = graph.node(scores)
    while True:
        source = node.args[0] if node.args else None
        if not isinstance(source, Ref):
            return None
        if node.target == _CAST and node.meta.dtype in _FLOATS:
            node = graph.node(source)
            continue
        factor = constant_value(graph, node.args[1]) if len(node.args) > 1 else None
        if node.target in _SCALINGS and factor is not None and factor > 0:
            node = graph.node(source)
            continue
        break
    found = _where_minus_inf(graph, node)
    if found is None and node.target == "aten.add.Tensor":
        for arg in node.args:
            added = _where_minus_inf(graph, graph.node(arg), other_zero=True)
            if isinstance(arg, Ref) and added is not None:
                other = node.args[1] if arg == node.args[0] else node.args[0]
                behind = other if isinstance(other, Ref) else None
                found = IndexMask(node.name, added.condition, added.keep, behind)
                break
    if found is None or not _positions_only(graph, found.condition):
        return None
    return found


def _where_minus_inf(graph: Graph, node: Node, *, other_zero: bool = False) -> IndexMask | None:
    if node.target != _WHERE or len(node.args) != 3 or not isinstance(node.args[0], Ref):
        return None
    condition, when_true, when_false = node.args
    if _minus_inf(graph, when_true) and (not other_zero or _zero(graph, when_false)):
        scores = when_false if isinstance(when_false, Ref) else None
        return IndexMask(node.name, condition, keep=False, scores=scores)
    if _minus_inf(graph, when_false) and (not other_zero or _zero(graph, when_true)):
        scores = when_true if isinstance(when_true, Ref) else None
        return IndexMask(node.name, condition, keep=True, scores=scores)
    return None


def constant_value(graph: Graph, value: Any) -> float | None:
    """The number `value` stands for: a literal, or a constant node (through copies); else None."""
    if _number(value):
        return float(value)
    if not isinstance(value, Ref):
        return None
    node = graph.node(value)
    while node.target in _COPIES and node.args and isinstance(node.args[0], Ref):
        node = graph.node(node.args[0])
    if node.target == "aten.scalar_tensor.default" and node.args and _number(node.args[0]):
        return float(node.args[0])
    if node.target == "aten.full.default" and len(node.args) > 1 and _number(node.args[1]):
        return float(node.args[1])
    values = node.args[0] if node.target == CONSTANT_TARGET and node.args else None
    if isinstance(values, list | tuple) and len(values) == 1 and _number(values[0]):
        return float(values[0])  # torch.tensor(float("-inf")) in the reference
    return None


def _minus_inf(graph: Graph, value: Any) -> bool:
    return constant_value(graph, value) == float("-inf")


def _zero(graph: Graph, value: Any) -> bool:
    return constant_value(graph, value) == 0.0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positions_only(graph: Graph, start: Ref) -> bool:
    """`start` reads no tensor: only index ranges, constants and ops on them."""

    def index_only(node: Node) -> bool:
        return node.kind in _INDEX_ONLY

    return all(index_only(node) for node in walk_up(graph, start.node, index_only))
