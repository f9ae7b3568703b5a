"""Build the generator's graph from a traced `OpGraph`: decode, classify, lower reductions.

Place in the flow: `build_graph(OpGraph)` is the first step of `kernelarc.kernelgen`: it decodes
the JSON arguments, resolves `getitem`s, drops mutations of inputs (a functionalised reference
that updates a buffer in place, e.g. BatchNorm's running statistics: the definition's outputs
do not include them), classifies every node (pointwise, view, reduction, factory, extern) and
lowers composite reductions (`mean`, `var_mean`, `amax`, `max.dim`, ...) to primitive ones
(`reductions.py`; a variance to the `welford_mean` / `welford_m2` pair, or to two sums: the
VAR_ONEPASS knob): `reduce.<op>` over explicit dims with the reduced dims kept as size 1,
followed by pointwise ops and a squeeze. Apart from `graph_ir` (the types) so that the lowering
in `reductions.py` imports the types without an import cycle.
"""

from typing import Any

from kernelarc.kernelgen.gathers import GATHER_TARGETS, GatherError, gather_plan
from kernelarc.kernelgen.graph_ir import (
    CONSTANT_TARGET,
    FACTORY_TARGETS,
    MATMUL_TARGETS,
    PIECEWISE_TARGETS,
    DeviceArg,
    DTypeArg,
    GenerationError,
    Graph,
    Kind,
    Node,
    OtherArg,
    Ref,
    contiguous,
    index_users,
)
from kernelarc.kernelgen.index_expr import Lin
from kernelarc.kernelgen.pointwise_ops import POINTWISE, TL_DTYPE
from kernelarc.kernelgen.reductions import lower_reduction
from kernelarc.kernelgen.views import VIEW_TARGETS
from kernelarc.schema.op_graph import OpGraph, TensorMeta


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


def build_graph(
    op_graph: OpGraph, *, one_pass_variance: bool = True, narrow_loads: bool = True
) -> Graph:
    """Decode, classify and lower an `OpGraph` (see the module docstring). With
    `one_pass_variance` a variance is lowered to a `welford_mean` / `welford_m2` pair (one
    pass over its rows), else to a sum for the mean and a sum of squared deviations. With
    `narrow_loads` kernels read fp8 operands themselves (Triton on a GPU); without (Triton's
    interpreter cannot cast to fp8), an op reading one is a torch call."""
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
        if raw.target == "prims.device_put.default" and _is_constant(graph, target):
            # A reference constant moved to the inputs' device: the generated solution makes
            # its constants there already (`_kg_constant`), so the move is the constant itself.
            alias[raw.name] = target
            continue
        lowered = lower_reduction(
            graph, raw.name, raw.target, args, kwargs, raw.outputs, one_pass=one_pass_variance
        )
        if lowered is not None:
            alias[raw.name] = lowered
            continue
        rewritten = _reverse_scan(graph, raw.name, raw.target, args, raw.outputs)
        rewritten = rewritten or _exclusive_scan(graph, raw.name, raw.target, args, raw.outputs)
        if rewritten is not None:
            alias[raw.name] = rewritten
            continue
        kind = _kind(raw.target, raw.outputs, raw.multi)
        node = Node(raw.name, raw.target, kind, args, kwargs, tuple(raw.outputs))
        node.multi_output = raw.multi
        if kind != Kind.EXTERN and not _triton_typed(graph, node, narrow_loads):
            node.kind = Kind.EXTERN
        if raw.target in GATHER_TARGETS and kind == Kind.EXTERN and _gatherable(graph, node):
            node.kind = Kind.GATHER
        if raw.target in SCAN_TARGETS and kind == Kind.EXTERN:
            _as_scan(graph, node)
        graph.add(node)
    graph.outputs = [decode(o, alias) for o in op_graph.outputs]
    index_users(graph)
    return graph


_IDENTITIES = frozenset({"aten.alias.default", "aten.lift_fresh_copy.default"})


#: Scans the generator computes (on whole rows), by target: the op of `tl.<op>`.
SCAN_TARGETS = {"aten.cumsum.default": "cumsum", "aten.cumprod.default": "cumprod"}
#: Longest row a scan is computed on (whole rows in one program's tile).
MAX_SCAN_ROW = 1 << 15


def _as_scan(graph: Graph, node: Node) -> None:
    """A cumsum / cumprod over the last dim of a float or int64 tensor becomes a SCAN node
    (`node.dims` the scanned dim); others stay torch calls."""
    if node.multi_output or len(node.metas) != 1 or node.metas[0] is None:
        return
    source = node.args[0] if node.args else None
    if not isinstance(source, Ref) or len(node.args) < 2 or not isinstance(node.args[1], int):
        return
    shape = graph.meta(source).shape
    if not shape:
        return
    dim = node.args[1] % len(shape)
    if dim != len(shape) - 1 or shape[dim] > MAX_SCAN_ROW or node.meta.dtype == "bool":
        return
    node.kind = Kind.SCAN
    node.reduce_op = SCAN_TARGETS[node.target]
    node.dims = (dim,)


_FLIPS = frozenset({"aten.flip.default", "prims.rev.default"})


