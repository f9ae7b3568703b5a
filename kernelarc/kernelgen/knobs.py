"""The knobs of generated kernels, and how a setting becomes each kernel's block sizes.

Place in the flow: the strategy agents search these knobs (as data: `KNOB_VALUES`, with the
likely winners on Hopper first); `generate` turns a setting into a `Launch` per kernel with
`launch_for`, fitting it to the kernel's space (blocks never exceed the next power of two of
the extent, a reduction tile stays within a register budget), so one setting is valid for every
workload of a problem.

| knob | what it sets |
| --- | --- |
| BLOCK_X | elements per program of pointwise kernels |
| NUM_WARPS | warps of pointwise kernels |
| ROWS | most rows (x values) per program of reduction kernels |
| BLOCK_R | chunk width of looped reductions |
| PERSISTENT_MAX | longest row reduced in registers in one pass (longer rows loop) |
| NUM_WARPS_RED | warps of reduction kernels (at least a persistent row's: `register_warps`) |
| SPLIT_R | partials per output when a reduction with few outputs is split in two stages; 0: off |
| COL_X | contiguous columns per program of column reductions (over a dim that is not the last) |
| COL_R | rows of the reduced axis per loop step of column reductions (more when COL_X is cut) |
| SPLIT_COL | partials per output when a column reduction with few programs is split; 0: off |
| TILE_X, TILE_R | tile kernels (an epilogue from channels-last to NCHW): channels x positions |
| VAR_ONEPASS | 1: mean and variance of the same rows in one pass (Welford); 0: two passes |
| FUSE_GEMM | 1: matmuls are Triton GEMM kernels with their epilogues fused; 0: cuBLAS calls |
| FUSE_CONV_BIAS | 1: a convolution's bias is added in the kernels that read its output |
| LAYOUT_CONV | 1: convolutions read only in their planes run channels-last (`conv_layout`) |
| BLOCK_M, BLOCK_N, BLOCK_K | GEMM tile |
| GROUP_M | GEMM tiles along M sharing B tiles in L2 |
| NUM_WARPS_MM, NUM_STAGES | GEMM warps and pipeline stages (that fit: `fit_stages`) |
| DOT_PRECISION | float32 GEMM operands: 0 ieee, 1 tf32, 2 tf32x3 (3 tf32 passes, ~fp32 accuracy) |
| FLASH | 1: softmax(scores) @ V with matmul scores is one online-softmax kernel (`attention.py`) |
| FLASH_M, FLASH_N | attention kernel: query rows per program, keys per loop step |
| FLASH_DOT16 | attention on widened 16-bit tensors: 1 dots in 16 bits (as on GPUs), 0 float32 |
| FUSE_SDPA | 1: attention that SDPA computes exactly is that torch call (`attention_sdpa.py`) |
"""

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from kernelarc.kernelgen.kernel_types import Launch, NeedMaterialize
from kernelarc.kernelgen.space import AttentionSpace, GemmSpace, Space

Device = Literal["cpu", "cuda"]
GenKnobs = Mapping[str, int]

