"""Rendering of a generated solution: kernels, one plan per traced workload, dispatch, fallback.

Place in the flow: `kernelgen.generate` schedules every traced workload and hands the plans
here. The solution's `run` looks its inputs' signature (shapes, dtypes, strides; the values of
scalars the trace had to bake) up in a table of plans; a plan allocates its buffers, calls torch
for what is not fused and launches the fused kernels. An input signature no plan was made for
runs the reference itself (renamed `_kg_reference_run`), so the solution is correct for every
input and fast for the traced ones, as a shape-specialising compiler is. Kernels that are the
same for several workloads are emitted once.
"""

import ast
import math
from dataclasses import dataclass
from typing import Any

from kernelarc.kernelgen.graph_ir import (
    CONSTANT_TARGET,
    DeviceArg,
    DTypeArg,
    GenerationError,
    Graph,
    Kind,
    Node,
    OtherArg,
    Ref,
)
from kernelarc.kernelgen.kernel_types import buffer_key
from kernelarc.kernelgen.schedule import ExternStep, KernelStep, Schedule
from kernelarc.kernelgen.triton_helpers import HELPERS
from kernelarc.kernelgen.views import VIEW_TARGETS
from kernelarc.python_ast import parse_module
from kernelarc.schema import Definition

REFERENCE_RUN = "_kg_reference_run"

#: Scatter-like torch calls and their in-place forms (`_PlanWriter._in_place`).
IN_PLACE = {
    "aten.index_put.default": "aten.index_put_.default",
    "aten.index_copy.default": "aten.index_copy_.default",
    "aten.scatter.src": "aten.scatter_.src",
    "aten.scatter.value": "aten.scatter_.value",
    "aten.scatter_add.default": "aten.scatter_add_.default",
    "aten.masked_scatter.default": "aten.masked_scatter_.default",
}


@dataclass
class WorkloadPlan:
    """One traced workload's graph and schedule."""

    uuid: str
    graph: Graph
    schedule: Schedule


def render_solution(definition: Definition, plans: list[WorkloadPlan], header: str) -> str:
    """The whole `kernel.py` of a generated solution."""
    future, reference = rename_reference(definition.reference)
    kernels: dict[str, str] = {}
    rename: list[dict[str, str]] = []
    for plan in plans:
        names: dict[str, str] = {}
        for step in plan.schedule.steps:
            if isinstance(step, KernelStep):
                body = step.kernel.source.replace(f"def {step.kernel.name}(", "def {NAME}(", 1)
                if body not in kernels:
                    kernels[body] = f"_kg_k{len(kernels)}"
                names[step.kernel.name] = kernels[body]
        rename.append(names)
    params = list(definition.inputs)
    baked = _baked_inputs(plans)
    parts = [
        f'"""{header}"""',
        *future,
        "import torch",
        "import triton",
        "import triton.language as tl",
        HELPERS,
    ]
    parts.extend(body.replace("{NAME}", name) for body, name in kernels.items())
    parts.append(_RUNTIME)
    table: list[str] = []
    for number, (plan, names) in enumerate(zip(plans, rename, strict=True)):
        parts.append(_plan_function(number, plan, params, names))
        table.append(f"    {_plan_key(plan, baked)}: _kg_plan{number},")
    parts.append("_KG_PLANS = {\n" + "\n".join(table) + "\n}")
    parts.append(f"_KG_BAKED = {tuple(sorted(baked))!r}")
    parts.append(reference)
    signature = ", ".join(params)
    parts.append(
        f"def run({signature}):\n"
        f"    args = ({signature}{',' if len(params) == 1 else ''})\n"
        "    plan = _KG_PLANS.get(_kg_key(args, _KG_BAKED))\n"
        "    if plan is None:\n"
        f"        return {REFERENCE_RUN}(*args)\n"
        "    return plan(*args)\n"
    )
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


_RUNTIME = """
def _kg_key(args, baked):
    # The input signature plans are keyed by: shape, dtype and strides of tensors; the value of
    # scalars some plan baked into its kernels; nothing else of other scalars.
    key = []
    for position, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            key.append((tuple(value.shape), value.dtype, tuple(value.stride())))
        elif position in baked:
            key.append(("value", value))
        else:
            key.append(("scalar",))
    return tuple(key)


_KG_CONSTANTS = {}


def _kg_constant(name, values, dtype, shape, device):
    # A tensor constant of the reference, copied to each device once (never an output).
    key = (name, device)
    if key not in _KG_CONSTANTS:
        _KG_CONSTANTS[key] = torch.tensor(values, dtype=dtype, device=device).reshape(shape)
    return _KG_CONSTANTS[key]


def _kg_strided(tensor, stride):
    # A torch result in the layout the kernels were generated for (copied only if it differs).
    if tuple(tensor.stride()) == stride:
        return tensor
    out = torch.empty_strided(tensor.shape, stride, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out
"""


