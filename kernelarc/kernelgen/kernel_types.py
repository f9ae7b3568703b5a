"""What the scheduler and the emitters exchange: buffers, launches, emitted kernels.

Place in the flow: `schedule.py` hands `Buffer`s and a `Launch` to an emitter (`emit.py` for
pointwise and reduction kernels, `gemm_emit.py` for matmuls with fused epilogues) and gets a
`KernelSource` back, or a `NeedMaterialize` naming a value the kernel cannot compute in place.
"""

from dataclasses import dataclass

from kernelarc.kernelgen.graph_ir import Ref
from kernelarc.schema.op_graph import TensorMeta


def buffer_key(ref: Ref) -> str:
    """The name of the buffer an edge reads: the node, or `node:i` for output i of a
    multi-output node."""
    return ref.node if ref.index is None else f"{ref.node}:{ref.index}"


class NeedMaterialize(Exception):
    """A node this kernel cannot compute in place: it must be stored by an earlier kernel."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"{node}: {reason}")
        self.node = node
        self.reason = reason


@dataclass(frozen=True)
class Launch:
    """Block sizes and warps of one kernel (already fitted to its space)."""

    xblock: int
    """Pointwise: elements per program; reduction: rows per program; GEMM: BLOCK_M."""
    rblock: int = 1
    """Reduction: row chunk (the whole row when persistent); GEMM: BLOCK_N."""
    persistent: bool = True
    num_warps: int = 4
    kblock: int = 0
    """GEMM: BLOCK_K (0 for other kernels)."""
    group_m: int = 1
    """GEMM: programs along M sharing B tiles in L2 (program-order swizzle)."""
    num_stages: int = 0
    """Software-pipeline stages (0: Triton's default)."""
    precision: str = "ieee"
    """GEMM with float32 operands: tl.dot input precision (ieee, tf32, tf32x3)."""
    dot16: bool = False
    """Attention: dot operands computed from 16-bit tensors rounded back to 16 bits."""
    half_dot: bool = True
    """GEMM: feed 16-bit operands to tl.dot as they are (off under Triton's interpreter, whose
    16-bit dot is wrong: there operands are widened to float32 first)."""


@dataclass(frozen=True)
class Buffer:
    """A tensor a kernel reads or writes through a pointer."""

    name: str
    """The node (or input) it holds."""
    meta: TensorMeta
    """Its layout (strides in elements)."""


@dataclass
class KernelSource:
    """An emitted kernel and how to launch it."""

    name: str
    source: str
    pointers: list[str]
    """Buffer names, in parameter order (loads and stores)."""
    scalars: list[str]
    """Scalar-input node names, in parameter order after the pointers."""
    stores: list[Ref]
    grid: tuple[int, ...]
    launch: Launch
    passes: int = 1
    """Reads of the kernel's rows: its loops over the reduced axis (1: one tile, no loop)."""
