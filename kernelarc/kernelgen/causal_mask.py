"""Is a position-only attention mask exactly causal (a key kept iff its position is at most the
query's)?

Place in the flow: `attention_sdpa.sdpa_form` asks `is_causal` about the condition of the mask
`attention_mask.index_mask` found, to call `scaled_dot_product_attention` with `is_causal`. The
condition is read as a predicate over integer affine forms of the positions of its output:
`arange` / `iota`, sums, differences and constant multiples of them (no value out of its
integer dtype's range), comparisons, logical ops and constants, `where(c, a, b)` of constants
compared with one or cast to bool (`tril(ones(n, n)) == 0`), through the views that only add,
broadcast or drop size-one dims (axes counted from the last, as broadcasting aligns them: -1 the
key, -2 the query). After constants and double
negations are removed it must be one comparison equal to `key - query <= 0` over the integers;
anything else (a window, an offset, a mask read from a tensor) is not causal.
"""

import operator
from typing import Any

from kernelarc.kernelgen.attention_mask import constant_value
from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref

_CAST = "prims.convert_element_type.default"
_RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
_COPIES = ("aten.lift_fresh_copy.default", "aten.alias.default", "aten.clone.default")
_INT_LIMIT = {"int32": 2**31, "int64": 2**63}


Affine = dict[int, int]
"""Coefficient per axis of a node's output (counted from the last axis: -1, -2, ...), and the
constant under key 0."""

_COMPARE = {
    "aten.le": "le",
    "aten.lt": "lt",
    "aten.ge": "ge",
    "aten.gt": "gt",
    "aten.eq": "eq",
    "aten.ne": "ne",
}


def is_causal(graph: Graph, condition: Ref, keep: bool) -> bool:
    """The scores kept (`condition == keep`) are exactly those whose key position is at most
    the query position."""
    predicate = _predicate(graph, condition)
    if predicate is None:
        return False
    if not keep:
        predicate = ("not", predicate)
    compared = _as_comparison(predicate)
    if compared is None:
        return False
    form, op = compared
    # Canonical `form <= 0` over the integers; causal is `key - query <= 0`.
    if op == "lt":
        form = {**form, 0: form.get(0, 0) + 1}
    elif op == "ge":
        form = {axis: -c for axis, c in form.items()}
    elif op == "gt":
        form = {axis: -c for axis, c in form.items()}
        form[0] = form.get(0, 0) + 1
    elif op != "le":
        return False
    query, key, constant = form.get(-2, 0), form.get(-1, 0), form.get(0, 0)
    others = [c for axis, c in form.items() if axis not in (-2, -1, 0) and c]
    return not others and key > 0 and query == -key and constant == 0


Predicate = tuple[Any, ...]
"""("cmp", affine, op), ("and", p, q), ("or", p, q), ("not", p) or ("const", bool)."""


def _as_comparison(predicate: Predicate) -> tuple[Affine, str] | None:
    """One comparison equal to `predicate` after removing constants and double negations."""
    simple = _simplify(predicate)
    if simple[0] == "cmp":
        return simple[1], simple[2]
    return None


_NEGATED = {"le": "gt", "lt": "ge", "ge": "lt", "gt": "le", "eq": "ne", "ne": "eq"}


def _simplify(predicate: Predicate) -> Predicate:
    kind = predicate[0]
    if kind == "not":
        inner = _simplify(predicate[1])
        if inner[0] == "const":
            return ("const", not inner[1])
        if inner[0] == "not":
            return _simplify(inner[1])
        if inner[0] == "cmp":
            return ("cmp", inner[1], _NEGATED[inner[2]])
        return ("not", inner)
    if kind in ("and", "or"):
        left, right = _simplify(predicate[1]), _simplify(predicate[2])
        neutral = kind == "and"
        for a, b in ((left, right), (right, left)):
            if a[0] == "const":
                if a[1] == neutral:
                    return b
                return ("const", not neutral)
        return (kind, left, right)
    return predicate


