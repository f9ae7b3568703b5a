"""The generator's view of a traced graph: edges, decoded arguments, node kinds, the graph.

Place in the flow: the types every step of `kernelarc.kernelgen` shares. `graph_build.build_graph`
fills a `Graph` from an `OpGraph` (with `reductions.lower_reduction` for the reductions); the
scheduler and the emitter read it. Composite reductions are lowered to the primitive
`reduce.<op>` nodes of REDUCE_OPS over explicit dims with the reduced dims kept as size 1; the
scheduler and the emitter only know those primitives. This module imports neither builder, so
both import it one way.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kernelarc.kernelgen.pointwise_ops import FLOAT_DTYPES
from kernelarc.schema.op_graph import GraphInput, TensorMeta


class GenerationError(Exception):
    """The generator cannot produce a kernel for this graph (the message says why, briefly)."""


@dataclass(frozen=True)
class Ref:
    """An edge: output `index` (None: the only one) of node `node`."""

    node: str
    index: int | None = None


@dataclass(frozen=True)
class DTypeArg:
    """A torch dtype argument."""

    name: str


@dataclass(frozen=True)
class DeviceArg:
    """A torch device argument (the traced one is meta: the run-time device replaces it)."""

    name: str


@dataclass(frozen=True)
class OtherArg:
    """An argument the generator does not interpret (devices, layouts, ...)."""

    text: str


class Kind(StrEnum):
    """What a node is, for scheduling."""

    INPUT = "input"
    SCALAR = "scalar"
    CONSTANT = "constant"
    POINTWISE = "pointwise"
    VIEW = "view"
    REDUCTION = "reduction"
    FACTORY = "factory"
    MATMUL = "matmul"
    """mm / addmm / bmm: the anchor of a GEMM kernel with a fused epilogue, or a torch call."""
    PIECEWISE = "piecewise"
    """cat / constant padding: a value read from one of several sources, or a constant."""
    SCAN = "scan"
    """cumsum / cumprod over the last dim of rows of at most MAX_SCAN_ROW: computed on whole
    rows in a row kernel, read at its own element."""
    GATHER = "gather"
    """embedding / gather / index_select / x[idx]: a read at a loaded index (`gathers.py`)."""
    EXTERN = "extern"


REDUCE_OPS = (
    "sum",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "any",
    "all",
    "welford_mean",
    "welford_m2",
)
WELFORD_OPS = frozenset({"welford_mean", "welford_m2"})
"""The mean and the sum of squared deviations from it (M2) of the same rows: computed together
in one pass (Welford's online update per lane, lanes merged with Chan's formula)."""
MATMUL_TARGETS = frozenset({"aten.mm.default", "aten.addmm.default", "aten.bmm.default"})
CONSTANT_TARGET = "kernelarc.constant"
"""A small tensor constant of the reference (values in args[0], flattened)."""
PIECEWISE_TARGETS = frozenset({"aten.cat.default", "aten.constant_pad_nd.default"})
FACTORY_TARGETS = frozenset(
    {
        "aten.full.default",
        "aten.scalar_tensor.default",
        "aten.arange.start_step",
        "aten.arange.start",
        "aten.arange.default",
        "prims.iota.default",
    }
)


@dataclass
class Node:
    """One value-producing node."""

    name: str
    target: str
    kind: Kind
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    metas: tuple[TensorMeta | None, ...]
    reduce_op: str = ""
    """For reductions: one of REDUCE_OPS."""
    dims: tuple[int, ...] = ()
    """For reductions: the reduced dims of the input (kept as size 1 in the output)."""
    multi_output: bool = False
    """The op returns a tuple (edges name an output index)."""
    channels_last: bool = False
    """A convolution called with channels-last operands (its output meta says so too)."""
    reverse: bool = False
    """For scans: from the row's end (x.flip(d).cumsum(d).flip(d), found by the builder)."""

    @property
    def meta(self) -> TensorMeta:
        """The single tensor output."""
        meta = self.metas[0] if self.metas else None
        if meta is None:
            msg = f"{self.name} ({self.target}) has no tensor output"
            raise GenerationError(msg)
        return meta

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the single output."""
        return tuple(self.meta.shape)

    def refs(self) -> Iterator[Ref]:
        """Every edge among the arguments (nested lists included)."""
        yield from _refs(self.args)
        yield from _refs(tuple(self.kwargs.values()))


def _refs(values: tuple[Any, ...] | list[Any]) -> Iterator[Ref]:
    for value in values:
        if isinstance(value, Ref):
            yield value
        elif isinstance(value, list | tuple):
            yield from _refs(value)


@dataclass
class Graph:
    """The decoded graph."""

    nodes: dict[str, Node] = field(default_factory=dict)
    inputs: list[GraphInput] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    users: dict[str, set[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """What the generated code does differently (e.g. an input mutation it drops)."""
    variances: int = 0
    """Variances lowered (var, std, var_mean): the VAR_ONEPASS knob matters when > 0."""
    sdpa_forms: int = 0
    """Attentions one `scaled_dot_product_attention` call computes exactly: the FUSE_SDPA
    knob matters when > 0 (`attention_sdpa.py`)."""
    _counter: int = 0

    def node(self, ref: Ref | str) -> Node:
        """The node of an edge or name."""
        return self.nodes[ref.node if isinstance(ref, Ref) else ref]

    def meta(self, ref: Ref) -> TensorMeta:
        """The tensor meta of an edge."""
        node = self.node(ref)
        meta = node.metas[ref.index or 0]
        if meta is None:
            msg = f"{ref.node} output {ref.index} is not a tensor"
            raise GenerationError(msg)
        return meta

    def fresh(self, stem: str) -> str:
        """A node name not used yet."""
        self._counter += 1
        return f"{stem}_kg{self._counter}"

    def add(self, node: Node) -> Ref:
        """Append a node; returns its edge."""
        self.nodes[node.name] = node
        return Ref(node.name)


def contiguous(shape: tuple[int, ...] | list[int], dtype: str) -> TensorMeta:
    """A contiguous meta of `shape`."""
    strides: list[int] = []
    inner = 1
    for size in reversed(shape):
        strides.append(inner)
        inner *= max(size, 1)
    return TensorMeta(shape=list(shape), stride=list(reversed(strides)), dtype=dtype)


def index_users(graph: Graph) -> None:
    """Recompute `graph.users` (after a pass rewrote nodes)."""
    graph.users = {name: set() for name in graph.nodes}
    for node in graph.nodes.values():
        for ref in node.refs():
            graph.users.setdefault(ref.node, set()).add(node.name)


def walk_up(graph: Graph, start: str, through: Callable[[Node], bool]) -> Iterator[Node]:
    """Every node reached from `start` towards its operands, each once, `start` first; the
    operands of a node are visited only when `through(node)` holds."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.nodes[name]
        yield node
        if through(node):
            stack.extend(ref.node for ref in node.refs())


def is_float(dtype: str) -> bool:
    """A floating dtype name."""
    return dtype in FLOAT_DTYPES
