"""The kernel generator: Triton solutions for any reference, from its traced operator graph.

Place in the flow: an offline strategy agent gets a problem's `TraceSet` (the reference traced
at every workload by `python -m kernelarc.tracing`, see `traces.py`), asks `generate` for the
solution source at one knob setting, and proposes it. Pure: no torch, no triton imported here;
the generated source imports them when it runs in the sandbox.

Pipeline per workload graph: decode and lower (`graph_ir`; a reverse or exclusive cumsum is one
scan), take the convolutions' biases into the kernels that read them and declare the
convolutions that run channels-last (`conv_layout`, the FUSE_CONV_BIAS and LAYOUT_CONV knobs:
kernels reading them walk memory order, `Space.order`, and an epilogue writing NCHW is a tile
kernel, `Space.tiled`), split reductions with few outputs and long
rows in two stages (`split_reductions`), schedule into torch calls and fused kernels
(`schedule`, `emit`; softmax(scores) @ V with matmul scores is one online-softmax kernel,
`attention`, whose key loop a position-only mask bounds, `attention_mask`; a reduction over
a dim that is not the last runs the column plan of
`space`; a cumsum or cumprod over the last dim is a row kernel on whole rows; embedding
lookups and gathers are loads at a loaded index, `gathers`; a kernel past MAX_KERNEL_LOADS
stores the value it recomputes most), render one plan per workload plus a dispatch on the
input signature with
the reference as fallback (`solution_source`): a signature the trace did not see runs the
reference, so a generated solution is never wrong for an unseen shape, only not faster.

Why an own generator rather than Inductor's Triton or a Helion config search (issue 15):
- Nothing compiles at run time. The solution is plain Triton plus torch calls for what stays
  extern, so the thread-injection checks (ours and the official one) see no compile threads and
  a kernel engineer can read it; Inductor's output calls Inductor runtime helpers tied to the
  torch build that wrote it, and Helion would be a run-time dependency of the evaluator machines
  whose autotuner runs for minutes per kernel.
- The knobs are data the strategy agents own: every schedule decision (block sizes, rows per
  program, column tiles, persistent or looped and two-stage reductions, one-pass variances,
  a matmul's fused epilogue or cuBLAS, its precision) is a knob in `knobs.py` that the tiling,
  memory, pipelining and fusion agents move; Inductor's choices are heuristics in its scheduler.
- Measured against torch.compile (docs/benchmarks.md, "Kernel generator vs eager and
  torch.compile"): at least as fast on 19 of 37 KernelBench problems on an H200, slower on
  convolutions, max pooling and a few reductions; the team keeps the compiler agent for those.
  Since then pooling and depthwise convolutions are fused taps (`kernelarc.tracing`): on an
  H100 depthwise convolutions 2.1-21x, 3-d poolings 1.25-1.81x, 1-d poolings 0.80-0.84x; the
  convolutions left to cuDNN, channels-last where the kernels can read them so and their bias
  added in the kernels, 0.80-1.28x; attention written out by hand 3.78x (one online-softmax
  kernel), but 0.40-0.52x of the fused attention that `scaled_dot_product_attention` calls.
"""

from collections import Counter
from dataclasses import dataclass

from kernelarc.kernelgen.conv_layout import (
    channels_last_convs,
    convertible_convs,
    peel_conv_biases,
)
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import MATMUL_TARGETS, GenerationError
from kernelarc.kernelgen.knobs import (
    ATTENTION_KNOBS,
    COLUMN_KNOBS,
    GEMM_KNOBS,
    KNOB_VALUES,
    POINTWISE_KNOBS,
    REDUCTION_KNOBS,
    TILE_KNOBS,
    Device,
    GenKnobs,
    default_knobs,
    launch_for,
)
from kernelarc.kernelgen.schedule import ExternStep, KernelStep, schedule_graph
from kernelarc.kernelgen.solution_source import WorkloadPlan, render_solution
from kernelarc.kernelgen.space import AttentionSpace, GemmSpace
from kernelarc.kernelgen.split_reductions import split_reductions
from kernelarc.kernelgen.views import VIEW_TARGETS
from kernelarc.schema import Definition
from kernelarc.schema.op_graph import TraceSet

