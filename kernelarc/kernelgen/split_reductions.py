"""Split reductions: a reduction with few outputs and long rows becomes two reductions.

Place in the flow: `kernelgen.generate` runs `split_reductions` on every lowered graph (after
`graph_build.build_graph`, before `schedule.schedule_graph`). A reduction kernel runs one program
per few output rows, so a reduction to a handful of values (a loss to a scalar, BatchNorm's
per-channel statistics over (N, H, W), a global max) occupies a handful of SMs however long its
rows are. As Inductor does, such a reduction over R elements per output is rewritten into
index algebra and two reductions of the same op:

    source (any layout)   --permute-->   kept dims first, reduced dims last  (a view)
                          --reshape-->   (X, S, R/S)                         (a view)
    stage 1: reduce the last dim   ->    (X, S, 1)   partials, X*S rows of R/S elements
    stage 2: reduce dim 1          ->    (X, 1, 1)   X rows of S partials
                          --reshape-->   the original output shape           (a view)

The views are index maps, never copies: the pointwise producers of the source fuse into the
stage-1 kernel, which reads the source once. The final view keeps the original node's name, so
its users do not change. Only ops that combine associatively are split (sum, prod, max, min,
any, all; never an arg-reduction, whose index would need carrying); a mean is lowered to a sum
first. A variance's Welford pair (`welford_mean`, `welford_m2` of the same rows) splits as one:
stage 1 computes both per chunk of c = R/S elements in one pass; stage 2 merges the S partials
of equal count c exactly (Chan et al.): mean = the mean of the partial means, M2 = the sum of
the partial M2s + c * the sum of the squared deviations of the partial means from the mean
(itself a Welford pair over the partial means, then a pointwise multiply-add). With
VAR_ONEPASS off the variance is two sums, each split alike. Partials are kept in the compute
dtype (float32 for 16-bit floats, int64 for integer sums, bool for any/all); stage 2 rounds
once to the output's dtype. The nodes are then reordered so that stage-1 reductions come as
early as they can: reductions of the same rows (a loss's several sums) become adjacent roots
and share one stage-1 kernel, and their stage 2s one more.

A reduction qualifies when it has fewer outputs than SPLIT_MAX_OUTPUTS (2 per SM: even at one
output per program, the `ROWS` knob's least, SMs would idle; with more outputs lowering `ROWS`
is the better cure). The split factor S: a divisor of R near the `SPLIT_R` knob (at most
R / SPLIT_MIN_CHUNK, so a partial still reduces a useful amount), preferring one that cuts R
on the reduced dims' boundaries (then stage 1's loads are plain digits of its index variables);
no divisor within a factor of 4 of the target (e.g. R prime): no split.

A column reduction (`Space.column`: kept dims after the last reduced one, e.g. BatchNorm1d's
mean over dim 0 of (N, C)) keeps its contiguous inner dims last, so both stages stay column
reductions with coalesced loads:

    source  --permute-->  (outer kept, reduced, inner)  --reshape-->  (O, S, R/S, I)
    stage 1: reduce dim 2  ->  (O, S, 1, I);   stage 2: reduce dim 1  ->  (O, 1, 1, I)

It qualifies when its kernel would run fewer programs (O times I/COL_X tiles) than
SPLIT_MAX_OUTPUTS, with S near the `SPLIT_COL` knob and each partial reducing at least
SPLIT_MIN_ROWS rows.
"""

import heapq
import math
from dataclasses import dataclass

from kernelarc.kernelgen.conv_layout import memory_order
from kernelarc.kernelgen.graph_ir import (
    WELFORD_OPS,
    Graph,
    Kind,
    Node,
    Ref,
    contiguous,
    index_users,
)
from kernelarc.kernelgen.knobs import (
    KNOB_VALUES,
    SPLIT_MAX_OUTPUTS,
    SPLIT_MIN_CHUNK,
    SPLIT_MIN_ROWS,
    Device,
    GenKnobs,
    column_xblock,
)
from kernelarc.kernelgen.pointwise_ops import compute_dtype
from kernelarc.kernelgen.space import Space

