"""Trace a definition's reference into an ATen operator graph, one graph per workload shape.

Place in the flow: `python -m kernelarc.tracing` runs this in a subprocess of the host (the
campaign never imports torch); the kernel generator reads the resulting `TraceSet`.

How: the reference is imported from a real file, called on fake tensors of each workload's
shapes under `make_fx` with functionalisation (in-place ops become functional, a mutation of an
input becomes a trailing `copy_`) and Inductor's decomposition table (composite ops such as
`layer_norm`, `gelu` or `softmax` become the primitive ATen ops the generator knows, `var_mean`
and `amax` among them). No tensor data is allocated: GPU-sized workloads trace on a laptop.

Python scalar inputs (`shape: null`) are traced as 0-d tensors first, so the graph keeps them
as inputs (a kernel argument at run time); when the reference needs the value itself (control
flow, `math.sqrt(eps)`), the workload's value is baked into the graph instead (`constant`).
"""

import hashlib
import importlib.util
import math
import operator
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx
from torch.overrides import TorchFunctionMode

from kernelarc.runner.dtypes import torch_dtype
from kernelarc.schema import Definition, ScalarInput, Workload
from kernelarc.schema.op_graph import (
    GraphInput,
    GraphNode,
    OpGraph,
    TensorMeta,
    TracedWorkload,
    TraceSet,
)
from kernelarc.tracing.conv_decomp import conv_decompositions
from kernelarc.tracing.matmul_decomp import matmul_decompositions
from kernelarc.tracing.pool_decomp import pool_decompositions
from kernelarc.tracing.split_decomp import split_decompositions

_MODULE = "_kernelarc_traced_reference"


class TraceError(Exception):
    """The reference could not be traced at one workload (the message says why)."""


def load_reference_module(definition: Definition, workdir: Path) -> Any:
    """Import the reference from a real file (inspect-based decorators need one)."""
    path = workdir / f"{_MODULE}.py"
    path.write_text(definition.reference, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        msg = f"cannot import the reference from {path}"
        raise TraceError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    spec.loader.exec_module(module)
    return module


def trace_problem(definition: Definition, workloads: Sequence[Workload]) -> TraceSet:
    """One `TracedWorkload` per workload (a failure is recorded, never raised)."""
    digest = hashlib.sha256(definition.reference.encode()).hexdigest()
    traced: list[TracedWorkload] = []
    with tempfile.TemporaryDirectory(prefix="kernelarc-trace-") as tmp:
        try:
            module = load_reference_module(definition, Path(tmp))
        except Exception as exc:  # the reference is arbitrary code: any failure is a reason
            error = f"importing the reference failed: {type(exc).__name__}: {exc}"
            return TraceSet(
                definition=definition.name,
                reference_hash=digest,
                torch_version=torch.__version__,
                workloads=[TracedWorkload(uuid=w.uuid, error=error) for w in workloads],
            )
        for workload in workloads:
            try:
                graph = trace_workload(definition, workload, module)
                traced.append(TracedWorkload(uuid=workload.uuid, graph=graph))
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}".strip()
                traced.append(TracedWorkload(uuid=workload.uuid, error=error[:2000]))
    return TraceSet(
        definition=definition.name,
        reference_hash=digest,
        torch_version=torch.__version__,
        workloads=traced,
    )


def trace_workload(definition: Definition, workload: Workload, module: Any) -> OpGraph:
    """The graph of `module.run` at one workload (scalars as inputs where the code allows)."""
    axes = definition.resolve_axes(dict(workload.axes))
    has_scalars = any(spec.shape is None for spec in definition.inputs.values())
    errors: list[Exception] = []
    for bake in (False, True) if has_scalars else (True,):
        args, kinds = _example_inputs(definition, workload, axes, module, bake_scalars=bake)
        try:
            gm = _make_graph(module.run, definition, args)
        except Exception as exc:
            errors.append(exc)
            continue
        return _to_op_graph(gm, definition, args, kinds)
    raise TraceError(_describe(errors[-1])) from errors[-1]


def _describe(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}"[:500]


