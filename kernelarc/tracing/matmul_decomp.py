"""`baddbmm` written as the batched matmul and the add it is.

Place in the flow: `fx_trace` traces a reference with Inductor's decomposition table plus these
entries. Inductor keeps `aten.baddbmm` whole (it has its own template for it), and torch's own
decomposition computes it in float32 for 16-bit tensors (`pw_cast_for_opmath`: the matmul of
widened operands), so the generator saw a torch call it could not fuse (a per-expert GEMM with
its bias, `torch.baddbmm(bias, x, w)`, in MoE code). Written as `bmm(b1, b2) + self` in the
tensors' own dtype, the bmm anchors a GEMM kernel with the add in its epilogue, as `addmm` does.
Only `beta == alpha == 1` with one dtype throughout; anything else stays whole.
"""

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten


def matmul_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition table entries (each returns NotImplemented for what it leaves whole)."""
    return {aten.baddbmm.default: _baddbmm}


def _baddbmm(
    self: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Any:
    if beta != 1 or alpha != 1 or len({self.dtype, batch1.dtype, batch2.dtype}) != 1:
        return NotImplemented
    return aten.add.Tensor(aten.bmm.default(batch1, batch2), self)
