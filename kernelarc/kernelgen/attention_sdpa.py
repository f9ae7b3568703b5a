"""Attention as a call of torch's `scaled_dot_product_attention` (knob FUSE_SDPA).

Place in the flow: `schedule.schedule_graph` calls `sdpa_calls`, which asks `sdpa_form` about
every attention space `attention.attention_space` matches; with FUSE_SDPA on, `rewrite_as_sdpa`
turns the P @ V matmul into one torch call of `aten.scaled_dot_product_attention` on Q, K and
V, and the scores, maxima and sums are no longer computed (nothing else reads them: the
attention match guarantees it). What feeds Q, K and V and what reads the output stay fused
Triton kernels.

Why: on GPUs that call runs FlashAttention (or cuDNN's attention): warp-specialised,
asynchronous-copy kernels that the generated online-softmax kernel (`attention_emit.py`) does
not match (0.40-0.52x of it on an H100, 2026-12-06), while a reference that writes attention
out (`softmax(q @ k.T / sqrt(d)).masked_fill(...) @ v`) is what many model codes contain and
what torch.compile's pattern matcher misses when the mask is causal.

Only 16-bit Q, K and V (the call's FlashAttention kernels), and only what the call computes
exactly: between the score matmul and the softmax,
nothing but float casts, views that keep the [queries x keys] dims, scaling by positive
constants (the call's `scale`) and at most one position-only mask (`attention_mask.IndexMask`)
that keeps exactly the keys at or before each query (`is_causal`, top-left aligned as the
call defines it). The mask's condition is read as a comparison of integer affine forms of the
query and key positions (`_affine` / `_predicate`): `arange` / `iota`, sums and constant
multiples of them, comparisons, logical ops, and the views that only add, broadcast or move
size-one dims. A bias, a soft cap, a window or any other mask keeps the generated kernel.
"""

from dataclasses import dataclass
from typing import Any

from kernelarc.kernelgen.attention import attention_space
from kernelarc.kernelgen.attention_mask import constant_value, index_mask
from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref, index_users
from kernelarc.kernelgen.space import AttentionSpace
from kernelarc.schema.op_graph import TensorMeta

SDPA_TARGET = "aten.scaled_dot_product_attention.default"
_CAST = "prims.convert_element_type.default"
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_SIXTEEN_BITS = ("float16", "bfloat16")
_SCALE_MUL = ("aten.mul.Tensor", "aten.mul.Scalar")
_SCALE_DIV = ("aten.div.Tensor", "aten.div.Scalar")
_RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
_COPIES = ("aten.lift_fresh_copy.default", "aten.alias.default", "aten.clone.default")


@dataclass(frozen=True)
class SdpaForm:
    """What the call needs besides Q, K and V."""

    scale: float
    causal: bool


def sdpa_calls(graph: Graph, live: list[str], *, rewrite: bool) -> bool:
    """Count the attentions among the `live` nodes that one call computes exactly (in
    `graph.sdpa_forms`) and, with `rewrite`, make each one that call; whether any was."""
    forms = []
    for name in live:
        node = graph.nodes[name]
        space = attention_space(graph, node, set()) if node.kind == Kind.MATMUL else None
        form = sdpa_form(graph, space) if space is not None else None
        if space is not None and form is not None:
            forms.append((space, form))
    graph.sdpa_forms = len(forms)
    if rewrite:
        for space, form in forms:
            rewrite_as_sdpa(graph, space, form)
    return rewrite and bool(forms)


def sdpa_form(graph: Graph, space: AttentionSpace) -> SdpaForm | None:
    """The call's scale and causal flag when the attention is exactly
    `softmax(scale * Q @ K^T [causal mask]) @ V` (module docstring), else None."""
    scale = _score_scale(graph, space)
    score, anchor = graph.node(space.score), graph.node(space.anchor)
    dtype = graph.meta(score.args[0]).dtype
    if scale is None or {graph.meta(anchor.args[1]).dtype, anchor.meta.dtype} != {dtype}:
        return None  # the call computes in Q's dtype, as one dtype for Q, K, V and the output
    if dtype not in _SIXTEEN_BITS:
        # In float32 the call runs a slower kernel than FlashAttention's, and the 16-bit tensors
        # a reference widens (SDPA's traced math path does) are better served by the generated
        # kernel's 16-bit dots (FLASH_DOT16).
        return None
    if not space.mask:
        return SdpaForm(scale=scale, causal=False)
    mask = index_mask(graph, graph.node(space.row_max).args[0])
    if mask is None or not _is_causal(graph, mask.condition, mask.keep):
        return None
    return SdpaForm(scale=scale, causal=True)


def _score_scale(graph: Graph, space: AttentionSpace) -> float | None:
    """The product of the positive constants the scores are scaled by on their way from the
    score matmul to the softmax, when nothing but casts, views and the position mask is on
    that way; else None."""
    score = graph.node(space.score)
    scale = 1.0
    node = graph.node(graph.node(space.row_max).args[0])
    while node.name != score.name:
        source = node.args[0] if node.args and isinstance(node.args[0], Ref) else None
        if source is not None and node.name == space.mask:
            source = _scores_behind_mask(graph, node)
        elif node.target in _SCALE_MUL + _SCALE_DIV and len(node.args) == 2:
            first, second = node.args
            if node.target in _SCALE_MUL and constant_value(graph, first) is not None:
                first, second = second, first  # `scale * s`
            factor = constant_value(graph, second)
            if factor is None or factor <= 0 or not isinstance(first, Ref):
                return None
            scale = scale * factor if node.target in _SCALE_MUL else scale / factor
            source = first
        elif node.target == _CAST:
            source = source if node.meta.dtype in _FLOATS else None
        elif node.kind == Kind.VIEW:
            source = source if source is not None and _keeps_last_two(graph, node, source) else None
        else:
            source = None
        if source is None:
            return None
        node = graph.node(source)
    return scale


