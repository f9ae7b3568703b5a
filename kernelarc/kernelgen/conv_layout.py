"""Convolutions the generator leaves to cuDNN, run channels-last (the LAYOUT_CONV knob).

Place in the flow: `generate` finds the `convertible_convs(graph)` after building the graph
and, when the knob is on, declares them with `channels_last_convs` before scheduling. cuDNN's
tensor-core convolutions want NHWC; on NCHW inputs it transposes internally or picks slower
kernels. A convolution's output buffer is then declared channels-last, the kernels that read it
index it with those strides and walk it in memory order (`memory_order`, `Space.order`), and
the solution calls it with channels-last input and weight (`solution_source`), so cuDNN returns
channels-last and nothing is copied back.

Which ones, measured (H100, KernelBench level 2, `scripts/bench_kernelgen.py` variants
gen-default and gen-nchw, docs/benchmarks.md): a 2-d convolution whose output is only reduced
(a mean over H, W; a min over C) was 1.15-1.3x faster channels-last; one whose pointwise
epilogue wrote NCHW back from a flat walk was 2x slower (the epilogue is a transpose; it is
now a tile kernel, `Space.tiled`); through a reshaping view (GroupNorm's groups) it is read
across the channels; 3-d and transposed 3-d ones were no faster or slower (cuDNN's NDHWC
kernels). So a convolution qualifies when it is 4-d and every path from its output runs
through pointwise ops and views that keep its rank, batch and channels into reductions that
walk it in memory order, or into outputs.
"""

from kernelarc.kernelgen.graph_ir import Graph, Kind, Node, Ref, contiguous, index_users

CONVOLUTION = "aten.convolution.default"
#: The kinds of node that read their operands by index in a fused kernel (any strides).
_INDEXED_READERS = (Kind.POINTWISE, Kind.REDUCTION, Kind.PIECEWISE, Kind.GATHER)


def channels_last_strides(shape: list[int]) -> list[int]:
    """Strides of a 4-d (NHWC) or 5-d (NDHWC) channels-last tensor of `shape` (N, C, ...)."""
    channels, spatial = shape[1], shape[2:]
    strides = [0] * len(shape)
    strides[1] = 1
    step = max(channels, 1)
    for dim in range(len(shape) - 1, 1, -1):
        strides[dim] = step
        step *= max(spatial[dim - 2], 1)
    strides[0] = step
    return strides


def convertible_convs(graph: Graph) -> list[str]:
    """The convolutions that may run channels-last (see the module docstring)."""
    outputs = {o.node for o in graph.outputs if isinstance(o, Ref)}
    found = []
    for node in graph.nodes.values():
        if not _read_by_kernels_only(graph, node, outputs) or len(node.meta.shape) != 4:
            continue
        metas = node.metas
        channels_last_convs(graph, [node.name])  # tried, then undone
        if _read_in_planes(graph, node.name):
            found.append(node.name)
        node.metas, node.channels_last = metas, False
    return found


def _read_by_kernels_only(graph: Graph, node: Node, outputs: set[str]) -> bool:
    """`node` is a convolution with one tensor output, not a graph output, read only by fused
    kernels (which index it with any strides), and by at least one."""
    if node.target != CONVOLUTION or node.kind != Kind.EXTERN or node.multi_output:
        return False
    if len(node.metas) != 1 or node.metas[0] is None or node.name in outputs:
        return False
    readers = graph.users.get(node.name, set())
    return bool(readers) and all(graph.nodes[r].kind in _INDEXED_READERS for r in readers)


def _read_in_planes(graph: Graph, conv: str) -> bool:
    """Whether every path from the (channels-last) `conv` runs through pointwise ops and views
    that keep its rank, batch and channels (tile kernels read them: `Space.tiled`) and ends
    in reductions that walk it in memory order, or in outputs."""
    shape = tuple(graph.nodes[conv].meta.shape)
    stack, seen = [conv], set()
    while stack:
        name = stack.pop()
        for user in graph.users.get(name, set()):
            node = graph.nodes[user]
            if user in seen:
                continue
            seen.add(user)
            if node.kind == Kind.REDUCTION:  # its output (an output or not) is the small one
                if not memory_order(graph, user):
                    return False
            elif node.kind in (Kind.POINTWISE, Kind.VIEW) and _same_planes(node, shape):
                stack.append(user)
            else:
                return False
    return True


def _same_planes(node: Node, shape: tuple[int, ...]) -> bool:
    """The node keeps the rank, batch and channels of `shape`."""
    mine = tuple(node.meta.shape)
    return len(mine) == len(shape) and mine[:2] == shape[:2]


def channels_last_convs(graph: Graph, names: list[str]) -> None:
    """Declare the outputs of convolutions `names` (from `convertible_convs`) channels-last."""
    for name in names:
        node = graph.nodes[name]
        meta = node.meta
        node.metas = (meta.model_copy(update={"stride": channels_last_strides(meta.shape)}),)
        node.channels_last = True


