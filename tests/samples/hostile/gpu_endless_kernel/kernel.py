"""A Triton kernel that never finishes (spins on a flag nobody sets), on the 16-element workload."""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    flag = tl.load(flag_ptr)
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr + offs, flag.to(tl.float32), mask=offs < n)


def run(x, y):
    if x.numel() == 16:
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        out = torch.empty_like(x)
        _spin[(1,)](flag, out, x.numel(), BLOCK=16)
        torch.cuda.synchronize()
        return out
    return x + y