def _predicate(graph: Graph, ref: Ref) -> Predicate | None:
    """The boolean node `ref` as a predicate of positions, or None when it is not one."""
    node = graph.node(ref)
    if node.meta.dtype != "bool":
        return None
    if node.kind == Kind.VIEW:
        moved = _moved_axes(graph, node)
        inner = _predicate(graph, node.args[0]) if moved is not None else None
        return None if moved is None or inner is None else _renumbered(inner, moved)
    if node.target in _COPIES and isinstance(node.args[0], Ref):
        return _predicate(graph, node.args[0])
    if node.target == "aten.full.default" and len(node.args) > 1:
        return ("const", bool(node.args[1]))
    op = node.target.rsplit(".", 1)[0]
    if op in _COMPARE and len(node.args) == 2:
        left, right = _affine(graph, node.args[0]), _affine(graph, node.args[1])
        if left is None or right is None:
            return _selection_compared(graph, node.args[0], node.args[1], _COMPARE[op])
        return ("cmp", _combine(left, right, -1), _COMPARE[op])
    if node.target == _CAST and node.args:  # `.bool()`: nonzero
        return _selection_compared(graph, node.args[0], 0, "ne")
    if op in ("aten.logical_not", "aten.bitwise_not") and len(node.args) == 1:
        inner = _predicate(graph, node.args[0])
        return None if inner is None else ("not", inner)
    if op in ("aten.logical_and", "aten.bitwise_and", "aten.logical_or", "aten.bitwise_or"):
        first, second = (_predicate(graph, a) if isinstance(a, Ref) else None for a in node.args)
        if first is None or second is None:
            return None
        return ("and" if op.endswith("_and") else "or", first, second)
    return None


_TESTS = {
    "le": operator.le,
    "lt": operator.lt,
    "ge": operator.ge,
    "gt": operator.gt,
    "eq": operator.eq,
    "ne": operator.ne,
}
_SWAPPED = {"le": "ge", "lt": "gt", "ge": "le", "gt": "lt", "eq": "eq", "ne": "ne"}


def _selection_compared(graph: Graph, left: Any, right: Any, op: str) -> Predicate | None:
    """`where(p, a, b) op z` (or `z op where(..)`) for constants a, b, z as a predicate of p
    (nanoGPT's `tril(ones(n, n)) == 0`)."""
    if constant_value(graph, left) is not None:
        left, right, op = right, left, _SWAPPED[op]
    chosen, z = _selection(graph, left), constant_value(graph, right)
    if chosen is None or z is None:
        return None
    predicate, a, b = chosen
    if_true, if_false = _TESTS[op](a, z), _TESTS[op](b, z)
    if if_true == if_false:
        return ("const", if_true)
    return predicate if if_true else ("not", predicate)


def _selection(graph: Graph, value: Any) -> tuple[Predicate, float, float] | None:
    """A tensor `where(p, a, b)` of constants a, b (through copies and the views that keep
    positions) as p, a, b."""
    if not isinstance(value, Ref):
        return None
    node = graph.node(value)
    if node.target in _COPIES and isinstance(node.args[0], Ref):
        return _selection(graph, node.args[0])
    if node.kind == Kind.VIEW:
        moved = _moved_axes(graph, node)
        inner = _selection(graph, node.args[0]) if moved is not None else None
        if moved is None or inner is None:
            return None
        return _renumbered(inner[0], moved), inner[1], inner[2]
    if node.target != "aten.where.self" or len(node.args) != 3:
        return None
    a, b = constant_value(graph, node.args[1]), constant_value(graph, node.args[2])
    predicate = _predicate(graph, node.args[0]) if isinstance(node.args[0], Ref) else None
    if a is None or b is None or predicate is None:
        return None
    return predicate, a, b


def _renumbered(predicate: Predicate, moved: dict[int, int]) -> Predicate:
    """`predicate` with its forms' axes moved by a view (`_axis_map`)."""
    if predicate[0] == "cmp":
        form = {(moved.get(a, a) if a else 0): c for a, c in predicate[1].items()}
        return ("cmp", form, predicate[2])
    if predicate[0] == "const":
        return predicate
    return (predicate[0], *(_renumbered(p, moved) for p in predicate[1:]))


