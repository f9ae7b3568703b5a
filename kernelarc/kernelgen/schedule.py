"""The scheduler: which values live in buffers, which kernels compute them, in which order.

Place in the flow: `schedule_graph(graph, launch_for)` turns a decoded graph into steps: torch
calls for what the generator does not fuse (`ExternStep`: cuBLAS matmuls, convolutions other
than depthwise ones, pooling windows over 32 taps, scans, ...)
and fused Triton kernels (`KernelStep`). It starts with the fewest buffers (the outputs, the
operands of torch calls) and lets the emitter say which other values must be stored
(`NeedMaterialize`: a reduction read at another index than its row, or in another space),
until every kernel emits. A root whose iteration space equals the previous kernel's joins it
(e.g. a LayerNorm's output and its mean), so siblings share their loads and reductions.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelarc.kernelgen.attention import attention_space
from kernelarc.kernelgen.attention_emit import AttentionEmitter
from kernelarc.kernelgen.attention_sdpa import sdpa_calls
from kernelarc.kernelgen.conv_layout import memory_order
from kernelarc.kernelgen.emit import KernelEmitter
from kernelarc.kernelgen.gemm_emit import GemmEmitter, gemm_space
from kernelarc.kernelgen.graph_ir import (
    GenerationError,
    Graph,
    Kind,
    Node,
    Ref,
    contiguous,
    walk_up,
)
from kernelarc.kernelgen.kernel_types import (
    Buffer,
    KernelSource,
    Launch,
    NeedMaterialize,
    buffer_key,
)
from kernelarc.kernelgen.space import AttentionSpace, GemmSpace, Space

_MAX_ROUNDS = 200
_FUSABLE = (
    Kind.POINTWISE,
    Kind.VIEW,
    Kind.REDUCTION,
    Kind.FACTORY,
    Kind.PIECEWISE,
    Kind.MATMUL,
    Kind.GATHER,
    Kind.SCAN,
)

AnySpace = Space | GemmSpace
LaunchFor = Callable[[AnySpace], Launch]
"""Block sizes for a kernel of a space (from the knob setting)."""


@dataclass
class ExternStep:
    """A node computed by its torch operator."""

    node: str


@dataclass
class KernelStep:
    """A fused kernel."""

    space: AnySpace
    roots: list[Ref]
    kernel: KernelSource


@dataclass
class Schedule:
    """Every step of one graph, in execution order."""

    steps: list[ExternStep | KernelStep] = field(default_factory=list)
    buffers: dict[str, Buffer] = field(default_factory=dict)
    allocated: set[str] = field(default_factory=set)
    """Buffers the plan allocates (stored by a kernel)."""


def schedule_graph(
    graph: Graph,
    launch_for: LaunchFor,
    *,
    fuse_gemm: bool = False,
    flash: bool = False,
    sdpa: bool = False,
) -> Schedule:
    """Steps computing the graph's outputs (see the module docstring). With `fuse_gemm`
    matmuls become Triton GEMM kernels with their pointwise consumers fused in; without, torch
    calls (cuBLAS) whose consumers are fused into the next kernel. With `flash`, a
    softmax(scores) @ V whose scores come from another matmul is one attention kernel
    (`attention.py`), whatever `fuse_gemm` says; with `sdpa`, one that
    `scaled_dot_product_attention` computes exactly is a call of it (`attention_sdpa.py`).

    Raises:
        GenerationError: a value can be neither fused nor stored (e.g. a reduction whose
            input is itself unsupported), or the fix-point does not converge.
    """
    live = _live(graph)
    if sdpa_calls(graph, live, rewrite=sdpa):
        live = _live(graph)
    attention = _attention_matmuls(graph, live) if flash else set()
    for name in live:
        node = graph.nodes[name]
        if name in attention:
            continue
        if node.kind == Kind.MATMUL and (not fuse_gemm or gemm_space(graph, node) is None):
            node.kind = Kind.EXTERN
    _views_to_torch(graph, live)
    materialized = _initial(graph, live)
    for _ in range(_MAX_ROUNDS):
        try:
            return _try(graph, live, materialized, launch_for, flash)
        except NeedMaterialize as exc:
            failed = graph.nodes.get(exc.node)
            if failed is None or exc.node in materialized or failed.kind not in _FUSABLE:
                msg = f"cannot fuse or store {exc.node}: {exc.reason}"
                raise GenerationError(msg) from exc
            materialized.add(exc.node)
    msg = "the schedule did not converge"
    raise GenerationError(msg)


def _live(graph: Graph) -> list[str]:
    """Names of the nodes the outputs depend on, in graph order."""
    needed: set[str] = set()
    stack = [o.node for o in graph.outputs if isinstance(o, Ref)]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        stack.extend(ref.node for ref in graph.nodes[name].refs())
    return [name for name in graph.nodes if name in needed]


def _views_to_torch(graph: Graph, live: list[str]) -> None:
    """Views of buffers that feed a torch call stay torch views (zero-copy, any strides), and
    so do the views of a torch call's result that the graph returns (a copy kernel would only
    read and write it once more)."""
    for name in live:
        node = graph.nodes[name]
        if node.kind != Kind.EXTERN:
            continue
        for ref in node.refs():
            _view_chain_to_torch(graph, ref, (Kind.INPUT, Kind.EXTERN))
    for out in graph.outputs:
        if isinstance(out, Ref):
            _view_chain_to_torch(graph, out, (Kind.EXTERN,))


def _view_chain_to_torch(graph: Graph, ref: Ref, sources: tuple[Kind, ...]) -> None:
    chain = graph.node(ref)
    views = []
    while chain.kind == Kind.VIEW:
        views.append(chain)
        chain = graph.node(chain.args[0])
    if views and chain.kind in sources:
        for view in views:
            view.kind = Kind.EXTERN


def _initial(graph: Graph, live: list[str]) -> set[str]:
    materialized: set[str] = set()
    for out in graph.outputs:
        if isinstance(out, Ref) and graph.node(out).kind in _FUSABLE:
            materialized.add(out.node)
    for name in live:
        node = graph.nodes[name]
        if node.kind != Kind.EXTERN:
            continue
        for ref in node.refs():
            if graph.node(ref).kind in _FUSABLE:
                materialized.add(ref.node)
    return materialized


def _attention_matmuls(graph: Graph, live: list[str]) -> set[str]:
    """Both matmuls of every attention the graph has (as nothing is stored yet)."""
    found: set[str] = set()
    for name in live:
        node = graph.nodes[name]
        space = attention_space(graph, node, set()) if node.kind == Kind.MATMUL else None
        if space is not None:
            found |= {space.anchor, space.score}
    return found


def _try(
    graph: Graph, live: list[str], materialized: set[str], launch_for: LaunchFor, flash: bool
) -> Schedule:
    schedule = Schedule()
    for item in graph.inputs:
        if item.kind == "tensor" and item.meta is not None:
            schedule.buffers[item.node] = Buffer(item.node, item.meta)
    for name in live:
        node = graph.nodes[name]
        if node.kind == Kind.EXTERN:
            for index, meta in enumerate(node.metas):
                if meta is not None:
                    key = buffer_key(Ref(name, index if node.multi_output else None))
                    schedule.buffers[key] = Buffer(key, meta)
        elif name in materialized:
            schedule.buffers[name] = Buffer(name, contiguous(node.meta.shape, node.meta.dtype))
            schedule.allocated.add(name)
    roots = [n for n in live if n in materialized and graph.nodes[n].kind in _FUSABLE]
    spaces = {n: _space_for(graph, Ref(n), materialized, flash) for n in roots}
    sunk = _sink_into_reductions(graph, live, roots, spaces, materialized)
    for name in live:
        node = graph.nodes[name]
        if node.kind == Kind.EXTERN:
            schedule.steps.append(ExternStep(name))
        elif name in spaces and name not in sunk:
            group = [Ref(p) for p, q in sunk.items() if q == name] + [Ref(name)]
            _add_roots(graph, schedule, group, spaces[name], launch_for)
    return schedule


def _sink_into_reductions(
    graph: Graph,
    live: list[str],
    roots: list[str],
    spaces: dict[str, AnySpace],
    materialized: set[str],
) -> dict[str, str]:
    """Pointwise roots a later reduction kernel reads and can store itself (e.g. the residual
    sum a LayerNorm normalises): root -> the reduction root whose kernel stores it. Only when
    nothing between them reads the buffer."""
    position = {name: i for i, name in enumerate(live)}
    sunk: dict[str, str] = {}
    for p in roots:
        if not isinstance(spaces[p], Space) or spaces[p].is_reduction:
            continue
        shape = tuple(graph.nodes[p].meta.shape)
        for q in roots[roots.index(p) + 1 :]:
            space = spaces[q]
            if not space.is_reduction or space.store_index(shape) is None:
                continue
            inner, boundary = _region(graph, q, materialized)
            users = graph.users.get(p, set())
            if any(graph.nodes[u].kind == Kind.GATHER for u in users):
                continue  # gathered from: read as a buffer, which a kernel storing it is not
            if p in boundary and all(
                u in inner or position.get(u, -1) > position[q] for u in users
            ):
                sunk[p] = q
                break
    return sunk


def _region(graph: Graph, root: str, materialized: set[str]) -> tuple[set[str], set[str]]:
    """(nodes a kernel of `root` computes inline, materialized nodes it reads)."""
    inner: set[str] = set()
    boundary: set[str] = set()
    stack = [root]
    while stack:
        name = stack.pop()
        node = graph.nodes[name]
        if name != root and (name in materialized or node.kind not in _FUSABLE):
            boundary.add(name)
            continue
        if name in inner:
            continue
        inner.add(name)
        stack.extend(ref.node for ref in node.refs())
    return inner, boundary


def _add_roots(
    graph: Graph,
    schedule: Schedule,
    group: list[Ref],
    space: AnySpace,
    launch_for: LaunchFor,
) -> None:
    last = schedule.steps[-1] if schedule.steps else None
    if isinstance(last, KernelStep) and last.space == space:
        roots = [*last.roots, *group]
        try:
            last.kernel = _emit(graph, schedule, space, roots, launch_for, last.kernel.name)
            last.roots = roots
            return
        except NeedMaterialize:
            pass  # computed on its own below; a genuine need surfaces there again
    name = f"_kg_k{sum(isinstance(s, KernelStep) for s in schedule.steps)}"
    kernel = _emit(graph, schedule, space, group, launch_for, name)
    schedule.steps.append(KernelStep(space, group, kernel))


def _emit(
    graph: Graph,
    schedule: Schedule,
    space: AnySpace,
    roots: list[Ref],
    launch_for: LaunchFor,
    name: str,
) -> KernelSource:
    here = {r.node for r in roots}
    launch = launch_for(space)
    if isinstance(space, AttentionSpace):
        return AttentionEmitter(graph, space, schedule.buffers, here, launch, name).emit(roots)
    if isinstance(space, GemmSpace):
        return GemmEmitter(graph, space, schedule.buffers, here, launch, name).emit(roots)
    return KernelEmitter(graph, space, schedule.buffers, here, launch, name).emit(roots)


def _space_for(graph: Graph, root: Ref, materialized: set[str], flash: bool) -> AnySpace:
    node = graph.node(root)
    if node.kind in (Kind.REDUCTION, Kind.SCAN):
        return _row_space(graph, node.name, materialized)
    if node.kind == Kind.MATMUL:
        return _gemm(graph, node.name, materialized, flash)
    reductions = _reductions_reached(graph, root, materialized)
    if not reductions:
        matmuls = _reached(graph, root, materialized, (Kind.MATMUL,))
        if matmuls:
            space = _gemm(graph, matmuls[-1], materialized, flash)
            if space.store_index(tuple(node.meta.shape)) is None:
                raise NeedMaterialize(matmuls[-1], f"{root.node} does not fit its output")
            return space
        inner, boundary = _region(graph, root.node, materialized)
        shape = tuple(node.meta.shape)
        if memory_order(graph, root.node, inner, boundary):  # reads a channels-last conv
            return Space(shape, tuple(range(2, len(shape))), tiled=True)
        return Space(shape)
    best = max(
        reductions,
        key=lambda n: (
            math.prod(graph.meta(graph.nodes[n].args[0]).shape),
            list(graph.nodes).index(n),
        ),
    )
    rows = _row_space(graph, best, materialized, root.node)
    if rows.store_index(tuple(node.meta.shape)) is None:
        raise NeedMaterialize(best, f"{root.node} does not fit the space of {best}")
    return rows


def _row_space(
    graph: Graph, reduction: str, materialized: set[str], root: str | None = None
) -> Space:
    """The space of a kernel computing `reduction` (a reduction or a scan) for `root` (default:
    the reduction itself), walked in memory order when it reads a channels-last convolution
    (`memory_order`). Every node the root's kernel computes counts for the arg-reduction rule:
    an argmax beside the reduction is computed in the same walk."""
    node = graph.nodes[reduction]
    inner, boundary = _region(graph, reduction, materialized)
    if root is not None and root != reduction:
        inner = inner | _region(graph, root, materialized)[0]
    order = memory_order(graph, reduction, inner, boundary)
    return Space(tuple(graph.meta(node.args[0]).shape), node.dims, order)


def _gemm(graph: Graph, name: str, materialized: set[str], flash: bool) -> GemmSpace:
    if flash:
        attention = attention_space(graph, graph.nodes[name], materialized)
        if attention is not None:
            return attention
    space = gemm_space(graph, graph.nodes[name])
    if space is None:
        raise NeedMaterialize(name, "operands do not fit a GEMM kernel")
    return space


def _reductions_reached(graph: Graph, root: Ref, materialized: set[str]) -> list[str]:
    """Reductions and scans (both make a row kernel) a kernel of `root` would compute."""
    return _reached(graph, root, materialized, (Kind.REDUCTION, Kind.SCAN))


def _reached(graph: Graph, root: Ref, materialized: set[str], kinds: tuple[Kind, ...]) -> list[str]:
    """Nodes of `kinds` a kernel of `root` would compute inline (not beyond them), in graph
    order."""

    def inline(node: Node) -> bool:  # computed in the kernel, not read from a buffer
        return node.name == root.node or (node.name not in materialized and node.kind in _FUSABLE)

    def through(node: Node) -> bool:
        stops = node.kind in (Kind.REDUCTION, Kind.MATMUL, Kind.SCAN)
        return inline(node) and (node.name == root.node or not stops)

    reached = walk_up(graph, root.node, through)
    found = {n.name for n in reached if n.name != root.node and inline(n) and n.kind in kinds}
    return [name for name in graph.nodes if name in found]


__all__ = ["ExternStep", "KernelStep", "LaunchFor", "Schedule", "schedule_graph"]
