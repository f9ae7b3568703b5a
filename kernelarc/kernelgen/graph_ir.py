"""The generator's view of a traced graph: decoded arguments, node kinds, primitive reductions.

Place in the flow: `build_graph(OpGraph)` is the first step of `kernelarc.kernelgen`: it decodes
the JSON arguments, resolves `getitem`s, drops mutations of inputs (a functionalised reference
that updates a buffer in place, e.g. BatchNorm's running statistics: the definition's outputs
do not include them), classifies every node (pointwise, view, reduction, factory, extern) and
lowers composite reductions (`mean`, `var_mean`, `amax`, `max.dim`, ...) to primitive ones
(a variance to the `welford_mean` / `welford_m2` pair, or to two sums: the VAR_ONEPASS knob):
`reduce.<op>` over explicit dims with the reduced dims kept as size 1, followed by pointwise
ops and a squeeze. The scheduler and the emitter only know those primitives.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kernelarc.kernelgen.pointwise_ops import FLOAT_DTYPES, POINTWISE
from kernelarc.kernelgen.views import VIEW_TARGETS
from kernelarc.schema.op_graph import GraphInput, OpGraph, TensorMeta


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


def decode(value: Any, alias: dict[str, Any]) -> Any:
    """An encoded argument as generator values (edges through `alias`)."""
    if isinstance(value, dict):
        if "node" in value:
            return alias.get(value["node"], Ref(value["node"], value.get("index")))
        if "dtype" in value:
            return DTypeArg(value["dtype"])
        if "float" in value:
            return float(value["float"])
        if "device" in value:
            return DeviceArg(str(value["device"]))
        return OtherArg(str(next(iter(value.values()), "")))
    if isinstance(value, list):
        return [decode(v, alias) for v in value]
    return value


def build_graph(op_graph: OpGraph, *, one_pass_variance: bool = True) -> Graph:
    """Decode, classify and lower an `OpGraph` (see the module docstring). With
    `one_pass_variance` a variance is lowered to a `welford_mean` / `welford_m2` pair (one
    pass over its rows), else to a sum for the mean and a sum of squared deviations."""
    from kernelarc.kernelgen.reductions import lower_reduction

    graph = Graph(inputs=list(op_graph.inputs))
    alias: dict[str, Any] = {}
    for item in op_graph.inputs:
        if item.kind == "constant":
            alias[item.node] = item.value
            continue
        kind = Kind.INPUT if item.kind == "tensor" else Kind.SCALAR
        graph.add(Node(item.node, "input", kind, (), {}, (item.meta,)))
    input_names = {i.node for i in op_graph.inputs}
    for raw in op_graph.nodes:
        args = tuple(decode(a, alias) for a in raw.args)
        kwargs = {k: decode(v, alias) for k, v in raw.kwargs.items()}
        if raw.target == "getitem":
            source, index = args[0], args[1]
            alias[raw.name] = _getitem(source, index)
            continue
        target = args[0] if args else None
        copy = raw.target in ("aten.copy_.default", "aten.copy.default")
        if copy and isinstance(target, Ref) and target.node in input_names:
            graph.notes.append(
                f"the reference's in-place update of input {target.node} "
                "is not an output and is not reproduced"
            )
            continue
        lowered = lower_reduction(
            graph, raw.name, raw.target, args, kwargs, raw.outputs, one_pass=one_pass_variance
        )
        if lowered is not None:
            alias[raw.name] = lowered
            continue
        kind = _kind(raw.target, raw.outputs, raw.multi)
        node = Node(raw.name, raw.target, kind, args, kwargs, tuple(raw.outputs))
        node.multi_output = raw.multi
        graph.add(node)
    graph.outputs = [decode(o, alias) for o in op_graph.outputs]
    index_users(graph)
    return graph


def _getitem(source: Any, index: int) -> Any:
    if isinstance(source, list | tuple):
        return source[index]
    if isinstance(source, Ref):
        return Ref(source.node, index)
    msg = f"getitem of {source!r}"
    raise GenerationError(msg)


def _kind(target: str, outputs: list[TensorMeta | None], multi: bool) -> Kind:
    if multi or len(outputs) != 1 or outputs[0] is None:
        return Kind.EXTERN
    if target == CONSTANT_TARGET:
        count = 1
        for size in outputs[0].shape:
            count *= size
        return Kind.FACTORY if count == 1 else Kind.EXTERN
    if target in POINTWISE:
        return Kind.POINTWISE
    if target in VIEW_TARGETS:
        return Kind.VIEW
    if target in FACTORY_TARGETS:
        return Kind.FACTORY
    if target in PIECEWISE_TARGETS:
        return Kind.PIECEWISE
    if target in MATMUL_TARGETS:
        return Kind.MATMUL
    return Kind.EXTERN


def index_users(graph: Graph) -> None:
    """Recompute `graph.users` (after a pass rewrote nodes)."""
    graph.users = {name: set() for name in graph.nodes}
    for node in graph.nodes.values():
        for ref in node.refs():
            graph.users.setdefault(ref.node, set()).add(node.name)


def is_float(dtype: str) -> bool:
    """A floating dtype name."""
    return dtype in FLOAT_DTYPES
