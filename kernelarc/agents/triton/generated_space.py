"""Adapter from the kernel generator (`kernelarc.kernelgen`) to the strategy agents' `KnobSpace`.

Place in the flow: the Triton strategy agents (tiling, memory, fusion, pipelining) call
`generated_space` once per problem when no hand-written template fits it (the fusion agent
always does, so both families compete), then `render_generated` per setting. The problem's
reference is traced once, in a subprocess (`kernelgen.traces`); generating a setting is pure.
Knob owners follow the same rules as the templates' (`template_knobs.knob_owner`).
"""

from dataclasses import dataclass
from typing import Literal

from kernelarc.agents.knob_search import KnobSpace, KnobValue
from kernelarc.agents.triton.template_knobs import knob_owner
from kernelarc.kernelgen import (
    KNOB_VALUES,
    Generated,
    GenerationError,
    default_knobs,
    generate,
    relevant_knobs,
)
from kernelarc.kernelgen.traces import load_traces, workload_files
from kernelarc.problems.files import Problem
from kernelarc.schema import Definition
from kernelarc.schema.op_graph import TraceSet

FAMILY = "triton/gen"
_GROUPS = {"NUM_WARPS": "launch", "NUM_WARPS_RED": "launch", "PERSISTENT_MAX": "schedule"}


@dataclass(frozen=True)
class GeneratedContext:
    """What rendering a setting needs."""

    definition: Definition
    traces: TraceSet
    device: Literal["cpu", "cuda"]
    probe: Generated
    """The solution at the default setting (its summary describes every setting's structure)."""


def generated_space(problem: Problem, device: str) -> tuple[KnobSpace, GeneratedContext] | str:
    """The generated kernels' knob space for a problem, or why the generator does not apply."""
    target: Literal["cpu", "cuda"] = "cuda" if device == "cuda" else "cpu"
    traces = load_traces(problem.path, workload_files(problem.path))
    if isinstance(traces, str):
        return f"no generated kernel: {traces}"
    try:
        probe = generate(problem.definition, traces, default_knobs(target), target, "probe")
    except GenerationError as exc:
        return f"no generated kernel: {exc}"
    if probe.kernels == 0 and not probe.matmuls:
        # Every operator stays a torch call (e.g. a pooling the generator does not fuse): the
        # "generated" solution would be the reference in other clothes, costing a timed run and
        # a guard challenge (H200 suite, max_pool2d) and counting as a Triton kernel it is not.
        calls = ", ".join(probe.externs) or "no operator"
        return f"no generated kernel: every operator runs as a torch call ({calls})"
    wanted = {w.uuid for w in problem.workloads}
    if wanted and not wanted & set(probe.planned):
        reason = probe.skipped[0] if probe.skipped else "no plan for these workloads"
        return f"no generated kernel for the campaign's workloads: {reason}"
    names = relevant_knobs(probe) or ("BLOCK_X",)
    options: dict[str, tuple[KnobValue, ...]] = {n: KNOB_VALUES[n][target] for n in names}
    space = KnobSpace(
        family=FAMILY,
        options=options,
        default={n: values[0] for n, values in options.items()},
        owners={n: knob_owner(n, _GROUPS.get(n, "tile")) for n in names},
    )
    return space, GeneratedContext(problem.definition, traces, target, probe)


def render_generated(
    context: GeneratedContext, setting: dict[str, KnobValue], header: str
) -> Generated:
    """The solution at one setting (knobs the space does not list stay at their default).

    Raises:
        GenerationError: the setting cannot be generated (never for a setting of the space,
            unless the generator has a bug).
    """
    knobs = default_knobs(context.device) | {name: int(v) for name, v in setting.items()}
    return generate(context.definition, context.traces, knobs, context.device, header)
