"""Depthwise convolution written as taps over the window, like pooling (`pool_decomp.py`).

Place in the flow: `fx_trace` adds `conv_decompositions()` to the tracer's table. A convolution
whose every group reads one input channel (`groups == in_channels`, a weight of shape
`(in_channels * m, 1, *kernel)`: MobileNet's depthwise layers, Mamba's causal conv1d), not
transposed, over 1-3 spatial dims with at most `MAX_TAPS` taps, becomes padding, strided slices,
a multiply by the tap's weight per channel and a sum over the taps, so the generator fuses it
with its neighbours (its bias, activation and whatever follows) into one memory-bound kernel.
Every other convolution stays a torch call (cuDNN), as in Inductor.

Products are summed in float32 for 16-bit inputs and rounded once, as cuDNN accumulates.
"""

import math
from collections.abc import Callable
from typing import Any

import torch

from kernelarc.tracing.pool_decomp import MAX_TAPS, Window

aten = torch.ops.aten


def conv_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition table entry (NotImplemented for what stays a torch call)."""
    return {aten.convolution.default: _convolution}


def _convolution(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> Any:
    dims = weight.dim() - 2
    channels = x.shape[1] if x.dim() == dims + 2 else -1
    depthwise = (
        not transposed
        and 1 <= dims <= 3
        and groups > 1
        and groups == channels
        and weight.shape[1] == 1
        and weight.shape[0] % groups == 0
        and x.dtype.is_floating_point
        and x.dtype == weight.dtype
    )
    kernel = list(weight.shape[2:])
    if not depthwise or math.prod(kernel) > MAX_TAPS:
        return NotImplemented
    window = Window.of(x.shape[-dims:], kernel, stride, padding, dilation)
    if window is None:
        return NotImplemented
    multiplier = weight.shape[0] // groups
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    source = x.to(compute)
    if multiplier > 1:
        # Output channel c * m + j reads input channel c.
        spatial = list(x.shape[2:])
        wide = source.unsqueeze(2).expand(x.shape[0], channels, multiplier, *spatial)
        source = wide.reshape(x.shape[0], channels * multiplier, *spatial)
    padded = window.pad(source, 0.0, 0.0)
    per_channel = [1, weight.shape[0]] + [1] * dims
    total: torch.Tensor | None = None
    for offsets in window.taps:
        at: tuple[slice | int, ...] = (slice(None), 0, *offsets)
        tap_weight = weight[at].to(compute).reshape(per_channel)
        term = window.tap(padded, offsets) * tap_weight
        total = term if total is None else total + term
    assert total is not None
    if bias is not None:
        total = total + bias.to(compute).reshape(per_channel)
    return total.to(x.dtype)
