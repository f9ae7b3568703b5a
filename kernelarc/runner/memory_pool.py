"""A shifting input pool for timing: every call sees its inputs at a fresh address.

The official evaluator (v1.0.2) times a candidate on copies of the last correctness round's
inputs, placed for call k at byte offset k*256 of a per-tensor pool, so no two calls share a
`data_ptr` (a kernel cannot cache results by address) while memory stays near one copy of the
inputs. Strides are kept, including stride-0 broadcasts: only the storage a tensor really spans
is copied. DPS outputs get the same treatment and are zero-filled for every call. The copies are
issued by `next_args`, which the timing loop calls outside the timed window.
"""

from dataclasses import dataclass
from typing import Any

import torch

POOL_ALIGNMENT_BYTES = 256


def storage_span(tensor: torch.Tensor) -> int:
    """Elements of storage a (non-negatively strided) tensor spans from its first element."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum(
        (size - 1) * stride
        for size, stride in zip(tensor.shape, tensor.stride(), strict=True)
        if size > 1
    )


@dataclass
class _Slot:
    pool: torch.Tensor
    source: torch.Tensor | None
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    span: int
    step: int

    @classmethod
    def of(cls, tensor: torch.Tensor, calls: int, keep_data: bool) -> "_Slot":
        if any(s < 0 for s in tensor.stride()):
            tensor = tensor.contiguous()
        span = storage_span(tensor)
        step = max(1, POOL_ALIGNMENT_BYTES // tensor.element_size())
        pool = torch.empty(span + (calls - 1) * step, dtype=tensor.dtype, device=tensor.device)
        source = tensor.detach().as_strided((span,), (1,)) if keep_data else None
        return cls(pool, source, tuple(tensor.shape), tuple(tensor.stride()), span, step)

    def view(self, call: int) -> torch.Tensor:
        start = call * self.step
        window = self.pool.narrow(0, start, self.span)
        if self.source is None:
            window.zero_()
        else:
            window.copy_(self.source)
        return self.pool.as_strided(self.shape, self.strides, start)


class ShiftingInputPool:
    """Hands out `calls` argument lists: the inputs (then zeroed DPS outputs) at shifted addresses.

    Non-tensor inputs (scalars) are passed through unchanged. Raises RuntimeError when asked for
    more than `calls` argument lists.
    """

    def __init__(self, inputs: list[Any], outputs: list[torch.Tensor], calls: int) -> None:
        if calls < 1:
            msg = f"a pool needs at least one call, got {calls}"
            raise ValueError(msg)
        self._calls = calls
        self._next = 0
        self._inputs: list[_Slot | Any] = [
            _Slot.of(v, calls, keep_data=True) if isinstance(v, torch.Tensor) else v for v in inputs
        ]
        self._outputs = [_Slot.of(t, calls, keep_data=False) for t in outputs]

    @property
    def calls_left(self) -> int:
        """How many more argument lists `next_args` can hand out."""
        return self._calls - self._next

    def next_args(self) -> list[Any]:
        """The next call's arguments: inputs in order, then the zero-filled outputs."""
        if self._next >= self._calls:
            msg = f"shifting input pool exhausted after {self._calls} calls"
            raise RuntimeError(msg)
        call = self._next
        self._next += 1
        args = [v.view(call) if isinstance(v, _Slot) else v for v in self._inputs]
        args.extend(slot.view(call) for slot in self._outputs)
        return args
