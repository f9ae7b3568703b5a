"""Write the SOL-ExecBench files of a converted KernelBench problem.

Place in the flow: the last step of `convert.py`, after the shapes were probed and the workload
sizes chosen. Inputs are the forward's arguments (named as in `Model.forward`), then the model's
parameters and buffers (`conv.weight` -> `conv_weight`); every input is `custom`, drawn by the
reference's `make_inputs` as KernelBench draws it. Axes: each size constant that sets an input
dim is an axis of its own name; a dim that follows the sizes without being one (a convolution's
output) is a derived axis, bound per workload to the value the meta run gave; dims that never
move are literal sizes. An axis whose value differs between the workloads is `var`, the others
`const`.
"""

import ast
import keyword
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelarc.problems.kernelbench import adapter
from kernelarc.problems.kernelbench.builder_source import BUILDER_NAME, builder_source
from kernelarc.problems.kernelbench.shape_probe import Probes, Slot, Snapshot
from kernelarc.problems.kernelbench.workload_sizes import Sizing, WorkloadPlan

ENTRYPOINT = "make_inputs"
_PROBLEM_VAR = "_KERNELBENCH"


@dataclass
class _Names:
    taken: set[str] = field(default_factory=set)

    def claim(self, wanted: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in wanted) or "value"
        if base[0].isdigit():
            base = f"v{base}"
        if keyword.iskeyword(base):
            base = f"{base}_"
        name, n = base, 2
        while name in self.taken or name == _PROBLEM_VAR:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name


@dataclass(frozen=True)
class ProblemSpec:
    """What is known about the file when its files are written."""

    name: str
    label: str
    """Where it came from, e.g. `level1/36_RMSNorm_.py`."""
    op_type: str | None
    docstring: str | None
    source: str
    forward_params: Sequence[str]
    """Parameter names of `Model.forward` (without self); extra inputs are `arg<i>`."""
    probes: Probes
    plan: WorkloadPlan


@dataclass(frozen=True)
class BuiltProblem:
    """The three files' contents, and a summary of the axes for the report."""

    definition: dict[str, Any]
    cpu_workloads: list[dict[str, Any]]
    gpu_workloads: list[dict[str, Any]]
    axes_summary: dict[str, str]


def _slots_of(snapshot: Snapshot, group: str, index: int) -> list[Slot]:
    info = snapshot.groups()[group][index]
    return [(group, index, d) for d in range(len(info.shape or ()))]


def build_problem(spec: ProblemSpec) -> BuiltProblem:
    """The definition and workloads of one converted file."""
    base = spec.probes.base
    names = _Names()
    forward = [
        names.claim(spec.forward_params[i] if i < len(spec.forward_params) else f"arg{i}")
        for i in range(len(base.forward))
    ]
    state = [names.claim(info.name.replace(".", "_")) for info in base.state]
    outputs = [
        names.claim("output" if len(base.outputs) == 1 else f"output_{i}")
        for i in range(len(base.outputs))
    ]
    tensor_names = {"forward": forward, "state": state, "output": outputs}
    sizings = [*spec.plan.cpu, *spec.plan.gpu]
    axis_of, values = _assign_axes(spec.probes, sizings, tensor_names, names)
    size_axes = {c.axis: axis_of[_first_input_slot(spec.probes, c.axis)] for c in spec.probes.axes}
    axes: dict[str, dict[str, Any]] = {}
    summary: dict[str, str] = {}
    for axis, per_workload in values.items():
        derived = axis not in size_axes.values()
        if len(set(per_workload)) > 1:
            axes[axis] = {"type": "var"}
            summary[axis] = "var (derived)" if derived else "var"
        else:
            axes[axis] = {"type": "const", "value": per_workload[0]}
            summary[axis] = f"const={per_workload[0]}"

    def shape(group: str, index: int) -> list[str] | None:
        info = base.groups()[group][index]
        if info.shape is None:
            return None
        return [
            axis_of.get(slot, str(info.shape[slot[2]])) for slot in _slots_of(base, group, index)
        ]

    inputs: dict[str, dict[str, Any]] = {}
    for group in ("forward", "state"):
        for i, info in enumerate(base.groups()[group]):
            entry: dict[str, Any] = {"shape": shape(group, i), "dtype": info.dtype}
            if group == "state":
                entry["description"] = f"the Model's {info.kind} `{info.name}`"
            inputs[tensor_names[group][i]] = entry
    outs = {
        outputs[i]: {"shape": shape("output", i), "dtype": info.dtype}
        for i, info in enumerate(base.outputs)
    }
    definition: dict[str, Any] = {
        "name": spec.name,
        **({"op_type": spec.op_type} if spec.op_type else {}),
        "description": _description(spec, forward, base),
        "axes": axes,
        "inputs": inputs,
        "outputs": outs,
        "reference": _reference(spec, forward, state, tensor_names, size_axes),
        "custom_inputs_entrypoint": ENTRYPOINT,
    }
    var_axes = [a for a, v in axes.items() if v["type"] == "var"]
    size_var = [size_axes[c.axis] for c in spec.probes.axes if size_axes[c.axis] in var_axes]

    def workload(tag: str, sizing_index: int) -> dict[str, Any]:
        dims = "x".join(str(values[a][sizing_index]) for a in size_var)
        return {
            "uuid": f"{spec.name}-{tag}" + (f"-{dims}" if dims else ""),
            "axes": {a: values[a][sizing_index] for a in var_axes},
            "inputs": {name: {"type": "custom"} for name in inputs},
        }

    n_cpu = len(spec.plan.cpu)
    cpu = [workload(f"cpu{i + 1}", i) for i in range(n_cpu)]
    gpu = [
        workload("kernelbench" if i == 0 else f"gpu{i + 1}", n_cpu + i)
        for i in range(len(spec.plan.gpu))
    ]
    return BuiltProblem(definition, cpu, gpu, summary)