__all__ = [
    "KNOB_VALUES",
    "Device",
    "GenKnobs",
    "Generated",
    "GenerationError",
    "default_knobs",
    "generate",
    "relevant_knobs",
]


@dataclass(frozen=True)
class Generated:
    """A generated solution source and what it consists of."""

    source: str
    planned: tuple[str, ...]
    """Workload uuids with a generated plan (the others run the reference)."""
    kernels: int
    """Fused kernels per call (the most over the plans)."""
    kinds: frozenset[str]
    """Kinds of the kernels: pointwise, reduction (the row plan: the last dim reduced), column
    (a reduction over a dim that is not the last: contiguous columns per program), gemm."""
    matmuls: bool
    """The graph has a matmul (as a GEMM kernel or a torch call)."""
    float32_matmuls: bool
    """Some matmul computes in float32 (the dot precision knob applies)."""
    externs: tuple[str, ...]
    """Torch operators called (not fused), most frequent first."""
    notes: tuple[str, ...]
    """What the generated code does differently from the reference, if anything."""
    skipped: tuple[str, ...]
    """`uuid: reason` of workloads without a plan."""
    split: tuple[str, ...] = ()
    """Ops of the reductions split in two stages (of the plan with the most splits)."""
    splittable: bool = False
    """Some reduction is split at some value of SPLIT_R (the knob matters)."""
    column_splittable: bool = False
    """Some column reduction is split at some value of SPLIT_COL (the knob matters)."""
    passes: int = 1
    """Most reads of its rows by one kernel (loops over the reduced axis; 1 for tiles that
    hold whole rows and for pointwise kernels): 2 for a looped norm with VAR_ONEPASS, 3
    without."""
    variances: bool = False
    """The graph computes a variance (the VAR_ONEPASS knob matters)."""
    convolutions: bool = False
    """Some convolution could run channels-last (the LAYOUT_CONV knob matters)."""
    conv_biases: bool = False
    """Some convolution's bias could be added in the kernels (FUSE_CONV_BIAS matters)."""
    sdpa: bool = False
    """Some attention is exactly a `scaled_dot_product_attention` call (FUSE_SDPA matters)."""

    def summary(self) -> str:
        """One line: kernels, torch calls, split reductions, coverage."""
        calls = ", ".join(self.externs) if self.externs else "no torch calls"
        kind = "/".join(sorted(self.kinds)) or "no"
        split = f", {len(self.split)} reduction(s) split in two stages" if self.split else ""
        return (
            f"{self.kernels} fused {kind} kernel(s) per call, {calls}{split}; "
            f"plans for {len(self.planned)} workload(s)"
        )


