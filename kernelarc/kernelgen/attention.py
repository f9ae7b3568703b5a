"""Attention as one kernel: `softmax(f(Q @ K^T)) @ V` with the scores never stored.

Place in the flow: the scheduler asks `attention_space` for every batched matmul it anchors a
kernel on (`schedule._gemm`, knob FLASH). When the matmul's first operand is a softmax over
the last dim of scores that come from another batched matmul through pointwise ops only (a
scale, a causal or padding mask, a bias, dtype casts), in exactly the form
`exp(s - max(s)) / sum(exp(s - max(s)))` (at most behind the finite-row guard of
`scaled_dot_product_attention`'s math path), and nothing else reads what is computed from the
scores (a mask or bias made from positions or other inputs may be shared: it is recomputed),
the matmul gets an `AttentionSpace` and `attention_emit` writes the
online-softmax kernel (as FlashAttention): per block of query rows, a loop over blocks of keys
computes the score tile with `tl.dot`, runs the score ops on it, keeps a running row maximum
and sum, and accumulates the probabilities times V, rescaled when the maximum grows.

Why: without it the generator stores the [rows x keys] scores once and reads them twice (a
stats kernel and the P @ V GEMM recomputing P), which is bound by memory traffic of order
L^2 per head, while the kernel here reads Q, K and V only; torch.compile's pattern matcher
turns the same references into a flash-attention call. A graph that does not match exactly
keeps the three-kernel plan: nothing here is a guess.
"""

from kernelarc.kernelgen.attention_mask import constant_value, index_mask
from kernelarc.kernelgen.gemm_emit import gemm_space
from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref, walk_up
from kernelarc.kernelgen.space import AttentionSpace

#: Largest head dim (of Q/K and of V) held in one tile: a program keeps a [rows x D] query
#: tile and a [rows x Dv] float32 accumulator in registers.
MAX_HEAD_DIM = 256
_BMM = "aten.bmm.default"
#: Nodes the score ops and the softmax may consist of between the two matmuls.
_THROUGH = (Kind.POINTWISE, Kind.VIEW, Kind.FACTORY)
#: Nodes read as they are (graph inputs, scalars, constants, torch calls' results).
_LEAVES = (Kind.INPUT, Kind.SCALAR, Kind.CONSTANT, Kind.EXTERN)
_CAST = "prims.convert_element_type.default"
_NOT = ("aten.logical_not.default", "aten.bitwise_not.default")


def attention_space(graph: Graph, node: Node, materialized: set[str]) -> AttentionSpace | None:
    """The attention space anchored on `node`, or None when the graph around it is not
    `softmax(f(bmm(.., ..)), dim=-1) @ V` with every intermediate computed only for it (see the
    module docstring)."""
    space = gemm_space(graph, node)
    if node.target != _BMM or space is None or not space.batch or space.n > MAX_HEAD_DIM:
        return None
    probs = node.args[0]
    reached = _frontier(graph, probs, materialized)
    maxes = [n for n in reached if _last_dim_reduction(graph, n, "max", space.k)]
    sums = [n for n in reached if _last_dim_reduction(graph, n, "sum", space.k)]
    if len(maxes) != 1 or len(sums) != 1:
        return None
    row_max, row_sum = maxes[0], sums[0]
    behind_max = _frontier(graph, row_max.args[0], materialized)
    if len(behind_max) != 1 or behind_max[0].target != _BMM:
        return None
    score = behind_max[0]
    guards = [n for n in reached if _finite_row_guard(graph, n, row_max.args[0])]
    row_any = guards[0].name if len(guards) == 1 else ""
    if {n.name for n in reached} - {row_max.name, row_sum.name, score.name, row_any}:
        return None  # the probabilities read another reduction or matmul
    behind_sum = _frontier(graph, row_sum.args[0], materialized)
    if {n.name for n in behind_sum} != {score.name, row_max.name}:
        return None
    scores = gemm_space(graph, score)
    if (
        scores is None
        or (scores.batch, scores.m, scores.n) != (space.batch, space.m, space.k)
        or scores.k > MAX_HEAD_DIM
        or graph.node(score.args[0]).meta.dtype != graph.node(score.args[1]).meta.dtype
    ):
        return None
    if {score.name, row_max.name, row_sum.name, row_any} & materialized:
        return None
    if not _softmax_form(graph, probs, row_max, row_sum, row_any):
        return None
    inside = _between(graph, probs, {score.name}, materialized) | {score.name}
    readers = inside | {node.name}
    # Only what is computed from the scores must be read nowhere else; a mask or bias made
    # from positions or other inputs (one causal mask for every layer) is recomputed here.
    from_scores = _from_scores(graph, inside, score.name)
    outputs = {out.node for out in graph.outputs if isinstance(out, Ref)}
    if from_scores & outputs or any(
        u not in readers for n in from_scores for u in graph.users.get(n, ())
    ):
        return None  # a score, maximum, sum or probability is read elsewhere: stored anyway
    mask = index_mask(graph, row_max.args[0])
    return AttentionSpace(
        mask=mask.node if mask else "",
        mask_condition=mask.condition.node if mask else "",
        mask_keep=mask.keep if mask else True,
        anchor=space.anchor,
        batch=space.batch,
        m=space.m,
        n=space.n,
        k=space.k,
        score=score.name,
        d=scores.k,
        row_max=row_max.name,
        row_sum=row_sum.name,
        row_any=row_any,
    )