#: Values per knob, most promising first, for CUDA and for Triton's interpreter on the CPU
#: (which pays per program and per operation, not per element: big blocks only).
KNOB_VALUES: Mapping[str, Mapping[Device, tuple[int, ...]]] = {
    "BLOCK_X": {"cuda": (1024, 512, 2048, 4096, 256), "cpu": (16384, 4096)},
    "NUM_WARPS": {"cuda": (4, 8, 2, 16), "cpu": (4,)},
    "ROWS": {"cuda": (4, 1, 2, 8, 16, 32, 64), "cpu": (64, 16)},
    "BLOCK_R": {"cuda": (1024, 512, 2048, 4096, 256), "cpu": (4096, 1024)},
    # Rows up to 32768 in one pass (read once, not twice); `launch_for` gives such a row the
    # warps its registers need (REGISTER_ELEMENTS).
    "PERSISTENT_MAX": {"cuda": (32768, 4096, 1024, 16384), "cpu": (65536, 4096)},
    "NUM_WARPS_RED": {"cuda": (8, 4, 16, 2, 32), "cpu": (4,)},
    # The interpreter pays per program: splitting only adds programs there (off first).
    "SPLIT_R": {"cuda": (1024, 256, 64, 0), "cpu": (0, 8)},
    # Column reductions: a 128 x 16 tile reads 512 contiguous bytes per row of float32.
    "COL_X": {"cuda": (128, 64, 256, 32, 512), "cpu": (1024, 64)},
    "COL_R": {"cuda": (16, 8, 32, 64, 4), "cpu": (64, 8)},
    "SPLIT_COL": {"cuda": (32, 8, 128, 0), "cpu": (0, 8)},
    # Tile kernels (an epilogue from channels-last to NCHW): channels x spatial positions.
    "TILE_X": {"cuda": (32, 64, 16, 128), "cpu": (64, 16)},
    "TILE_R": {"cuda": (64, 32, 128, 16), "cpu": (256, 16)},
    # One read of a looped norm's rows for its statistics instead of two (2 reads, not 3).
    "VAR_ONEPASS": {"cuda": (1, 0), "cpu": (1, 0)},
    "FUSE_GEMM": {"cuda": (1, 0), "cpu": (1, 0)},
    # A convolution's bias added in the kernels reading its output, not by cuDNN.
    "FUSE_CONV_BIAS": {"cuda": (1, 0), "cpu": (1, 0)},
    "BLOCK_M": {"cuda": (128, 64, 256, 32), "cpu": (64,)},
    "BLOCK_N": {"cuda": (128, 64, 256, 32), "cpu": (64,)},
    "BLOCK_K": {"cuda": (64, 32, 128), "cpu": (64,)},
    "GROUP_M": {"cuda": (8, 1, 4, 16), "cpu": (1,)},
    "NUM_WARPS_MM": {"cuda": (8, 4), "cpu": (4,)},
    "NUM_STAGES": {"cuda": (3, 4, 2, 5), "cpu": (1,)},
    # cuDNN's convolutions in channels-last (NHWC) first on CUDA, as torch.compile runs them.
    "LAYOUT_CONV": {"cuda": (1, 0), "cpu": (0, 1)},
    # tf32x3 first: float32 accuracy within ~1e-6 relative at about 3x the FMA path's speed.
    "DOT_PRECISION": {"cuda": (2, 1, 0), "cpu": (0, 1)},
    # Attention: the scores never stored first; tiles as FlashAttention-2's Triton tutorial.
    "FLASH": {"cuda": (1, 0), "cpu": (1, 0)},
    "FLASH_M": {"cuda": (128, 64), "cpu": (64,)},
    "FLASH_N": {"cuda": (64, 32, 128), "cpu": (64,)},
    "FLASH_DOT16": {"cuda": (1, 0), "cpu": (1, 0)},
    # Attention that scaled_dot_product_attention computes exactly as that torch call
    # (FlashAttention / cuDNN on GPUs) instead of the generated kernel (`attention_sdpa.py`):
    # first on CUDA, where the call alone took 0.40-0.52x of the generated kernel's time on the
    # same shapes (H100, 2026-12-06, docs/benchmarks.md); on the CPU the kernel stays first.
    "FUSE_SDPA": {"cuda": (1, 0), "cpu": (0, 1)},
}
POINTWISE_KNOBS = ("BLOCK_X", "NUM_WARPS")
REDUCTION_KNOBS = ("ROWS", "BLOCK_R", "PERSISTENT_MAX", "NUM_WARPS_RED")
COLUMN_KNOBS = ("COL_X", "COL_R", "NUM_WARPS_RED")
TILE_KNOBS = ("TILE_X", "TILE_R", "NUM_WARPS")
GEMM_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_WARPS_MM", "NUM_STAGES")
ATTENTION_KNOBS = ("FLASH_M", "FLASH_N", "FLASH_DOT16", "NUM_WARPS_MM", "NUM_STAGES")
PRECISIONS = ("ieee", "tf32", "tf32x3")

