"""Attention as a call of torch's `scaled_dot_product_attention` (knob FUSE_SDPA).

Place in the flow: `schedule.schedule_graph` calls `sdpa_calls`, which asks `sdpa_form` about
every attention space `attention.attention_space` matches; with FUSE_SDPA on, `rewrite_as_sdpa`
turns the P @ V matmul into one torch call of `aten.scaled_dot_product_attention` on Q, K and
V, and the scores, maxima and sums are no longer computed (nothing else reads them: the
attention match guarantees it). What feeds Q, K and V and what reads the output stay fused
Triton kernels.

Why: on GPUs that call runs FlashAttention (or cuDNN's attention): warp-specialised,
asynchronous-copy kernels that the generated online-softmax kernel (`attention_emit.py`) does
not match (it ran at 0.40-0.52x of the call's speed on an H100, 2026-12-06), while a
reference that writes attention out (`softmax(q @ k.T / sqrt(d)).masked_fill(...) @ v`) is
what many model codes contain and what torch.compile's pattern matcher misses when the mask
is causal.

Only 16-bit Q, K and V (the call's FlashAttention kernels), and only what the call computes
exactly: between the score matmul and the softmax, nothing but casts that round at most to
Q's dtype, views that keep the [queries x keys] dims, scaling by positive
constants (the call's `scale`) and at most one position-only mask (`attention_mask.IndexMask`)
that keeps exactly the keys at or before each query (`is_causal`, top-left aligned as the
call defines it: `causal_mask.is_causal`); between the softmax and P @ V, the same casts
and views (a transposed or permuted P is no call). A bias, a soft cap, a window or any other mask
keeps the generated kernel.
"""

from dataclasses import dataclass

from kernelarc.kernelgen.attention import _guarded, attention_space
from kernelarc.kernelgen.attention_mask import IndexMask, constant_value, index_mask
from kernelarc.kernelgen.causal_mask import is_causal
from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref, contiguous, index_users
from kernelarc.kernelgen.space import AttentionSpace
from kernelarc.schema.op_graph import TensorMeta

SDPA_TARGET = "aten.scaled_dot_product_attention.default"
_CAST = "prims.convert_element_type.default"
#: Casts that round nothing of a 16-bit value (a cast to Q's own dtype is the rounding the
#: call's kernels do too; one to the other 16-bit type or to float8 is not).
_WIDE = ("float32", "float64")
_SIXTEEN_BITS = ("float16", "bfloat16")
_SCALE_MUL = ("aten.mul.Tensor", "aten.mul.Scalar")
_SCALE_DIV = ("aten.div.Tensor", "aten.div.Scalar")
_RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")


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
    score, anchor = graph.node(space.score), graph.node(space.anchor)
    dtype = graph.meta(score.args[0]).dtype
    mask = index_mask(graph, graph.node(space.row_max).args[0]) if space.mask else None
    if space.mask and mask is None:
        return None
    scale = _score_scale(graph, space, dtype, mask)
    if scale is None or {graph.meta(anchor.args[1]).dtype, anchor.meta.dtype} != {dtype}:
        return None  # the call computes in Q's dtype, as one dtype for Q, K, V and the output
    if not _plain_probabilities(graph, space, dtype):
        return None
    if dtype not in _SIXTEEN_BITS:
        # In float32 the call runs a slower kernel than FlashAttention's, and the 16-bit tensors
        # a reference widens (SDPA's traced math path does) are better served by the generated
        # kernel's 16-bit dots (FLASH_DOT16).
        return None
    if mask is None:
        return SdpaForm(scale=scale, causal=False)
    if not is_causal(graph, mask.condition, mask.keep):
        return None
    return SdpaForm(scale=scale, causal=True)


def _score_scale(
    graph: Graph, space: AttentionSpace, dtype: str, mask: IndexMask | None
) -> float | None:
    """The product of the positive constants the scores are scaled by on their way from the
    score matmul to the softmax, when nothing but casts to float32 / float64 / `dtype`, views
    and the position `mask` is on that way; else None."""
    score = graph.node(space.score)
    scale = 1.0
    node = graph.node(graph.node(space.row_max).args[0])
    while node.name != score.name:
        source = node.args[0] if node.args and isinstance(node.args[0], Ref) else None
        if source is not None and mask is not None and node.name == mask.node:
            source = mask.scores
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
            source = source if node.meta.dtype in (*_WIDE, dtype) else None
        elif node.kind == Kind.VIEW:
            source = source if source is not None and _keeps_last_two(graph, node, source) else None
        else:
            source = None
        if source is None:
            return None
        node = graph.node(source)
    return scale