def generate(
    definition: Definition,
    traces: TraceSet,
    knobs: GenKnobs,
    device: Device,
    header: str,
) -> Generated:
    """The solution at one knob setting.

    Raises:
        GenerationError: no traced workload could be scheduled (the message gives the first
            reason per workload).
    """
    plans: list[WorkloadPlan] = []
    skipped: list[str] = []
    notes: list[str] = []
    split: tuple[str, ...] = ()
    splittable = column_splittable = variances = convolutions = sdpa = False
    biases: list[str] = []
    for traced in traces.workloads:
        if traced.graph is None:
            skipped.append(f"{traced.uuid}: trace failed: {traced.error}")
            continue
        try:
            one_pass = bool(knobs.get("VAR_ONEPASS", 1))
            graph = build_graph(
                traced.graph, one_pass_variance=one_pass, narrow_loads=device == "cuda"
            )
            biases = peel_conv_biases(graph, bool(knobs.get("FUSE_CONV_BIAS", 1))) or biases
            convertible = convertible_convs(graph)
            convolutions = convolutions or bool(convertible)
            if knobs.get("LAYOUT_CONV", 0):
                channels_last_convs(graph, convertible)
            result = split_reductions(graph, knobs, device)
            sched = schedule_graph(
                graph,
                lambda space: launch_for(space, knobs, device),
                fuse_gemm=bool(knobs.get("FUSE_GEMM", 0)),
                flash=bool(knobs.get("FLASH", 0)),
                sdpa=bool(knobs.get("FUSE_SDPA", 0)),
            )
        except GenerationError as exc:
            skipped.append(f"{traced.uuid}: {exc}")
            continue
        notes.extend(n for n in graph.notes if n not in notes)
        split = max(split, result.split, key=len)
        variances = variances or graph.variances > 0
        sdpa = sdpa or graph.sdpa_forms > 0
        splittable = splittable or result.splittable
        column_splittable = column_splittable or result.column_splittable
        plans.append(WorkloadPlan(traced.uuid, graph, sched))
    if not plans:
        reasons = "; ".join(dict.fromkeys(s.split(": ", 1)[1] for s in skipped))
        raise GenerationError(reasons or "no workload was traced")
    source = render_solution(definition, plans, header)
    externs: Counter[str] = Counter()
    kernels = 0
    passes = 1
    kinds: set[str] = set()
    matmuls = f32_matmuls = False
    for plan in plans:
        steps = plan.schedule.steps
        kernels = max(kernels, sum(isinstance(s, KernelStep) for s in steps))
        for step in steps:
            if isinstance(step, ExternStep):
                target = plan.graph.nodes[step.node].target
                if target not in VIEW_TARGETS:  # zero-copy torch views are not calls
                    externs[target] += 1
            else:
                kinds.add(_kernel_kind(step))
                passes = max(passes, step.kernel.passes)
        for node in plan.graph.nodes.values():
            if node.target in MATMUL_TARGETS:
                matmuls = True
                f32_matmuls = f32_matmuls or node.meta.dtype == "float32"
    return Generated(
        source=source,
        planned=tuple(p.uuid for p in plans),
        kernels=kernels,
        kinds=frozenset(kinds),
        matmuls=matmuls,
        float32_matmuls=f32_matmuls,
        externs=tuple(name for name, _ in externs.most_common()),
        notes=tuple(notes),
        skipped=tuple(skipped),
        split=split,
        splittable=splittable,
        column_splittable=column_splittable,
        passes=passes,
        variances=variances,
        convolutions=convolutions,
        conv_biases=bool(biases),
        sdpa=sdpa,
    )


def _kernel_kind(step: KernelStep) -> str:
    if isinstance(step.space, AttentionSpace):
        return "attention"
    if isinstance(step.space, GemmSpace):
        return "gemm"
    if step.space.column:
        return "column"
    if step.space.tiled:
        return "tile"
    return "reduction" if step.space.is_reduction else "pointwise"


#: Knobs of each kernel kind.
_KIND_KNOBS = (
    ("pointwise", POINTWISE_KNOBS),
    ("reduction", REDUCTION_KNOBS),
    ("column", COLUMN_KNOBS),
    ("tile", TILE_KNOBS),
    ("attention", ("FLASH", *ATTENTION_KNOBS)),
)


def relevant_knobs(generated: Generated) -> tuple[str, ...]:
    """The knobs that change this solution (at some setting of the others)."""
    names: list[str] = []
    for kind, knobs in _KIND_KNOBS:
        if kind in generated.kinds:
            names.extend(n for n in knobs if n not in names)
    if generated.splittable:
        names.append("SPLIT_R")
    if generated.column_splittable:
        names.append("SPLIT_COL")
    if generated.variances:
        names.append("VAR_ONEPASS")
    if generated.convolutions:
        names.append("LAYOUT_CONV")
    if generated.conv_biases:
        names.append("FUSE_CONV_BIAS")
    if generated.sdpa:  # the attention kernel's knobs matter once FUSE_SDPA is off
        names.extend(n for n in ("FUSE_SDPA", "FLASH", *ATTENTION_KNOBS) if n not in names)
    if generated.matmuls:
        names.append("FUSE_GEMM")
        names.extend(n for n in GEMM_KNOBS if n not in names)
        if generated.float32_matmuls:
            names.append("DOT_PRECISION")
    return tuple(names)