def _softmax_form(graph: Graph, probs: Ref, row_max: Node, row_sum: Node, row_any: str) -> bool:
    """The probabilities are exactly `exp(s - max(s)) / sum(exp(s - max(s)))` of the scores the
    maximum reads, through views and casts, and at most the finite-row guard (`where(no finite
    score, 0, p)`): the only form the online softmax computes. A temperature after the
    maximum, a sum plus one, a numerator of other scores than the maximum's or a guard with
    another fallback than 0 are something else."""
    exps = row_sum.args[0]
    exp = graph.node(exps)
    shifted = graph.node(exp.args[0]) if exp.args and isinstance(exp.args[0], Ref) else None
    if (
        exp.target != "aten.exp.default"
        or shifted is None
        or shifted.target != "aten.sub.Tensor"
        or tuple(shifted.args) != (row_max.args[0], Ref(row_max.name))
    ):
        return False
    node = graph.node(probs)
    while True:
        source = node.args[0] if node.args and isinstance(node.args[0], Ref) else None
        if source is not None and (node.kind == Kind.VIEW or node.target == _CAST):
            node = graph.node(source)
            continue
        kept = _guarded(graph, node, row_any) if row_any else None
        if kept is None:
            break
        node = graph.node(kept)
    return node.target == "aten.div.Tensor" and tuple(node.args) == (exps, Ref(row_sum.name))


def _guarded(graph: Graph, node: Node, row_any: str) -> Ref | None:
    """The probabilities a finite-row guard passes on: `where(not any, 0, p)` or
    `where(any, p, 0)` gives p; anything else None."""
    if node.target != "aten.where.self" or len(node.args) != 3:
        return None
    condition, when_true, when_false = node.args
    if not isinstance(condition, Ref):
        return None
    test = graph.node(condition)
    negated = test.target in _NOT and test.args and test.args[0] == Ref(row_any)
    if negated and constant_value(graph, when_true) == 0.0 and isinstance(when_false, Ref):
        return when_false
    if condition == Ref(row_any) and constant_value(graph, when_false) == 0.0:
        return when_true if isinstance(when_true, Ref) else None
    return None


def _finite_row_guard(graph: Graph, node: Node, scores: Ref) -> bool:
    """`node` is any(scores != -inf) over the last dim: `logical_not(eq(scores, -inf))` or
    `ne(scores, -inf)` reduced by `any`."""
    if node.kind != Kind.REDUCTION or node.reduce_op != "any" or not node.args:
        return False
    shape = graph.meta(node.args[0]).shape
    if node.dims != (len(shape) - 1,):
        return False
    test = graph.node(node.args[0])
    if test.target == "aten.logical_not.default" and isinstance(test.args[0], Ref):
        equal = graph.node(test.args[0])
        return equal.target == "aten.eq.Scalar" and _is_minus_inf_test(equal, scores)
    return test.target == "aten.ne.Scalar" and _is_minus_inf_test(test, scores)


def _is_minus_inf_test(node: Node, scores: Ref) -> bool:
    value = node.args[1] if len(node.args) > 1 else None
    return node.args[0] == scores and isinstance(value, float) and value == float("-inf")


def _last_dim_reduction(graph: Graph, node: Node, op: str, keys: int) -> bool:
    if node.kind != Kind.REDUCTION or node.reduce_op != op or not node.args:
        return False
    shape = graph.meta(node.args[0]).shape
    return node.dims == (len(shape) - 1,) and shape[-1] == keys


def _frontier(graph: Graph, start: Ref, materialized: set[str]) -> list[Node]:
    """The first nodes that are neither pointwise, views nor factories on every path up from
    `start` (stored values and graph inputs among them), once each, in graph order."""

    def through(node: Node) -> bool:
        return node.name not in materialized and node.kind in _THROUGH

    found = [
        node
        for node in walk_up(graph, start.node, through)
        if not through(node) and (node.name in materialized or node.kind not in _LEAVES)
    ]
    order = list(graph.nodes)
    return sorted(found, key=lambda n: order.index(n.name))


def _from_scores(graph: Graph, inside: set[str], score: str) -> set[str]:
    """The nodes of `inside` computed from `score` (itself included)."""
    found = {score}
    for name in graph.nodes:  # graph order: operands before their users
        if name in inside and any(ref.node in found for ref in graph.nodes[name].refs()):
            found.add(name)
    return found


def _between(graph: Graph, start: Ref, stop: set[str], materialized: set[str]) -> set[str]:
    """Every node computed from `start` up to (not beyond) `stop` and the buffers: the score
    ops, the reductions and the probabilities."""

    def inside(node: Node) -> bool:
        return node.name not in stop and node.name not in materialized and node.kind not in _LEAVES

    return {node.name for node in walk_up(graph, start.node, inside) if inside(node)}
