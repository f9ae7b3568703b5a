"""The Triton template library: kernel families, their knob spaces, and rendering.

Place in the flow: a strategy agent (e.g. `TritonTemplateAgent`) asks `match_template(problem)`
for the template that fits a problem, picks a knob setting, and calls `render_source` (or
`KernelTemplate.render`) to get the `kernel.py` text of a candidate. Candidates run in the
sandbox; nothing here imports torch or triton.

Families (template texts live beside this module as `templates/<family>.py.txt`):

| family | serves (op_type) | kernel |
| --- | --- | --- |
| gated_activation | activation, silu_and_mul, swiglu, geglu | act(x[..., :D]) * x[..., D:] |
| rmsnorm | rmsnorm, norm, add_rmsnorm, fused_add_rmsnorm | RMSNorm, optionally of x + residual |
| add_layernorm | layernorm, add_layernorm, norm | x + residual, then LayerNorm with bias |
| softmax | softmax | softmax over the last axis |
| gemm_epilogue | gemm, linear, matmul | act(a @ b + bias), b as [N, K] or [K, N] |
| rope | rope, rotary | rotate-half rotary embedding of q and k |
| rmsnorm_backward | rmsnorm_backward, rmsnorm_bwd | grad_x and grad_weight of RMSNorm |

The families' knob spaces and priors are data here; what a template is (its knob checks, the
setting grid, rendering) is `kernel_template.py`'s, re-exported here for the agents.
"""

from collections.abc import Mapping, Sequence

from kernelarc.agents.triton.gemm_template_knobs import (
    GEMM_DIMS,
    gemm_constraint,
    gemm_match_constraint,
)
from kernelarc.agents.triton.kernel_template import (
    KernelTemplate,
    KnobDim,
    Knobs,
    render_source,
)
from kernelarc.agents.triton.template_graph import confirm_match
from kernelarc.agents.triton.template_matchers import (
    TemplateMatch,
    find_activation,
    find_eps,
    find_gelu_tanh,
    match_add_layernorm,
    match_gated_activation,
    match_gemm_epilogue,
    match_rmsnorm,
    match_rmsnorm_backward,
    match_rope,
    match_softmax,
    probe_shapes,
    torch_dtype,
)
from kernelarc.kernelgen.traces import load_traces, workload_files
from kernelarc.problems.files import Problem
from kernelarc.schema import Definition

__all__ = [
    "TEMPLATES",
    "KernelTemplate",
    "KnobDim",
    "Knobs",
    "TemplateMatch",
    "find_activation",
    "find_eps",
    "find_gelu_tanh",
    "match_template",
    "probe_shapes",
    "render_source",
    "template_named",
    "torch_dtype",
]


# --- knob dimensions shared by families ----------------------------------------------------


def _row_dims(
    block_h: Sequence[int], warps: Sequence[int], vec: Sequence[int], persistent: Sequence[int]
) -> tuple[KnobDim, ...]:
    """The knobs of a row-wise kernel (norms, softmax)."""
    return (
        KnobDim(
            "BLOCK_H",
            tuple(block_h),
            (1024,),
            "tile",
            "widest row chunk kept in registers; a row that fits is read once (one pass), a "
            "longer one is streamed in chunks of this width (two or three passes)",
        ),
        KnobDim(
            "ROWS",
            (1, 2, 4, 8),
            (16, 64),
            "tile",
            "rows per program step (halved at launch until the tile fits in registers)",
        ),
        KnobDim(
            "NUM_WARPS",
            tuple(warps),
            (4,),
            "launch",
            "warps per program (halved at launch until each thread holds VEC elements)",
        ),
        KnobDim(
            "VEC",
            tuple(vec),
            (8,),
            "tile",
            "vector width: fewest contiguous elements per thread (8 bf16 = one 16-byte access)",
        ),
        KnobDim(
            "PERSISTENT",
            tuple(persistent),
            (0,) if 0 in persistent else (1,),
            "schedule",
            "0: one program per row block; n > 0: a persistent grid of n programs per SM "
            "looping over row blocks",
            pow2=False,
        ),
        KnobDim(
            "NUM_STAGES",
            (1, 2),
            (1,),
            "launch",
            "software-pipelining depth of the kernel's loops (num_stages)",
            pow2=False,
        ),
    )