#: A reduction to fewer outputs than this (2 per SM of an H100/H200) is split in two stages
#: when each partial still reduces at least SPLIT_MIN_CHUNK elements (`split_reductions.py`).
SPLIT_MAX_OUTPUTS = {"cuda": 264, "cpu": 264}
SPLIT_MIN_CHUNK = {"cuda": 2048, "cpu": 16}
#: A column reduction with fewer programs than SPLIT_MAX_OUTPUTS is split in two stages when
#: each partial still reduces at least this many rows (of COL_X columns each).
SPLIT_MIN_ROWS = {"cuda": 64, "cpu": 4}

#: Loads one fused kernel may make before a value it recomputes at several indices is stored
#: once instead (Inductor's realize heuristics do the like): a 2x2x2 pooling of a 2x2x2
#: pooling is 64 loads per output recomputed, 8 + 8 with the inner one stored.
MAX_KERNEL_LOADS = 64
#: fp32 values one program may hold in its reduction tile (XBLOCK * RBLOCK) before spilling.
MAX_TILE = {"cuda": 8192, "cpu": 1 << 20}
#: Values of a reduction tile per thread that stay in registers (MAX_TILE over 8 warps).
REGISTER_ELEMENTS = 32
#: A CUDA thread block holds at most 1024 threads.
MAX_WARPS = 32
#: Shared memory one program may use: the opt-in limit per block of Hopper and Blackwell GPUs
#: (227 KiB; an A100 has 163 KiB, where a larger setting still fails at its launch).
SHARED_MEMORY_BYTES = 232448
_ELEMENT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}