def _example_inputs(
    definition: Definition,
    workload: Workload,
    axes: dict[str, int],
    module: Any,
    *,
    bake_scalars: bool,
) -> tuple[list[Any], list[str]]:
    """Meta tensors of the workload's shapes (custom inputs from the entrypoint on `meta`)."""
    custom: dict[str, Any] = {}
    if any(spec.type == "custom" for spec in workload.inputs.values()):
        entry = getattr(module, definition.custom_inputs_entrypoint or "", None)
        if entry is None:
            msg = "custom inputs without a custom_inputs_entrypoint"
            raise TraceError(msg)
        scalars = {n: s.value for n, s in workload.inputs.items() if isinstance(s, ScalarInput)}
        custom = entry({**axes, **scalars}, torch.device("meta"))
    args: list[Any] = []
    kinds: list[str] = []
    for name, spec in definition.inputs.items():
        given = workload.inputs.get(name)
        dtype = torch_dtype(spec.dtype)
        if name in custom:
            value = custom[name]
            args.append(value)
            kinds.append("tensor" if isinstance(value, torch.Tensor) else "constant")
            continue
        if spec.shape is None:
            value = given.value if isinstance(given, ScalarInput) else _scalar_stand_in(dtype)
            if bake_scalars:
                args.append(value)
                kinds.append("constant")
            else:
                args.append(torch.tensor(value, dtype=_scalar_tensor_dtype(dtype)).to("meta"))
                kinds.append("scalar")
            continue
        shape = definition.shape_of(spec, axes) or ()
        args.append(torch.empty(shape, dtype=dtype, device="meta"))
        kinds.append("tensor")
    return args, kinds


def _scalar_stand_in(dtype: torch.dtype) -> int | float | bool:
    if dtype == torch.bool:
        return True
    return 1.0 if dtype.is_floating_point else 1


def _scalar_tensor_dtype(dtype: torch.dtype) -> torch.dtype:
    """The 0-d stand-in's dtype: promotes like a Python scalar of that kind would."""
    if dtype == torch.bool:
        return torch.bool
    return torch.float32 if dtype.is_floating_point else torch.int64


#: Ops whose Inductor decomposition emits Inductor-only prims (registered only when Inductor's
#: lowerings are imported): not taken from Inductor's table, so a generated solution calls them
#: through torch unless `pool_decomp` writes them as taps over the window.
_KEEP_WHOLE = frozenset(
    f"aten.{name}.default"
    for name in ("max_pool2d_with_indices", "max_pool3d_with_indices", "max_pool1d_with_indices")
)