def rewrite_as_sdpa(graph: Graph, space: AttentionSpace, form: SdpaForm) -> None:
    """Make the P @ V matmul of `space` one `scaled_dot_product_attention` call on the score
    matmul's operands (K transposed back by a view) and V; the scores become dead."""
    score = graph.node(space.score)
    anchor = graph.node(space.anchor)
    q, k_t = score.args[0], score.args[1]
    k_meta = graph.meta(k_t)
    shape, stride = list(k_meta.shape), list(k_meta.stride)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    stride[-1], stride[-2] = stride[-2], stride[-1]
    meta = TensorMeta(shape=shape, stride=stride, dtype=k_meta.dtype, offset=k_meta.offset)
    rank = len(shape)
    key = Node(
        graph.fresh("sdpa_key"),
        "aten.transpose.int",
        Kind.VIEW,
        (k_t, rank - 2, rank - 1),
        {},
        (meta,),
    )
    anchor.target = SDPA_TARGET
    anchor.kind = Kind.EXTERN
    anchor.args = (q, Ref(key.name), anchor.args[1], None, 0.0, form.causal)
    anchor.kwargs = {"scale": form.scale}
    graph.nodes = {
        new.name: new
        for name, old in graph.nodes.items()
        for new in ([key, old] if name == anchor.name else [old])
    }
    index_users(graph)
    graph.notes.append(
        "attention is one scaled_dot_product_attention call" + (" (causal)" if form.causal else "")
    )


def _scores_behind_mask(graph: Graph, node: Node) -> Ref | None:
    """The scores a position mask writes -inf into: the operand of `where(c, -inf, s)` /
    `where(c, s, -inf)` / `s + where(c, 0, -inf)` that is not the constant or the mask."""
    if node.target == "aten.where.self" and len(node.args) == 3:
        for value in node.args[1:]:
            if isinstance(value, Ref) and constant_value(graph, value) is None:
                return value
        return None
    if node.target == "aten.add.Tensor":
        for value in node.args:
            if isinstance(value, Ref) and graph.node(value).target != "aten.where.self":
                return value
    return None


def _keeps_last_two(graph: Graph, node: Node, source: Ref) -> bool:
    """A reshape or no-op expand whose [.., queries, keys] dims are its source's."""
    if node.target not in _RESHAPES and node.target != "aten.expand.default":
        return False
    before, after = graph.meta(source).shape, node.meta.shape
    if len(before) < 2 or len(after) < 2:
        return False
    if node.target == "aten.expand.default":
        return list(before) == list(after)
    return list(before[-2:]) == list(after[-2:])


# --- the mask's condition as integer affine forms of the positions ----------------------------

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


def _is_causal(graph: Graph, condition: Ref, keep: bool) -> bool:
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
        if node.target not in _KEEPING_VIEWS or not isinstance(node.args[0], Ref):
            return None
        before = list(graph.meta(node.args[0]).shape)
        moved = _axis_map(before, list(node.meta.shape), node.target)
        inner = _predicate(graph, node.args[0])
        return None if moved is None or inner is None else _renumbered(inner, moved)
    if node.target in _COPIES and isinstance(node.args[0], Ref):
        return _predicate(graph, node.args[0])
    if node.target == "aten.full.default" and len(node.args) > 1:
        return ("const", bool(node.args[1]))
    op = node.target.rsplit(".", 1)[0]
    if op in _COMPARE and len(node.args) == 2:
        left, right = _affine(graph, node.args[0]), _affine(graph, node.args[1])
        if left is None or right is None:
            return None
        return ("cmp", _combine(left, right, -1), _COMPARE[op])
    if op in ("aten.logical_not", "aten.bitwise_not") and len(node.args) == 1:
        inner = _predicate(graph, node.args[0])
        return None if inner is None else ("not", inner)
    if op in ("aten.logical_and", "aten.bitwise_and", "aten.logical_or", "aten.bitwise_or"):
        first, second = (_predicate(graph, a) if isinstance(a, Ref) else None for a in node.args)
        if first is None or second is None:
            return None
        return ("and" if op.endswith("_and") else "or", first, second)
    return None


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
    form = _affine_of_node(graph, graph.node(value))
    if form is None:
        return None
    shape = graph.meta(value).shape
    return {a: c for a, c in form.items() if a == 0 or (-a <= len(shape) and shape[a] != 1)}


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
    source = node.args[0]
    inner = _affine(graph, source)
    if inner is None or not _axes_kept(graph, node):
        return None
    moved = _axis_map(list(graph.meta(source).shape), list(node.meta.shape), node.target)
    if moved is None:
        return None
    return {(moved[axis] if axis else 0): c for axis, c in inner.items()}


def _axes_kept(graph: Graph, node: Node) -> bool:
    """The view adds, broadcasts or removes size-one dims only (a position keeps its axis)."""
    if node.target not in _KEEPING_VIEWS:
        return False
    before = list(graph.meta(node.args[0]).shape)
    return _axis_map(before, list(node.meta.shape), node.target) is not None


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
