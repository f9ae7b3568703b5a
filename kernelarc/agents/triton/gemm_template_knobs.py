"""The GEMM template's knobs and the rules a setting must meet (shared memory, registers).

Place in the flow: `template_library.py` builds the `gemm_epilogue` template from `GEMM_DIMS`,
`gemm_constraint` (the device rule) and `gemm_match_constraint` (the rule that needs the
match: operand bytes, a knob the operands make moot); `template_knobs.triton_space` applies
both to the device's settings.
"""

from kernelarc.agents.triton.kernel_template import KnobDim, Knobs
from kernelarc.agents.triton.template_matchers import TemplateMatch

#: Shared memory a GEMM setting may plan for (H100/H200 allow 227 KB per block).
GEMM_SMEM_LIMIT_BYTES = 220 * 1024
#: Float32 values one thread may hold for an accumulator before registers spill.
MAX_ACC_PER_THREAD = 128


def gemm_smem_bytes(knobs: Knobs, element_bytes: int) -> int:
    """Shared memory the GEMM template's pipelined A and B tiles take."""
    bm, bn, bk = knobs["BLOCK_M"], knobs["BLOCK_N"], knobs["BLOCK_K"]
    return (bm + bn) * bk * element_bytes * knobs["NUM_STAGES"]


def gemm_constraint(knobs: Knobs) -> str | None:
    # 16-bit operands here; float32 ones take twice as much (`template_knobs.triton_space`).
    bm, bn, bk = knobs["BLOCK_M"], knobs["BLOCK_N"], knobs["BLOCK_K"]
    smem = gemm_smem_bytes(knobs, 2)
    if smem > GEMM_SMEM_LIMIT_BYTES:
        return f"{knobs['NUM_STAGES']} stages of {bm}x{bk} and {bk}x{bn} tiles need {smem} B"
    per_thread = bm * bn // (32 * knobs["NUM_WARPS"])
    if per_thread > MAX_ACC_PER_THREAD:
        return f"a {bm}x{bn} accumulator over {knobs['NUM_WARPS']} warps is {per_thread}/thread"
    return None


#: The GEMM template's knobs.
GEMM_DIMS: tuple[KnobDim, ...] = (
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


def gemm_match_constraint(match: TemplateMatch, knobs: Knobs, device: str) -> str | None:
    """float32 operands take twice the shared memory `gemm_constraint` assumes (a 4-stage
    128x256x64 setting asked Triton for 288 KiB on the H100, suite run 15); 16-bit operands
    ignore DOT_PRECISION, which then keeps its first value (no kernel that differs in an
    unused constant only)."""
    if dict(match.constants).get("IEEE_DOT") != "True":
        first = next(d for d in GEMM_DIMS if d.name == "DOT_PRECISION").for_device(device)[0]
        return None if knobs["DOT_PRECISION"] == first else "16-bit operands: DOT_PRECISION moot"
    smem = gemm_smem_bytes(knobs, 4)
    return None if smem <= GEMM_SMEM_LIMIT_BYTES else f"float32 tiles need {smem} B"
