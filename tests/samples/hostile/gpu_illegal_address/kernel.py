"""A Triton kernel that reads through a wild pointer on the 16-element workload only."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, wild, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # `wild` is 2**40 elements on the bad workload: far outside every allocation.
    x = tl.load(x_ptr + offs + wild, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def run(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    wild = 2**40 if n == 16 else 0
    _add[(triton.cdiv(n, 256),)](x, y, out, n, wild, BLOCK=256)
    return out