def _baked_inputs(plans: list[WorkloadPlan]) -> set[int]:
    baked: set[int] = set()
    for plan in plans:
        for position, item in enumerate(plan.graph.inputs):
            if item.kind == "constant":
                baked.add(position)
    return baked


def _plan_key(plan: WorkloadPlan, baked: set[int]) -> str:
    parts: list[str] = []
    for position, item in enumerate(plan.graph.inputs):
        if item.kind == "tensor" and item.meta is not None:
            shape = tuple(item.meta.shape)
            stride = tuple(item.meta.stride)
            parts.append(f"({shape!r}, torch.{item.meta.dtype}, {stride!r})")
        elif position in baked:
            parts.append(f"('value', {item.value!r})")
        else:
            parts.append("('scalar',)")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


class _PlanWriter:
    """Writes one plan function."""

    def __init__(self, plan: WorkloadPlan, params: list[str], names: dict[str, str]) -> None:
        self.plan = plan
        self.graph = plan.graph
        self.names = names
        self.vars: dict[str, str] = {}
        for item, param in zip(self.graph.inputs, params, strict=True):
            self.vars[item.node] = param
        self.taken = set(params)
        self.lines: list[str] = []
        self.read_by_kernels = {
            key
            for step in plan.schedule.steps
            if isinstance(step, KernelStep)
            for key in step.kernel.pointers
        }
        # A torch view of a torch call's result (e.g. the attention call's output, returned
        # through views) needs the layout it was traced with, as a kernel does.
        self.read_by_kernels |= {
            buffer_key(ref)
            for step in plan.schedule.steps
            if isinstance(step, ExternStep)
            and (view := self.graph.nodes[step.node]).target in VIEW_TARGETS
            for ref in view.refs()
            if self.graph.node(ref).kind == Kind.EXTERN
            and self.graph.node(ref).target not in VIEW_TARGETS
        }

    def var(self, key: str) -> str:
        """The Python variable of a buffer: `b_<node>`, `b_<node>_<i>` for output i of a
        multi-output node, suffixed when that is taken (output 1 of node `split` and node
        `split_1` would both be `b_split_1`)."""
        if key not in self.vars:
            name = "b_" + key.replace(":", "_")
            while name in self.taken:
                name += "_"
            self.taken.add(name)
            self.vars[key] = name
        return self.vars[key]

    def write(self, params: list[str]) -> list[str]:
        tensors = [i.node for i in self.graph.inputs if i.kind == "tensor"]
        device = self.vars[tensors[0]] + ".device" if tensors else "torch.device('cuda')"
        self.lines.append(f"_kg_dev = {device}")
        for step in self.plan.schedule.steps:
            if isinstance(step, ExternStep):
                self._extern(step.node)
            else:
                self._kernel(step)
        outputs = [self._output(o) for o in self.graph.outputs]
        result = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ",)"
        self.lines.append(f"return {result}")
        return self.lines

    def _extern(self, name: str) -> None:
        node = self.graph.nodes[name]
        if node.target == CONSTANT_TARGET:
            values = self._arg(node.args[0])
            self.lines.append(
                f"{self.var(name)} = _kg_constant({name!r}, {values}, torch.{node.meta.dtype}, "
                f"{tuple(node.meta.shape)!r}, _kg_dev)"
            )
            return
        args = [self._arg(a) for a in node.args]
        if node.channels_last:
            # Input and weight channels-last: cuDNN's NHWC kernels, and an output in the
            # layout its readers were generated for (`conv_layout.py`).
            form = "torch.channels_last" if len(node.meta.shape) == 4 else "torch.channels_last_3d"
            for i in (0, 1):
                args[i] = f"{args[i]}.contiguous(memory_format={form})"
        args += [f"{k}={self._arg(v)}" for k, v in node.kwargs.items()]
        target = self._in_place(node) or node.target
        if target.count(".") < 2:
            msg = f"cannot call {target}"
            raise GenerationError(msg)
        call = f"torch.ops.{target}({', '.join(args)})"
        self.lines.append(f"{self.var(name)} = {call}")
        for index, out in enumerate(node.metas):
            key = buffer_key(Ref(name, index if node.multi_output else None))
            if out is None:
                continue
            if node.multi_output:
                self.lines.append(f"{self.var(key)} = {self.var(name)}[{index}]")
            if key in self.read_by_kernels:
                stride = tuple(out.stride)
                self.lines.append(f"{self.var(key)} = _kg_strided({self.var(key)}, {stride!r})")

    def _in_place(self, node: Node) -> str | None:
        """The in-place form of a scatter-like torch call whose destination is a buffer this
        plan allocated (a kernel's zeros or clone) and nothing else reads: `index_put_` on it
        instead of `index_put` copying it first (a KV-cache update, a one-hot routing mask)."""
        form = IN_PLACE.get(node.target)
        dest = node.args[0] if node.args else None
        if form is None or not isinstance(dest, Ref) or dest.index is not None:
            return None
        if dest.node not in self.plan.schedule.allocated or dest in self.graph.outputs:
            return None
        return form if self.graph.users.get(dest.node) == {node.name} else None

    def _kernel(self, step: KernelStep) -> None:
        kernel = step.kernel
        for key in kernel.pointers:
            if key in self.plan.schedule.allocated and key not in self.vars:
                meta = self.plan.schedule.buffers[key].meta
                self.lines.append(
                    f"{self.var(key)} = torch.empty({tuple(meta.shape)!r}, "
                    f"dtype=torch.{meta.dtype}, device=_kg_dev)"
                )
        if math.prod(step.space.shape) == 0:
            return
        args = [self.var(key) for key in kernel.pointers]
        args += [self.vars[name] for name in kernel.scalars]
        launch = kernel.launch
        args += [f"XBLOCK={launch.xblock}", f"RBLOCK={launch.rblock}"]
        if launch.kblock:
            args += [f"KBLOCK={launch.kblock}", f"GROUP_M={launch.group_m}"]
        args.append(f"num_warps={launch.num_warps}")
        if launch.num_stages:
            args.append(f"num_stages={launch.num_stages}")
        grid = ", ".join(str(g) for g in kernel.grid)
        self.lines.append(f"{self.names[kernel.name]}[({grid},)]({', '.join(args)})")

    def _output(self, value: Any) -> str:
        if isinstance(value, Ref):
            node = self.graph.node(value)
            if node.kind == Kind.INPUT:
                return f"{self.var(value.node)}.clone()"
            return self.var(buffer_key(value) if node.multi_output else value.node)
        return self._arg(value)

    def _arg(self, value: Any) -> str:
        if isinstance(value, Ref):
            node = self.graph.node(value)
            return self.var(buffer_key(value) if node.multi_output else value.node)
        if isinstance(value, DTypeArg):
            return f"torch.{value.name}"
        if isinstance(value, DeviceArg):
            return "_kg_dev"
        if isinstance(value, OtherArg):
            if (
                value.text.startswith("torch.")
                and value.text.replace(".", "").replace("_", "").isalnum()
            ):
                return value.text
            msg = f"cannot render argument {value.text!r}"
            raise GenerationError(msg)
        if isinstance(value, list | tuple):
            return "[" + ", ".join(self._arg(v) for v in value) + "]"
        if isinstance(value, float) and not math.isfinite(value):
            return f'float("{value}")'
        return repr(value)


def _plan_function(
    number: int, plan: WorkloadPlan, params: list[str], names: dict[str, str]
) -> str:
    lines = _PlanWriter(plan, params, names).write(params)
    body = "\n".join(f"    {line}" for line in lines)
    return f"def _kg_plan{number}({', '.join(params)}):\n    # workload {plan.uuid}\n{body}\n"


def rename_reference(source: str) -> tuple[list[str], str]:
    """(the reference's `from __future__` lines, its source with `run` renamed)."""
    tree = parse_module(source)
    future = [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module == "__future__"
    ]
    tree.body = [
        n for n in tree.body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    ]
    for statement in tree.body:
        if (
            isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef)
            and statement.name == "run"
        ):
            statement.name = REFERENCE_RUN
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "run":
            node.id = REFERENCE_RUN  # a use of the module-level `run` (or a local: renamed alike)
    return future, "# The reference, run for inputs no plan was generated for.\n" + ast.unparse(
        tree
    )
