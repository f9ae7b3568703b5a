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

#: Shared memory a GEMM setting may plan for (H100/H200 allow 227 KB per block).
GEMM_SMEM_LIMIT_BYTES = 220 * 1024
#: Float32 values one thread may hold for an accumulator or row tile before registers spill.
MAX_TILE_PER_THREAD = 128

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


def gemm_smem_bytes(knobs: Knobs, element_bytes: int) -> int:
    """Shared memory the GEMM template's pipelined A and B tiles take."""
    bm, bn, bk = knobs["BLOCK_M"], knobs["BLOCK_N"], knobs["BLOCK_K"]
    return (bm + bn) * bk * element_bytes * knobs["NUM_STAGES"]


def _gemm_constraint(knobs: Knobs) -> str | None:
    # 16-bit operands here; float32 ones take twice as much (`template_knobs.triton_space`).
    bm, bn, bk = knobs["BLOCK_M"], knobs["BLOCK_N"], knobs["BLOCK_K"]
    smem = gemm_smem_bytes(knobs, 2)
    if smem > GEMM_SMEM_LIMIT_BYTES:
        return f"{knobs['NUM_STAGES']} stages of {bm}x{bk} and {bk}x{bn} tiles need {smem} B"
    per_thread = bm * bn // (32 * knobs["NUM_WARPS"])
    if per_thread > MAX_TILE_PER_THREAD:
        return f"a {bm}x{bn} accumulator over {knobs['NUM_WARPS']} warps is {per_thread}/thread"
    return None


#: The GEMM template's knobs.
_GEMM_DIMS: tuple[KnobDim, ...] = (
    KnobDim("BLOCK_M", (128, 64, 256), (32, 64), "tile", "output tile rows"),
    KnobDim("BLOCK_N", (256, 128, 64), (128, 64), "tile", "output tile columns"),
    KnobDim("BLOCK_K", (64, 32, 128), (128, 64), "tile", "reduction step"),
    KnobDim(
        "GROUP_M",
        (8, 16, 4),
        (8,),
        "schedule",
        "tile rows per group in the L2-friendly grouped launch order",
    ),
    KnobDim("NUM_WARPS", (8, 4), (4,), "launch", "warps per program"),
    KnobDim(
        "NUM_STAGES",
        (3, 4, 5, 2),
        (2,),
        "launch",
        "software-pipelining depth of the K loop (shared-memory buffers)",
        pow2=False,
    ),
    KnobDim(
        "PERSISTENT",
        (0, 1),
        (0, 1),
        "schedule",
        "0: one program per tile; 1: one program per SM looping over tiles",
        pow2=False,
    ),
    KnobDim(
        "DOT_PRECISION",
        (2, 1, 0),
        (0,),
        "precision",
        "float32 operands: 2 TF32x3 (about float32 accuracy, on tensor cores), 1 TF32, "
        "0 IEEE (CUDA cores: 5.1 ms where cuBLAS took 0.35, H100, kb_l1_2); "
        "16-bit operands ignore it",
        pow2=False,
    ),
)


def _gemm_match_constraint(match: TemplateMatch, knobs: Knobs, device: str) -> str | None:
    """float32 operands take twice the shared memory `_gemm_constraint` assumes (a 4-stage
    128x256x64 setting asked Triton for 288 KiB on the H100, suite run 15); 16-bit operands
    ignore DOT_PRECISION, which then keeps its first value (no kernel that differs in an
    unused constant only)."""
    if dict(match.constants).get("IEEE_DOT") != "True":
        first = next(d for d in _GEMM_DIMS if d.name == "DOT_PRECISION").for_device(device)[0]
        return None if knobs["DOT_PRECISION"] == first else "16-bit operands: DOT_PRECISION moot"
    smem = gemm_smem_bytes(knobs, 4)
    return None if smem <= GEMM_SMEM_LIMIT_BYTES else f"float32 tiles need {smem} B"


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
        _GEMM_DIMS,
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
        constraint=_gemm_constraint,
        match_constraint=_gemm_match_constraint,
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