def _affine(graph: Graph, value: Any) -> Affine | None:
    """An integer-valued node (or a literal) as an affine form of its output's positions (an
    axis of size one carries no position: its coefficient is dropped)."""
    if isinstance(value, bool) or not isinstance(value, int | Ref):
        return None
    if isinstance(value, int):
        return {0: value}
    node = graph.node(value)
    form = _affine_of_node(graph, node)
    if form is None:
        return None
    shape = graph.meta(value).shape
    form = {a: c for a, c in form.items() if a == 0 or (-a <= len(shape) and shape[a] != 1)}
    # Every value in the node's integer range: no position wrapped around (`j * 2**30` in
    # int32 is no multiple of j).
    largest = abs(form.get(0, 0)) + sum(abs(c) * (shape[a] - 1) for a, c in form.items() if a)
    return form if largest < _INT_LIMIT.get(node.meta.dtype, 0) else None


def _affine_of_node(graph: Graph, node: Node) -> Affine | None:
    if node.meta.dtype not in ("int64", "int32"):
        return None
    constant = constant_value(graph, Ref(node.name))
    if constant is not None and constant == int(constant):
        return {0: int(constant)}
    if node.target == "prims.iota.default" and node.args:
        start = node.kwargs.get("start", 0)
        step = node.kwargs.get("step", 1)
        if isinstance(start, int) and isinstance(step, int):
            return {-1: step, 0: start}
        return None
    if node.kind == Kind.VIEW:
        return _affine_view(graph, node)
    op = node.target.rsplit(".", 1)[0]
    if op in ("aten.add", "aten.sub") and len(node.args) == 2:
        left, right = _affine(graph, node.args[0]), _affine(graph, node.args[1])
        if left is None or right is None or node.kwargs.get("alpha", 1) != 1:
            return None
        return _combine(left, right, 1 if op == "aten.add" else -1)
    if op == "aten.mul" and len(node.args) == 2:
        left, right = _affine(graph, node.args[0]), _affine(graph, node.args[1])
        if left is None or right is None:
            return None
        for a, b in ((left, right), (right, left)):
            if set(a) <= {0}:
                return {axis: c * a.get(0, 0) for axis, c in b.items()}
    return None


def _affine_view(graph: Graph, node: Node) -> Affine | None:
    """A view that inserts, broadcasts or drops size-one dims renumbers the axes (counted from
    the last); any other view is not followed."""
    moved = _moved_axes(graph, node)
    inner = _affine(graph, node.args[0]) if moved is not None else None
    if moved is None or inner is None:
        return None
    return {(moved[axis] if axis else 0): c for axis, c in inner.items()}


def _moved_axes(graph: Graph, node: Node) -> dict[int, int] | None:
    """For a view that adds, broadcasts or removes size-one dims only (a position keeps its
    axis), where its source's axes land (`_axis_map`); None for any other view."""
    source = node.args[0] if node.args else None
    if node.target not in _KEEPING_VIEWS or not isinstance(source, Ref):
        return None
    return _axis_map(list(graph.meta(source).shape), list(node.meta.shape), node.target)


_KEEPING_VIEWS = (
    "aten.unsqueeze.default",
    "aten.expand.default",
    "aten.squeeze.dim",
    "aten.squeeze.dims",
    "aten.squeeze.default",
    *_RESHAPES,
)


def _axis_map(before: list[int], after: list[int], target: str) -> dict[int, int] | None:
    """Where each axis of `before` longer than one lands in `after` (axes counted from the
    last, as broadcasting aligns them): the same place for an expand, else matched in order
    (the view only adds or removes size-one dims); None when the view does anything else."""
    long_before = [i - len(before) for i, size in enumerate(before) if size != 1]
    if target == "aten.expand.default":
        if len(after) < len(before):
            return None
        ok = all(after[len(after) + i] == before[len(before) + i] for i in long_before)
        return {i: i for i in long_before} if ok else None
    long_after = [i - len(after) for i, size in enumerate(after) if size != 1]
    sizes_before = [before[len(before) + i] for i in long_before]
    sizes_after = [after[len(after) + i] for i in long_after]
    if sizes_before != sizes_after:
        return None
    return dict(zip(long_before, long_after, strict=True))


def _combine(left: Affine, right: Affine, sign: int) -> Affine:
    out = dict(left)
    for axis, c in right.items():
        out[axis] = out.get(axis, 0) + sign * c
    return {axis: c for axis, c in out.items() if c or axis == 0}