#: Likely Hopper winners for a bf16 norm over 4096-8192 columns: the row in registers, one row
#: per program with 8-16 warps (16-32 values per thread), then more rows or a persistent grid.
_NORM_PRIORS: tuple[Mapping[str, int], ...] = (
    {},
    {"NUM_WARPS": 16},
    {"ROWS": 2, "NUM_WARPS": 16},
    {"NUM_WARPS": 4},
    {"PERSISTENT": 2},
    {"ROWS": 4, "NUM_WARPS": 16},
    {"VEC": 16},
    {"PERSISTENT": 4, "NUM_WARPS": 16},
)

TEMPLATES: tuple[KernelTemplate, ...] = (
    KernelTemplate(
        "gated_activation",
        frozenset({"activation", "silu_and_mul", "swiglu", "geglu", "gelu_and_mul"}),
        (
            KnobDim("BLOCK_D", (2048, 1024, 4096, 512), (1024,), "tile", "columns per tile"),
            KnobDim("ROWS", (2, 1, 4, 8), (32, 64), "tile", "rows per tile"),
            KnobDim(
                "NUM_WARPS",
                (8, 4, 16),
                (4,),
                "launch",
                "warps per program (halved at launch until each thread holds VEC elements)",
            ),
            KnobDim(
                "VEC",
                (8, 16, 4),
                (8,),
                "tile",
                "vector width: fewest contiguous elements per thread (warps are halved to keep it)",
            ),
            KnobDim(
                "PERSISTENT",
                (0, 2, 4),
                (0, 1),
                "schedule",
                "0: one program per tile; n > 0: n programs per SM looping over tiles",
                pow2=False,
            ),
        ),
        match_gated_activation,
        cuda_priors=(
            {},
            {"ROWS": 1, "NUM_WARPS": 4},
            {"ROWS": 4, "NUM_WARPS": 16},
            {"PERSISTENT": 4},
            {"ROWS": 1},
            {"BLOCK_D": 1024, "ROWS": 4},
            {"VEC": 16, "ROWS": 4},
        ),
        summary="out = act(gate) * up on [ROWS, BLOCK_D] tiles, one read of x, one write",
    ),
    KernelTemplate(
        "rmsnorm",
        frozenset({"rmsnorm", "rms_norm", "norm", "add_rmsnorm", "fused_add_rmsnorm"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (0, 2, 1, 4)),
        match_rmsnorm,
        cuda_priors=_NORM_PRIORS,
        summary="RMSNorm (optionally of x + residual) with the row in registers, one pass",
    ),
    KernelTemplate(
        "add_layernorm",
        frozenset({"layernorm", "layer_norm", "add_layernorm", "norm"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (0, 2, 1, 4)),
        match_add_layernorm,
        cuda_priors=_NORM_PRIORS,
        summary="residual add + LayerNorm, both outputs written in one pass over x and residual",
    ),
    KernelTemplate(
        "softmax",
        frozenset({"softmax"}),
        _row_dims((8192, 16384, 4096, 32768), (16, 8, 32, 4), (4, 8), (0, 2, 1, 4)),
        match_softmax,
        cuda_priors=(
            {},
            {"BLOCK_H": 16384},
            {"NUM_WARPS": 8},
            {"BLOCK_H": 4096, "NUM_WARPS": 8},
            {"BLOCK_H": 32768, "NUM_WARPS": 32},
            {"PERSISTENT": 2},
            {"ROWS": 2},
        ),
        summary="softmax: one pass for rows that fit, else online max/sum then a normalise pass",
    ),
    KernelTemplate(
        "gemm_epilogue",
        frozenset({"gemm", "linear", "matmul"}),
        GEMM_DIMS,
        match_gemm_epilogue,
        cuda_priors=(
            {},
            {"BLOCK_N": 128, "NUM_STAGES": 4},
            {"NUM_STAGES": 4},
            {"BLOCK_N": 128, "NUM_WARPS": 4, "NUM_STAGES": 4},
            {"BLOCK_M": 256, "BLOCK_N": 128},
            {"PERSISTENT": 1},
            {"BLOCK_N": 128, "NUM_STAGES": 4, "PERSISTENT": 1},
            {"BLOCK_K": 128, "BLOCK_N": 128, "NUM_STAGES": 3},
        ),
        constraint=gemm_constraint,
        match_constraint=gemm_match_constraint,
        summary="tiled tl.dot GEMM, float32 accumulation, bias + activation fused in the epilogue",
    ),
    KernelTemplate(
        "rope",
        frozenset({"rope", "rotary", "rotary_embedding"}),
        (
            KnobDim("ROWS", (1, 2, 4, 8), (32, 8), "tile", "tokens per program step"),
            KnobDim(
                "BLOCK_HEADS",
                (32, 16, 8),
                (32,),
                "tile",
                "heads rotated at once (capped at the head count)",
            ),
            KnobDim(
                "NUM_WARPS",
                (4, 8, 2, 16),
                (4,),
                "launch",
                "warps per program (halved at launch until each thread holds VEC elements)",
            ),
            KnobDim("VEC", (4, 8, 2), (4,), "tile", "fewest elements per thread"),
            KnobDim(
                "PERSISTENT",
                (0, 2, 4),
                (0,),
                "schedule",
                "0: one program per token block; n > 0: n programs per SM looping over blocks",
                pow2=False,
            ),
        ),
        match_rope,
        cuda_priors=(
            {},
            {"ROWS": 2, "NUM_WARPS": 8},
            {"NUM_WARPS": 8},
            {"ROWS": 4, "NUM_WARPS": 8},
            {"ROWS": 2, "NUM_WARPS": 8, "PERSISTENT": 4},
            {"BLOCK_HEADS": 16},
            {"ROWS": 2, "NUM_WARPS": 4},
        ),
        summary="rotate-half RoPE of q and k, cos/sin loaded once per token",
    ),
    KernelTemplate(
        "rmsnorm_backward",
        frozenset({"rmsnorm_backward", "rmsnorm_bwd", "rms_norm_backward"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (2, 1, 4)),
        match_rmsnorm_backward,
        cuda_priors=(
            {},
            {"NUM_WARPS": 16},
            {"PERSISTENT": 4},
            {"PERSISTENT": 1, "NUM_WARPS": 16},
            {"ROWS": 2, "NUM_WARPS": 16},
            {"NUM_STAGES": 2},
        ),
        summary="RMSNorm backward: grad_x in one pass per row on a persistent grid, grad_weight "
        "from per-program shares summed by a second small kernel",
    ),
)


def template_named(family: str) -> KernelTemplate:
    """The template of a family.

    Raises:
        KeyError: no such family (the message lists them).
    """
    for template in TEMPLATES:
        if template.family == family:
            return template
    msg = f"no Triton template {family!r}; families: {[t.family for t in TEMPLATES]}"
    raise KeyError(msg)


def match_template(
    problem: Problem | Definition,
) -> tuple[KernelTemplate, TemplateMatch] | list[str]:
    """The first template that fits the problem, or one reason per template for why none does.

    For a `Problem` whose reference traces (`kernelgen.traces`), a match must also agree with
    the traced graph (`template_graph.confirm_match`), which sets the GEMM's operand layout; a
    bare `Definition`, or a reference that does not trace, is matched on its text alone."""
    definition = problem.definition if isinstance(problem, Problem) else problem
    reasons: list[str] = []
    for template in TEMPLATES:
        result: TemplateMatch | str = template.bind(definition)
        if isinstance(result, TemplateMatch) and isinstance(problem, Problem):
            result = _confirmed(problem, result)
        if isinstance(result, TemplateMatch):
            return template, result
        reasons.append(f"{template.family}: {result}")
    return reasons


def _confirmed(problem: Problem, match: TemplateMatch) -> TemplateMatch | str:
    traces = load_traces(problem.path, workload_files(problem.path))
    if isinstance(traces, str):
        return match
    return confirm_match(match, traces)