SPLIT_OPS = frozenset({"sum", "prod", "max", "min", "any", "all"})
"""Reductions whose partial results combine with the same op."""
SPLIT_PAIR_OPS = WELFORD_OPS
"""Reductions split as a pair (stage 2 merges partial statistics, see the module docstring)."""

_SLACK = 4
"""A divisor further than this factor from the target split is not reasonable."""


@dataclass(frozen=True)
class SplitResult:
    """What the pass did to one graph."""

    split: tuple[str, ...]
    """Ops of the reductions split (graph order)."""
    splittable: bool
    """Some row reduction would be split at some value of `SPLIT_R` (the knob matters)."""
    column_splittable: bool = False
    """Some column reduction would be split at some value of `SPLIT_COL`."""


def split_reductions(graph: Graph, knobs: GenKnobs, device: Device) -> SplitResult:
    """Rewrite every qualifying reduction of `graph` in place (see the module docstring)."""
    factors: dict[str, int] = {}
    splittable = column_splittable = False
    for node in graph.nodes.values():
        if node.kind != Kind.REDUCTION or node.reduce_op not in SPLIT_OPS | SPLIT_PAIR_OPS:
            continue
        space = _space(graph, node)
        xnumel, reduced = space.xnumel, space.reduced_shape
        if space.column:
            programs = space.ynumel * -(-space.inner // column_xblock(space.inner, knobs))
            column_splittable = column_splittable or any(
                column_split_factor(programs, space.rnumel, value, device) > 1
                for value in KNOB_VALUES["SPLIT_COL"][device]
            )
            factor = column_split_factor(programs, space.rnumel, int(knobs["SPLIT_COL"]), device)
            if factor > 1:
                factors[node.name] = factor
            continue
        splittable = splittable or any(
            split_factor(xnumel, reduced, value, device) > 1
            for value in KNOB_VALUES["SPLIT_R"][device]
        )
        factor = split_factor(xnumel, reduced, int(knobs["SPLIT_R"]), device)
        if factor > 1:
            factors[node.name] = factor
    ops = tuple(graph.nodes[name].reduce_op for name in factors)
    if factors:
        _rewrite(graph, factors)
    return SplitResult(split=ops, splittable=splittable, column_splittable=column_splittable)


def split_factor(xnumel: int, reduced: tuple[int, ...], target: int, device: Device) -> int:
    """S, the partials per output of a reduction to `xnumel` outputs over dims of sizes
    `reduced`, for a target of `target` partials (1: no split)."""
    if target < 2 or not 0 < xnumel < SPLIT_MAX_OUTPUTS[device]:
        return 1  # off, or enough outputs to fill the device at one per program
    rnumel = math.prod(reduced)
    most = rnumel // SPLIT_MIN_CHUNK[device]
    goal = min(target, most)
    if goal < 2:
        return 1
    inners = [math.prod(reduced[i + 1 :]) for i in range(len(reduced))]
    best: tuple[bool, float, int] | None = None
    for factor in range(max(2, goal // _SLACK), min(goal * _SLACK, most) + 1):
        if rnumel % factor:
            continue
        chunk = rnumel // factor
        # A chunk that each dim's stride divides or is divided by keeps the loads' index
        # algebra to plain digits (no opaque divisions).
        ragged = not all(chunk % n == 0 or n % chunk == 0 for n in inners)
        key = (ragged, abs(math.log(factor / goal)), -factor)
        if best is None or key < best:
            best = key
    return 1 if best is None else -best[2]


def column_split_factor(programs: int, rnumel: int, target: int, device: Device) -> int:
    """S, the partials per output of a column reduction over `rnumel` rows whose kernel runs
    `programs` programs, for a target of `target` partials (1: no split). S divides `rnumel`
    (the split is a reshape)."""
    if target < 2 or programs >= SPLIT_MAX_OUTPUTS[device]:
        return 1
    most = rnumel // SPLIT_MIN_ROWS[device]
    goal = min(target, most)
    if goal < 2:
        return 1
    best: tuple[float, int] | None = None
    for factor in range(max(2, goal // _SLACK), min(goal * _SLACK, most) + 1):
        if rnumel % factor == 0:
            key = (abs(math.log(factor / goal)), -factor)
            if best is None or key < best:
                best = key
    return 1 if best is None else -best[1]


def _rewrite(graph: Graph, factors: dict[str, int]) -> None:
    instead: dict[str, list[Node]] = {}
    firsts: set[str] = set()
    for name, factor in factors.items():
        node = graph.nodes[name]
        if name in instead:
            continue  # split with its Welford partner
        if node.reduce_op in SPLIT_PAIR_OPS:
            group = [
                n
                for n in graph.nodes.values()
                if n.reduce_op in SPLIT_PAIR_OPS
                and n.args[0] == node.args[0]
                and n.dims == node.dims
            ]
            nodes, stage1 = _split_welford(graph, group, factor)
            instead.update({n.name: [] for n in group})
            instead[group[0].name] = nodes
            firsts.update(stage1)
            continue
        nodes = _split(graph, node, factor)
        instead[name] = nodes
        firsts.add(nodes[-3].name)
    graph.nodes = {
        new.name: new for name, node in graph.nodes.items() for new in instead.get(name, [node])
    }
    _stage1_first(graph, firsts)
    index_users(graph)


def _stage1_first(graph: Graph, firsts: set[str]) -> None:
    """Reorder the nodes (topologically) so that the stage-1 reductions and what they read
    come as early as they can, the rest in its order: stage-1 reductions of the same rows
    become adjacent roots (one kernel), and so do their stage 2s. Torch calls keep their
    order (random ops draw in sequence)."""
    names = list(graph.nodes)
    position = {name: i for i, name in enumerate(names)}
    deps = {n: {r.node for r in graph.nodes[n].refs() if r.node in position} for n in names}
    previous = ""
    for name in names:
        if graph.nodes[name].kind == Kind.EXTERN:
            if previous:
                deps[name].add(previous)
            previous = name
    early: set[str] = set()
    stack = list(firsts)
    while stack:
        name = stack.pop()
        if name not in early:
            early.add(name)
            stack.extend(deps[name])
    users: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for dep in deps[name]:
            users[dep].append(name)
    waiting = {name: len(deps[name]) for name in names}
    ready = [(name not in early, position[name], name) for name in names if not waiting[name]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, _, name = heapq.heappop(ready)
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, (user not in early, position[user], user))
    graph.nodes = {name: graph.nodes[name] for name in order}


def _split(graph: Graph, node: Node, factor: int) -> list[Node]:
    """The views, stage 1, stage 2 and the view to the output's shape, which takes the
    reduction's name."""
    first, current, partials, outer_shape = _split_views(graph, node, factor)
    stage1 = _reduction(graph, node, current, partials, (2,))
    stage2 = _reduction(graph, node, Ref(stage1.name), outer_shape, (1,))
    return [*first, stage1, stage2, _back(node, Ref(stage2.name))]


def _split_welford(graph: Graph, group: list[Node], factor: int) -> tuple[list[Node], list[str]]:
    """A Welford pair (or a lone M2) in two stages (see the module docstring): the new nodes,
    the views to the outputs' shapes last (taking the group's names), and the stage-1 names."""
    node = group[0]
    first, current, partials, outer_shape = _split_views(graph, node, factor)
    chunk = Space(tuple(graph.meta(node.args[0]).shape), node.dims).rnumel // factor
    mean1 = _reduction(graph, node, current, partials, (2,), "welford_mean")
    m2_1 = _reduction(graph, node, current, partials, (2,), "welford_m2")
    mean2 = _reduction(graph, node, Ref(mean1.name), outer_shape, (1,), "welford_mean")
    spread = _reduction(graph, node, Ref(mean1.name), outer_shape, (1,), "welford_m2")
    inner = _reduction(graph, node, Ref(m2_1.name), outer_shape, (1,), "sum")
    meta = spread.meta
    scaled = Node(
        graph.fresh(node.name),
        "aten.mul.Tensor",
        Kind.POINTWISE,
        (Ref(spread.name), float(chunk)),
        {},
        (meta,),
    )
    m2 = Node(
        graph.fresh(node.name),
        "aten.add.Tensor",
        Kind.POINTWISE,
        (Ref(inner.name), Ref(scaled.name)),
        {},
        (meta,),
    )
    nodes = [*first, mean1, m2_1, mean2, spread, inner, scaled, m2]
    for member in group:
        result = mean2 if member.reduce_op == "welford_mean" else m2
        nodes.append(_back(member, Ref(result.name)))
    return nodes, [mean1.name, m2_1.name]


def _back(node: Node, result: Ref) -> Node:
    """The view of a stage-2 result to the split node's shape, under the split node's name."""
    return Node(
        node.name, "aten.view.default", Kind.VIEW, (result, list(node.shape)), {}, node.metas
    )


def _split_views(
    graph: Graph, node: Node, factor: int
) -> tuple[list[Node], Ref, list[int], list[int]]:
    """The permute / reshape of a split node's source to (outer, S, R/S[, inner]), the
    reshaped edge, the partials' shape and stage 2's output shape."""
    source: Ref = node.args[0]
    shape = list(graph.meta(source).shape)
    space = _space(graph, node)
    walk = space.walk()
    last = max(walk.index(d) for d in node.dims)
    # Row: kept dims first, reduced last. Column: the inner dims stay innermost (contiguous).
    # Both in the order the reduction's kernel would walk them (channels-last: memory's).
    inner = list(walk[last + 1 :]) if space.column else []
    kept = [d for d in walk if d not in node.dims and d not in inner]
    order = kept + [d for d in walk if d in node.dims] + inner
    outer = space.ynumel if space.column else space.xnumel
    tail = [space.inner] if space.column else []
    first: list[Node] = []
    current = source
    if order != list(range(len(shape))):
        permuted = [shape[d] for d in order]
        first.append(_view(graph, node, "aten.permute.default", current, order, permuted))
        current = Ref(first[-1].name)
    split_shape = [outer, factor, space.rnumel // factor, *tail]
    first.append(_view(graph, node, "aten.view.default", current, split_shape, split_shape))
    partials = [outer, factor, 1, *tail]
    return first, Ref(first[-1].name), partials, [outer, 1, 1, *tail]


def _space(graph: Graph, node: Node) -> Space:
    """The space the reduction's kernel would have, walked as `memory_order` says."""
    shape = tuple(graph.meta(node.args[0]).shape)
    return Space(shape, node.dims, memory_order(graph, node.name))


def _view(
    graph: Graph, node: Node, target: str, source: Ref, arg: list[int], shape: list[int]
) -> Node:
    meta = contiguous(shape, graph.meta(node.args[0]).dtype)
    return Node(graph.fresh(node.name), target, Kind.VIEW, (source, arg), {}, (meta,))


def _reduction(
    graph: Graph,
    node: Node,
    source: Ref,
    shape: list[int],
    dims: tuple[int, ...],
    op: str = "",
) -> Node:
    # Partials in the compute dtype (float32 for 16-bit floats): stage 2 rounds once.
    dtype = node.meta.dtype if dims == (1,) else compute_dtype(node.meta.dtype)
    op = op or node.reduce_op
    return Node(
        graph.fresh(node.name),
        f"reduce.{op}",
        Kind.REDUCTION,
        (source,),
        {},
        (contiguous(shape, dtype),),
        reduce_op=op,
        dims=dims,
    )