def default_knobs(device: Device) -> dict[str, int]:
    """The first value of every knob."""
    return {name: values[device][0] for name, values in KNOB_VALUES.items()}


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def launch_for(space: Space | GemmSpace, knobs: GenKnobs, device: Device) -> Launch:
    """The launch of a kernel of `space` under a knob setting."""
    if isinstance(space, AttentionSpace):
        return Launch(
            xblock=min(knobs.get("FLASH_M", 64), max(16, next_pow2(space.m))),
            rblock=max(16, next_pow2(space.n)),
            kblock=min(knobs.get("FLASH_N", 64), max(16, next_pow2(space.k))),
            num_warps=knobs["NUM_WARPS_MM"],
            num_stages=knobs["NUM_STAGES"],
            precision=PRECISIONS[knobs["DOT_PRECISION"]],
            dot16=bool(knobs.get("FLASH_DOT16", 0)),
            half_dot=device == "cuda",
        )
    if isinstance(space, GemmSpace):
        return Launch(
            xblock=min(knobs["BLOCK_M"], max(16, next_pow2(space.m))),
            rblock=min(knobs["BLOCK_N"], max(16, next_pow2(space.n))),
            kblock=min(knobs["BLOCK_K"], max(16, next_pow2(space.k))),
            group_m=knobs["GROUP_M"],
            num_warps=knobs["NUM_WARPS_MM"],
            num_stages=knobs["NUM_STAGES"],
            precision=PRECISIONS[knobs["DOT_PRECISION"]],
            half_dot=device == "cuda",
        )
    if not space.is_reduction:
        block = min(knobs["BLOCK_X"], next_pow2(space.xnumel))
        warps = max(1, min(knobs["NUM_WARPS"], block // 64))
        return Launch(xblock=block, num_warps=warps)
    if space.tiled:
        xblock = min(knobs["TILE_X"], next_pow2(space.xnumel))
        rblock = min(knobs["TILE_R"], next_pow2(space.rnumel))
        warps = max(1, min(knobs["NUM_WARPS"], (xblock * rblock) // 128))
        return Launch(xblock=xblock, rblock=rblock, persistent=True, num_warps=warps)
    if space.column:
        return _column_launch(space, knobs, device)
    row = next_pow2(space.rnumel)
    persistent = row <= knobs["PERSISTENT_MAX"]
    rblock = row if persistent else min(knobs["BLOCK_R"], row)
    budget = max(1, MAX_TILE[device] // rblock)
    xblock = max(1, min(knobs["ROWS"], next_pow2(space.xnumel), budget))
    warps = knobs["NUM_WARPS_RED"]
    # Fewer warps than a tile of one row per thread-vector needs is a waste of threads.
    warps = max(1, min(warps, (xblock * rblock) // 64 or 1))
    if device == "cuda":
        warps = max(warps, register_warps(xblock * rblock))
    return Launch(xblock=xblock, rblock=rblock, persistent=persistent, num_warps=warps)


def fit_stages(launch: Launch, a_dtype: str, b_dtype: str) -> Launch:
    """A GEMM launch with no more software-pipeline stages than the operand tiles of all stages
    fit in SHARED_MEMORY_BYTES (`a_dtype`, `b_dtype`: the dtypes the operand tiles are loaded
    in). Triton refuses such a kernel at its first launch (OutOfResources), a RUNTIME_ERROR:
    128 x 64 and 64 x 128 float32 tiles are 64 KiB a stage, so 4 stages need 256 KiB (the H100
    suite run of 2026-12-06, kb_l2_14). Capped here, the setting renders the same source as the
    one with the fitting stage count, so it is not judged twice."""
    if launch.num_stages <= 1 or not launch.kblock:
        return launch
    a_bytes, b_bytes = _ELEMENT_BYTES.get(a_dtype, 4), _ELEMENT_BYTES.get(b_dtype, 4)
    stage = launch.kblock * (launch.xblock * a_bytes + launch.rblock * b_bytes)
    fits = max(1, SHARED_MEMORY_BYTES // stage)
    return replace(launch, num_stages=min(launch.num_stages, fits))


def register_warps(tile: int) -> int:
    """The fewest warps (a power of two, at most MAX_WARPS) that hold a tile of `tile` values
    with at most REGISTER_ELEMENTS per thread: a persistent row wider than MAX_TILE with the
    knob's warps would otherwise spill to local memory (32768 float32 values over 8 warps are
    128 registers a thread, before the kernel's own)."""
    return min(MAX_WARPS, next_pow2(-(-tile // (REGISTER_ELEMENTS * 32))))


def column_xblock(inner: int, knobs: GenKnobs) -> int:
    """Columns per program of a column reduction with `inner` contiguous kept elements."""
    return min(knobs["COL_X"], next_pow2(inner))


def _column_launch(space: Space, knobs: GenKnobs, device: Device) -> Launch:
    """COL_X contiguous columns by COL_R rows; a tile narrowed to fewer columns (short inner
    dims) takes more rows, keeping COL_X * COL_R elements; whole rows in one tile when they fit."""
    xblock = column_xblock(space.inner, knobs)
    row = next_pow2(space.rnumel)
    tile = max(knobs["COL_R"], (knobs["COL_X"] * knobs["COL_R"]) // xblock)
    rblock = max(1, min(row, tile, MAX_TILE[device] // xblock))
    warps = max(1, min(knobs["NUM_WARPS_RED"], (xblock * rblock) // 64 or 1))
    return Launch(xblock=xblock, rblock=rblock, persistent=rblock >= row, num_warps=warps)


#: Longest row a whole-row kernel (an arg-reduction, a scan) holds in one tile.
MAX_WHOLE_ROW = 1 << 15


def whole_rows(launch: Launch, space: Space, node: str, *, warps_for_tile: bool = False) -> Launch:
    """A persistent launch for kernels with an arg-reduction or a scan (they need whole rows);
    with `warps_for_tile`, enough warps to hold the tile in registers (`register_warps`)."""
    row = 1 << max(space.rnumel - 1, 0).bit_length()
    if row > MAX_WHOLE_ROW:
        raise NeedMaterialize(node, f"a whole-row kernel over rows of {space.rnumel} elements")
    xblock = max(1, min(launch.xblock, 8192 // row))
    warps = launch.num_warps
    if warps_for_tile:
        warps = max(warps, register_warps(row * xblock))
    return replace(launch, rblock=row, xblock=xblock, persistent=True, num_warps=warps)