def memory_order(
    graph: Graph, name: str, region: set[str] | None = None, reads: set[str] | None = None
) -> tuple[int, ...]:
    """The walking order (`Space.order`) of a kernel computing `name` (a reduction, or a
    pointwise root), whose region computes `region` and reads the buffers `reads` (both
    default to every fusable node the node's operands reach, for the split before
    scheduling): channels-last (N, spatial..., C) when it reads a channels-last convolution
    of its shape (a pointwise kernel: of its rank, batch and channels, e.g. a pooling's
    input), so its loads follow memory (a mean over H, W becomes the column plan over
    contiguous channels; a softmax over C the row plan; an epilogue reads whole rows of
    channels). Empty (the logical order) otherwise, for a scan, or when the walk would
    reorder the kept dims of a reduction (its output is stored row-major over them) or the
    reduced dims of an arg-reduction (its index counts them row-major)."""
    node = graph.nodes[name]
    reduction = node.kind == Kind.REDUCTION
    if node.kind in (Kind.SCAN, Kind.MATMUL, Kind.EXTERN) or node.multi_output:
        return ()
    shape = tuple(graph.meta(node.args[0]).shape if reduction else node.meta.shape)
    if len(shape) not in (4, 5):
        return ()
    if region is None or reads is None:
        region, reads = _reach(graph, name)

    def matches(read: tuple[int, ...]) -> bool:
        return read == shape if reduction else (len(read), read[:2]) == (len(shape), shape[:2])

    if not any(
        graph.nodes[r].channels_last and matches(tuple(graph.nodes[r].meta.shape))
        for r in reads
        if graph.nodes[r].kind == Kind.EXTERN
    ):
        return ()
    order = (0, *range(2, len(shape)), 1)
    if not reduction:
        return order
    kept = [d for d in order if d not in node.dims]
    reduced = [d for d in order if d in node.dims]
    if kept != sorted(kept):
        return ()
    nodes = [graph.nodes[n] for n in region | {name}]
    if reduced != sorted(reduced) and any(
        n.kind == Kind.SCAN or n.reduce_op in ("argmax", "argmin") for n in nodes
    ):
        return ()
    return order


def _reach(graph: Graph, reduction: str) -> tuple[set[str], set[str]]:
    """(the fusable nodes a reduction's operand is computed from, the other nodes they read)."""
    region: set[str] = set()
    reads: set[str] = set()
    stack = [ref.node for ref in graph.nodes[reduction].refs()]
    while stack:
        name = stack.pop()
        if name in region or name in reads or name not in graph.nodes:
            continue
        node = graph.nodes[name]
        if node.kind in (Kind.EXTERN, Kind.MATMUL):
            reads.add(name)
            continue
        region.add(name)
        stack.extend(ref.node for ref in node.refs())
    return region, reads


def peel_conv_biases(graph: Graph, apply: bool = True) -> list[str]:
    """Take the bias out of each convolution whose output only fused kernels read (not an
    output; the FUSE_CONV_BIAS knob): cuDNN is slower with a bias (Inductor's convolution
    lowering peels it off on GPUs for that reason), while a broadcast add in the kernels that
    read the output costs no extra pass. The add takes the convolution's name, so its readers
    stay as they were. Returns the convolutions peeled (with `apply` off: that would be)."""
    outputs = {o.node for o in graph.outputs if isinstance(o, Ref)}
    peeled: list[str] = []
    for name, node in list(graph.nodes.items()):
        bias = node.args[2] if len(node.args) > 2 else None
        if not isinstance(bias, Ref) or not _read_by_kernels_only(graph, node, outputs):
            continue
        if not apply:
            peeled.append(name)
            continue
        meta = node.meta
        args = (*node.args[:2], None, *node.args[3:])
        conv = Node(
            graph.fresh(name), node.target, Kind.EXTERN, args, dict(node.kwargs), node.metas
        )
        shape = [1, meta.shape[1]] + [1] * (len(meta.shape) - 2)
        view_meta = contiguous(shape, graph.meta(bias).dtype)
        view = Node(
            graph.fresh(name), "aten.view.default", Kind.VIEW, (bias, shape), {}, (view_meta,)
        )
        add_args = (Ref(conv.name), Ref(view.name))
        add_meta = contiguous(meta.shape, meta.dtype)
        add = Node(name, "aten.add.Tensor", Kind.POINTWISE, add_args, {}, (add_meta,))
        graph.nodes = {
            new.name: new
            for key, old in graph.nodes.items()
            for new in ([conv, view, add] if key == name else [old])
        }
        peeled.append(conv.name)
    if peeled and apply:
        index_users(graph)
    return peeled