def _plain_probabilities(graph: Graph, space: AttentionSpace, dtype: str) -> bool:
    """P @ V reads the softmax's probabilities where the score matmul wrote them (views that
    keep the [queries x keys] dims: no transpose or permutation, which the attention match lets
    through for the emitter to judge) rounded at most to `dtype`, at most behind the finite-row
    guard."""
    node = graph.node(graph.node(space.anchor).args[0])
    while not (node.target == "aten.div.Tensor" and node.args[1:] == (Ref(space.row_sum),)):
        source = node.args[0] if node.args and isinstance(node.args[0], Ref) else None
        if source is not None and node.target == _CAST:
            source = source if node.meta.dtype in (*_WIDE, dtype) else None
        elif source is not None and node.kind == Kind.VIEW:
            source = source if _keeps_last_two(graph, node, source) else None
        else:
            source = _guarded(graph, node, space.row_any) if space.row_any else None
        if source is None:
            return False
        node = graph.node(source)
    return True


def rewrite_as_sdpa(graph: Graph, space: AttentionSpace, form: SdpaForm) -> None:
    """Make the P @ V matmul of `space` a view of one `scaled_dot_product_attention` call on
    the score matmul's operands (K transposed back) and V, each given a leading dim of one:
    the call's fused kernels (FlashAttention, memory-efficient, cuDNN) take 4-d tensors only,
    and a 3-d [batch * heads, rows, head dim] call runs the math path, which stores the
    scores. The scores become dead."""
    score = graph.node(space.score)
    anchor = graph.node(space.anchor)
    q, k_t, v = score.args[0], score.args[1], anchor.args[1]
    key = _view(graph, "sdpa_key", "aten.transpose.int", k_t, _swapped_last_two(graph.meta(k_t)))
    metas = (graph.meta(q), key.meta, graph.meta(v))
    operands = [
        _view(graph, "sdpa_in", "aten.unsqueeze.default", ref, _with_leading_one(meta))
        for ref, meta in zip((q, Ref(key.name), v), metas, strict=True)
    ]
    meta = anchor.meta
    call = Node(
        graph.fresh("sdpa"),
        SDPA_TARGET,
        Kind.EXTERN,
        (*(Ref(n.name) for n in operands), None, 0.0, form.causal),
        {"scale": form.scale},
        (contiguous([1, *meta.shape], meta.dtype),),
    )
    anchor.target, anchor.kind = "aten.squeeze.dim", Kind.VIEW
    anchor.args, anchor.kwargs = (Ref(call.name), 0), {}
    added = [key, *operands, call]
    graph.nodes = {
        new.name: new
        for name, old in graph.nodes.items()
        for new in ([*added, old] if name == anchor.name else [old])
    }
    index_users(graph)
    graph.notes.append(
        "attention is one scaled_dot_product_attention call" + (" (causal)" if form.causal else "")
    )


def _view(graph: Graph, stem: str, target: str, source: Ref, meta: TensorMeta) -> Node:
    """A new view node of `source` (not yet in the graph) with output `meta`: a transpose of
    the last two dims, or an unsqueeze at 0."""
    rank = len(meta.shape)
    args = (source, rank - 2, rank - 1) if target == "aten.transpose.int" else (source, 0)
    return Node(graph.fresh(stem), target, Kind.VIEW, args, {}, (meta,))


def _swapped_last_two(meta: TensorMeta) -> TensorMeta:
    shape, stride = list(meta.shape), list(meta.stride)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    stride[-1], stride[-2] = stride[-2], stride[-1]
    return TensorMeta(shape=shape, stride=stride, dtype=meta.dtype, offset=meta.offset)


def _with_leading_one(meta: TensorMeta) -> TensorMeta:
    first = meta.stride[0] * meta.shape[0] if meta.shape else 1
    return TensorMeta(
        shape=[1, *meta.shape], stride=[first, *meta.stride], dtype=meta.dtype, offset=meta.offset
    )


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
