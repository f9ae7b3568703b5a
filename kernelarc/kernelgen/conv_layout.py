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