def _reverse_scan(
    graph: Graph, name: str, target: str, args: tuple[Any, ...], outputs: list[Any]
) -> Ref | None:
    """`flip(scan(flip(x, d), d), d)` (PyTorch's spelling of a scan from the row's end) as
    one reverse scan of x, added under the outer flip's name; None for anything else."""
    if target not in _FLIPS or len(args) < 2 or not isinstance(args[0], Ref):
        return None
    scan = graph.nodes.get(args[0].node)
    if scan is None or scan.kind != Kind.SCAN or scan.reverse or args[0].index is not None:
        return None
    inner = scan.args[0]
    flipped = graph.nodes.get(inner.node) if isinstance(inner, Ref) else None
    if flipped is None or flipped.target not in _FLIPS or not isinstance(flipped.args[0], Ref):
        return None
    rank = len(scan.meta.shape)
    if not all(_flip_dims(a, rank) == set(scan.dims) for a in (args[1], flipped.args[1])):
        return None
    node = Node(
        name,
        scan.target,
        Kind.SCAN,
        (flipped.args[0], *scan.args[1:]),
        dict(scan.kwargs),
        tuple(outputs),
    )
    node.reduce_op, node.dims, node.reverse = scan.reduce_op, scan.dims, True
    return graph.add(node)


_SCAN_IDENTITY = {"cumsum": 0.0, "cumprod": 1.0}


def _exclusive_scan(
    graph: Graph, name: str, target: str, args: tuple[Any, ...], outputs: list[Any]
) -> Ref | None:
    """`cat([identity, scan(x[..., :-1])], d)` (an exclusive scan: each position the scan of
    those before it) as one scan of `cat([identity, x[..., :-1]], d)`, added under the cat's
    name, so no kernel reads the scan at a shifted position; None for anything else."""
    if target != "aten.cat.default" or not args or not isinstance(args[0], list | tuple):
        return None
    pieces = args[0]
    if len(pieces) != 2 or not all(isinstance(p, Ref) and p.index is None for p in pieces):
        return None
    first, scan = graph.nodes.get(pieces[0].node), graph.nodes.get(pieces[1].node)
    if first is None or scan is None or scan.kind != Kind.SCAN or scan.reverse:
        return None
    rank = len(scan.meta.shape)
    dim = int(args[1]) % rank if len(args) > 1 and isinstance(args[1], int) else 0
    source = scan.args[0]
    if scan.dims != (dim,) or not isinstance(source, Ref) or first.target != "aten.full.default":
        return None
    dtypes = {first.meta.dtype, scan.meta.dtype, graph.meta(source).dtype}
    length = scan.meta.shape[dim] + 1
    if first.meta.shape[dim] != 1 or len(dtypes) != 1 or length > MAX_SCAN_ROW:
        return None
    if first.args[1] != _SCAN_IDENTITY[scan.reduce_op]:
        return None
    shape = [*scan.meta.shape[:dim], length, *scan.meta.shape[dim + 1 :]]
    cat_args = ([pieces[0], source], dim)
    cat_meta = contiguous(shape, scan.meta.dtype)
    cat = Node(graph.fresh(name), target, Kind.PIECEWISE, cat_args, {}, (cat_meta,))
    graph.add(cat)
    operands = (Ref(cat.name), *scan.args[1:])
    node = Node(name, scan.target, Kind.SCAN, operands, dict(scan.kwargs), tuple(outputs))
    node.reduce_op, node.dims = scan.reduce_op, scan.dims
    return graph.add(node)


def _flip_dims(dims: Any, rank: int) -> set[int]:
    """The dims a flip reverses (empty when they are not a list of ints)."""
    if not isinstance(dims, list | tuple) or not all(isinstance(d, int) for d in dims):
        return set()
    return {d % rank for d in dims}


def _gatherable(graph: Graph, node: Node) -> bool:
    """A gather of a form `gathers.py` expresses (else it stays a torch call)."""
    if node.multi_output or len(node.metas) != 1 or node.metas[0] is None:
        return False
    try:
        gather_plan(graph, node, tuple(Lin() for _ in node.meta.shape))
    except (GatherError, IndexError, KeyError):
        return False
    return True


def _is_constant(graph: Graph, value: Any) -> bool:
    """Whether `value` is a reference constant, possibly through aliases of it."""
    while isinstance(value, Ref) and value.node in graph.nodes:
        node = graph.nodes[value.node]
        if node.target == CONSTANT_TARGET:
            return True
        if node.target not in _IDENTITIES or not node.args:
            return False
        value = node.args[0]
    return False


def _getitem(source: Any, index: int) -> Any:
    if isinstance(source, list | tuple):
        return source[index]
    if isinstance(source, Ref):
        return Ref(source.node, index)
    msg = f"getitem of {source!r}"
    raise GenerationError(msg)


def _triton_typed(graph: Graph, node: Node, narrow_loads: bool) -> bool:
    """Whether a kernel can compute the node: its result has a Triton dtype here (fp8 / fp4,
    a quantisation's last cast, have none: such a node is a torch call reading the float
    buffer the kernels before it store), and so do its operands unless `narrow_loads`."""
    metas = list(node.metas)
    if not narrow_loads:
        for ref in node.refs():
            source = graph.nodes.get(ref.node)
            if source is not None and len(source.metas) > (ref.index or 0):
                metas.append(source.metas[ref.index or 0])
    return all(meta.dtype in TL_DTYPE for meta in metas if meta is not None)


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
