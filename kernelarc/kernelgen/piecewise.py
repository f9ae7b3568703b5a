"""Values read from one of several sources by index range: `cat` and constant padding.

Place in the flow: the emitter asks `pieces(node, index)` for a piecewise node; each piece is
a source read at a shifted index, valid where its bounds hold (the emitter masks the piece's
loads with them, so no address outside a source is touched), or a constant. The value is the
first piece whose bounds hold (`tl.where` chain).
"""

from dataclasses import dataclass
from typing import Any

from kernelarc.kernelgen.graph_ir import Graph, Node, Ref
from kernelarc.kernelgen.index_expr import Lin

Index = tuple[Lin, ...]


@dataclass(frozen=True)
class Bound:
    """`expr >= value` (lower) or `expr < value` (upper)."""

    expr: Lin
    value: int
    lower: bool


@dataclass(frozen=True)
class Piece:
    """A source at an index, or a constant, valid where every bound holds."""

    bounds: tuple[Bound, ...]
    source: Ref | None = None
    index: Index | None = None
    constant: Any = None


def pieces(graph: Graph, node: Node, index: Index) -> list[Piece]:
    """The pieces of a `cat` or `constant_pad_nd` node at `index`."""
    if node.target == "aten.cat.default":
        return _cat(graph, node, index)
    return _pad(graph, node, index)


def _cat(graph: Graph, node: Node, index: Index) -> list[Piece]:
    sources = [s for s in node.args[0] if isinstance(s, Ref)]
    rank = len(node.meta.shape)
    dim = int(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    sized = [(s, graph.meta(s).shape[dim]) for s in sources if graph.meta(s).shape[dim] > 0]
    out: list[Piece] = []
    offset = 0
    position = index[dim]
    for k, (source, size) in enumerate(sized):
        bounds: list[Bound] = []
        if k > 0:
            bounds.append(Bound(position, offset, lower=True))
        if k < len(sized) - 1:
            bounds.append(Bound(position, offset + size, lower=False))
        shifted = (*index[:dim], position - offset, *index[dim + 1 :])
        out.append(Piece(tuple(bounds), source=source, index=shifted))
        offset += size
    return out


def _pad(graph: Graph, node: Node, index: Index) -> list[Piece]:
    source: Ref = node.args[0]
    pad = [int(p) for p in node.args[1]]
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    src_shape = graph.meta(source).shape
    rank = len(src_shape)
    shifted = list(index)
    bounds: list[Bound] = []
    for j in range(len(pad) // 2):
        dim = rank - 1 - j
        left = pad[2 * j]
        shifted[dim] = index[dim] - left
        bounds.append(Bound(index[dim], left, lower=True))
        bounds.append(Bound(index[dim], left + src_shape[dim], lower=False))
    inside = Piece(tuple(bounds), source=source, index=tuple(shifted))
    return [inside, Piece((), constant=0.0 if value is None else value)]
