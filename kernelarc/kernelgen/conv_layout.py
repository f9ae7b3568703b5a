"""Convolutions the generator leaves to cuDNN, run channels-last (the LAYOUT_CONV knob).

Place in the flow: `generate` finds the `convertible_convs(graph)` after building the graph
and, when the knob is on, declares them with `channels_last_convs` before scheduling. cuDNN's
tensor-core convolutions want NHWC; on NCHW inputs it transposes internally or picks slower
kernels (the measured gap: torch.compile, which converts convolutions to channels-last, was
about 2x faster than the generator's NCHW calls on KernelBench's convolutions,
docs/benchmarks.md). A convolution qualifies when its output
feeds only fused kernels: its buffer is then declared channels-last, the kernels that read it
index it with those strides, and the solution calls it with channels-last input and weight
(`solution_source`), so cuDNN returns channels-last and nothing is copied back. A convolution
whose output is a graph output, or is read by a torch call or a view (a `view` of a
channels-last tensor may not exist), keeps the traced layout.
"""

from kernelarc.kernelgen.graph_ir import Graph, Kind, Ref

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
        if node.target != CONVOLUTION or node.kind != Kind.EXTERN or node.multi_output:
            continue
        if len(node.metas) != 1 or node.metas[0] is None or len(node.meta.shape) not in (4, 5):
            continue
        readers = graph.users.get(node.name, set())
        if node.name in outputs or not readers:
            continue
        if all(graph.nodes[r].kind in _INDEXED_READERS for r in readers):
            found.append(node.name)
    return found


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
