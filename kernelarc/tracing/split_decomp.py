"""`split`, `chunk` and `unbind` written as the slices and selects they are.

Place in the flow: `fx_trace` traces a reference with Inductor's decomposition table plus these
entries. Inductor lowers `split` itself, so its table leaves `aten.split.Tensor` (what
`torch.chunk` and `torch.split` with one size reach), `aten.split_with_sizes` and
`aten.unbind.int` whole, and torch's own decompositions write them as `as_strided`; either way
the generator would see a multi-output op it calls through torch, with its outputs copied into
the layout the kernels read. As `slice` / `select` views, each part is an index map the kernels
that read it fold into their loads: a RoPE's `chunk(2, dim=-1)`, a gated activation's halves or a
fused QKV projection's split cost no kernel and no copy.
"""

from collections.abc import Callable, Sequence
from typing import Any

import torch

aten = torch.ops.aten


def split_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition table entries (each returns NotImplemented for what it leaves whole)."""
    return {
        aten.split.Tensor: _split,
        aten.split_with_sizes.default: _split_with_sizes,
        aten.unbind.int: _unbind,
    }


def _static(value: Any) -> int | None:
    """A size as a Python int, or None for a symbolic one (left to torch)."""
    return value if isinstance(value, int) else None


def _parts(self: torch.Tensor, sizes: Sequence[int], dim: int) -> list[torch.Tensor]:
    parts: list[torch.Tensor] = []
    start = 0
    for size in sizes:
        parts.append(aten.slice.Tensor(self, dim, start, start + size))
        start += size
    return parts


def _split(self: torch.Tensor, split_size: Any, dim: int = 0) -> Any:
    dim = dim % max(self.dim(), 1)
    length = _static(self.shape[dim]) if self.dim() else None
    size = _static(split_size)
    if length is None or size is None or size <= 0:
        return NotImplemented
    sizes = [min(size, length - start) for start in range(0, length, size)] or [0]
    return _parts(self, sizes, dim)


def _split_with_sizes(self: torch.Tensor, split_sizes: Sequence[Any], dim: int = 0) -> Any:
    dim = dim % max(self.dim(), 1)
    length = _static(self.shape[dim]) if self.dim() else None
    sizes: list[int] = []
    for value in split_sizes:
        size = _static(value)
        if size is None or size < 0:
            return NotImplemented
        sizes.append(size)
    if length is None or sum(sizes) != length:
        return NotImplemented
    return _parts(self, sizes, dim)


def _unbind(self: torch.Tensor, dim: int = 0) -> Any:
    if self.dim() == 0:
        return NotImplemented
    dim = dim % self.dim()
    length = _static(self.shape[dim])
    if length is None:
        return NotImplemented
    return [aten.select.int(self, dim, i) for i in range(length)]