class _DataConstantsOnCpu(TorchFunctionMode):
    """`torch.tensor(0.0, device=x.device)` made on the CPU while tracing: the inputs are meta
    tensors, and a constant made from Python data on the meta device would lose its value. A
    0-d CPU tensor mixes with tensors of any device, so it stays there; a larger one reaches the
    meta device through a copy the graph records, like `torch.tensor([...]).to(x.device)`."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in (torch.tensor, torch.as_tensor, torch.scalar_tensor):
            data = args[0] if args else kwargs.get("data")
            device = kwargs.get("device")
            on_meta = device is not None and torch.device(device).type == "meta"
            if on_meta and not isinstance(data, torch.Tensor):
                kwargs["device"] = "cpu"
                made = func(*args, **kwargs)
                # A 0-d one stays on the CPU; a larger one is moved by a traced copy.
                return made if made.dim() == 0 else made.to(device)
        return func(*args, **kwargs)


def _make_graph(run: Callable[..., Any], definition: Definition, args: list[Any]) -> GraphModule:
    import torch._inductor.lowering  # noqa: F401 - some decompositions look lowerings up
    from torch._inductor.decomposition import select_decomp_table
    from torch.func import functionalize

    names = list(definition.outputs)

    def call(*inputs: Any) -> tuple[Any, ...]:
        out = run(*inputs)
        if isinstance(out, dict):
            return tuple(out[n] for n in names)
        if isinstance(out, list | tuple):
            return tuple(out)
        return (out,)

    table = {op: fn for op, fn in select_decomp_table().items() if str(op) not in _KEEP_WHOLE}
    table.update(pool_decompositions())
    table.update(conv_decompositions())
    table.update(split_decompositions())
    table.update(matmul_decompositions())
    with _DataConstantsOnCpu():
        traced: GraphModule = make_fx(
            functionalize(call, remove="mutations"),
            decomposition_table=table,
            tracing_mode="fake",
            _allow_non_fake_inputs=True,
        )(*args)
    traced.graph.eliminate_dead_code()
    return traced


def _to_op_graph(
    gm: GraphModule, definition: Definition, args: list[Any], kinds: list[str]
) -> OpGraph:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs: list[GraphInput] = []
    kinds_typed: list[Literal["tensor", "scalar", "constant"]] = [
        "tensor" if k == "tensor" else "scalar" if k == "scalar" else "constant" for k in kinds
    ]
    for name, node, arg, kind in zip(
        definition.inputs, placeholders, args, kinds_typed, strict=True
    ):
        meta = _meta(node.meta.get("val")) if kind != "constant" else None
        value = None if kind != "constant" else _encode(arg)
        inputs.append(GraphInput(name=name, node=node.name, kind=kind, meta=meta, value=value))
    nodes: list[GraphNode] = []
    outputs: list[Any] = []
    live = _reachable_from_outputs(gm)
    for node in gm.graph.nodes:
        if node.op == "output":
            result = node.args[0]
            results = result if isinstance(result, list | tuple) else [result]
            outputs = [_encode(v) for v in results]
        elif node.op == "placeholder" or node not in live:
            continue  # dead code: e.g. a lazily built module's random init, or an input update
        elif node.op == "call_function":
            nodes.append(_graph_node(node))
        elif node.op == "get_attr":
            nodes.append(_constant_node(node, getattr(gm, str(node.target))))
        else:
            msg = f"unsupported fx node {node.op} {node.target}"
            raise TraceError(msg)
    return OpGraph(inputs=inputs, nodes=nodes, outputs=outputs)


def _reachable_from_outputs(gm: GraphModule) -> set[Node]:
    """Nodes the outputs depend on, plus copies into inputs (the functionalised mutations,
    which the generator reports and drops)."""
    live: set[Node] = set()
    stack = [n for n in gm.graph.nodes if n.op == "output"]
    stack += [
        n
        for n in gm.graph.nodes
        if n.op == "call_function"
        and "copy_" in str(n.target)
        and n.args
        and isinstance(n.args[0], Node)
        and n.args[0].op == "placeholder"
    ]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        stack.extend(node.all_input_nodes)
    return live


_MAX_CONSTANT = 4096


def _constant_node(node: Node, value: Any) -> GraphNode:
    """A small tensor constant the reference creates (e.g. `torch.tensor(self.value)`)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor):
        msg = f"tensor constant {node.target} has no value at trace time"
        raise TraceError(msg)
    if value.numel() > _MAX_CONSTANT or value.device.type == "meta":
        where = (
            "on the meta device" if value.device.type == "meta" else f"of {value.numel()} elements"
        )
        msg = f"tensor constant {node.target} {where}: no value to embed"
        raise TraceError(msg)
    flat = value.detach().cpu().reshape(-1)
    values = [_encode(v) for v in flat.tolist()]
    return GraphNode(
        name=node.name,
        target="kernelarc.constant",
        args=[values],
        kwargs={"dtype": {"dtype": str(value.dtype).removeprefix("torch.")}},
        outputs=[_meta(value)],
    )


def _graph_node(node: Node) -> GraphNode:
    target = "getitem" if node.target is operator.getitem else _target_name(node.target)
    if target.startswith("inductor.") or "_low_memory" in target:
        msg = f"{target} exists only where Inductor's lowerings are loaded"
        raise TraceError(msg)
    val = node.meta.get("val")
    multi = isinstance(val, list | tuple)
    metas = [_meta(v) for v in val] if isinstance(val, list | tuple) else [_meta(val)]
    return GraphNode(
        name=node.name,
        target=target,
        args=[_encode(a) for a in node.args],
        kwargs={k: _encode(v) for k, v in node.kwargs.items()},
        outputs=metas,
        multi=multi,
    )


def _target_name(target: Any) -> str:
    text = str(target)
    return text.removeprefix("torch.ops.")


def _meta(value: Any) -> TensorMeta | None:
    if not isinstance(value, torch.Tensor):
        return None
    return TensorMeta(
        shape=[int(s) for s in value.shape],
        stride=[int(s) for s in value.stride()],
        dtype=str(value.dtype).removeprefix("torch."),
        offset=int(value.storage_offset()),
    )


def _encode(value: Any) -> Any:
    """JSON form of an fx argument (see kernelarc.schema.op_graph)."""
    if isinstance(value, Node):
        return {"node": value.name}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.device.type != "meta":
        return _encode(value.item())
    return {"other": repr(value)[:200]}