def _first_input_slot(probes: Probes, axis: str) -> Slot:
    owned = sorted(s for s, owner in probes.owner.items() if owner == axis and s[0] != "output")
    # forward before state: "forward" < "state" alphabetically, then tensor and dim order
    return owned[0]


def _assign_axes(
    probes: Probes,
    sizings: list[Sizing],
    tensor_names: dict[str, list[str]],
    names: _Names,
) -> tuple[dict[Slot, str], dict[str, list[int]]]:
    """Slot -> axis name (literal slots are left out), and axis -> its value per workload."""
    axis_of: dict[Slot, str] = {}
    values: dict[str, list[int]] = {}
    renamed = {c.axis: names.claim(c.axis) for c in probes.axes}
    for constant in probes.axes:
        values[renamed[constant.axis]] = [s.sizes[constant.axis] for s in sizings]
    derived: dict[tuple[tuple[int, ...], tuple[int, ...]], str] = {}
    for slot in sorted(probes.base.dims(), key=_slot_order):
        owner = probes.owner.get(slot)
        if owner is not None:
            axis_of[slot] = renamed[owner]
            continue
        seen = tuple(s.snapshot.dims()[slot] for s in sizings)
        if slot not in probes.moved and len(set(seen)) == 1:
            continue  # a literal size
        key = (probes.signature[slot], seen)
        if key not in derived:
            group, index, dim = slot
            derived[key] = names.claim(f"{tensor_names[group][index]}_dim{dim}")
            values[derived[key]] = list(seen)
        axis_of[slot] = derived[key]
    return axis_of, values


def _slot_order(slot: Slot) -> tuple[int, int, int]:
    return ({"forward": 0, "state": 1, "output": 2}[slot[0]], slot[1], slot[2])


def _description(spec: ProblemSpec, forward: list[str], base: Snapshot) -> str:
    text = " ".join((spec.docstring or "").split("\n\n")[0].split())
    state = ", ".join(f"`{info.name}`" for info in base.state)
    parts = [f"KernelBench {spec.label}: {text or 'no docstring'}"]
    parts.append(
        f"Inputs: the forward's arguments ({', '.join(forward) or 'none'})"
        + (f", then the Model's parameters and buffers ({state})" if state else "")
        + "; make_inputs draws them as KernelBench does (get_inputs() and a freshly "
        "initialised Model(*get_init_inputs()))."
    )
    parts.append("Converted by `kernelarc problems import kernelbench`.")
    return " ".join(p if p.endswith(".") else p + "." for p in parts)


def adapter_source() -> str:
    """adapter.py without its module docstring (the reference has its own)."""
    text = Path(adapter.__file__).read_text(encoding="utf-8")
    tree = ast.parse(text)
    first = tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        lines = text.splitlines(keepends=True)
        text = "".join(lines[first.end_lineno or 0 :]).lstrip("\n")
    return text


def _reference(
    spec: ProblemSpec,
    forward: list[str],
    state: list[str],
    tensor_names: dict[str, list[str]],
    size_axes: dict[str, str],
) -> str:
    base = spec.probes.base
    constants = {size_axes[a.axis]: list(a.targets) for a in spec.probes.axes}
    builder = builder_source(spec.source, spec.label, constants)
    size_of = {}
    for constant in spec.probes.axes:
        group, index, dim = _first_input_slot(spec.probes, constant.axis)
        size_of[size_axes[constant.axis]] = (tensor_names[group][index], dim)
    state_inputs = {state[i]: info.name for i, info in enumerate(base.state)}
    params = ", ".join([*forward, *state])
    values = params + ("," if len(forward) + len(state) == 1 else "")  # a 1-tuple needs a comma
    header = (
        f'"""KernelBench {spec.label} as a SOL-ExecBench reference.\n\n'
        "Written by `kernelarc problems import kernelbench`. The KernelBench file's top-level\n"
        f"code is the body of {BUILDER_NAME}(), which sets its size constants to the sizes\n"
        "asked for and returns its Model, get_inputs and get_init_inputs; run() calls that Model\n"
        "on the given inputs with torch.func.functional_call, and make_inputs() draws the\n"
        "inputs the way KernelBench does.\n"
        '"""\n\n'
    )
    if builder.future_imports:
        header += builder.future_imports + "\n\n"
    tail = (
        f"\n\n\n{builder.function}\n\n"
        f"{_PROBLEM_VAR} = KernelBenchProblem(\n"
        f"    {BUILDER_NAME},\n"
        f"    forward_inputs={forward!r},\n"
        f"    state_inputs={state_inputs!r},\n"
        f"    size_of={size_of!r},\n"
        ")\n\n\n"
        f"def run({params}):\n"
        f"    return {_PROBLEM_VAR}.run(({values}))\n"
        "\n\n"
        f"def {ENTRYPOINT}(axes_and_scalars, device):\n"
        f"    return {_PROBLEM_VAR}.make_inputs(axes_and_scalars, device)\n"
    )
    return header + adapter_source().rstrip("\n") + tail
