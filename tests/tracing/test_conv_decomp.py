"""The depthwise convolution decomposition against ATen's convolution, on real CPU tensors, and
the NotImplemented answer for every convolution that stays a torch call."""

from typing import Any

import pytest
import torch

from kernelarc.tracing.conv_decomp import conv_decompositions

aten = torch.ops.aten
CONV = conv_decompositions()[aten.convolution.default]

CASES = [
    # (input shape, weight shape, stride, padding, dilation, groups, bias)
    ((2, 4, 11, 9), (4, 1, 3, 3), [1, 1], [1, 1], [1, 1], 4, True),
    ((2, 4, 11, 9), (4, 1, 3, 5), [2, 1], [0, 2], [1, 1], 4, False),
    ((1, 3, 12, 12), (6, 1, 3, 3), [1, 2], [2, 1], [2, 1], 3, True),  # channel multiplier 2
    ((2, 5, 17), (5, 1, 4), [1], [3], [1], 5, True),  # Mamba's causal conv1d, before its slice
    ((1, 2, 5, 6, 7), (2, 1, 3, 3, 3), [1, 2, 1], [1, 1, 0], [1, 1, 2], 2, True),
]


@pytest.mark.parametrize(
    ("shape", "wshape", "stride", "padding", "dilation", "groups", "with_bias"), CASES
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_depthwise_matches_aten(
    shape: tuple[int, ...],
    wshape: tuple[int, ...],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
    with_bias: bool,
    dtype: torch.dtype,
) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    weight = torch.randn(wshape).to(dtype)
    bias = torch.randn(wshape[0]).to(dtype) if with_bias else None
    zeros = [0] * len(stride)
    args: tuple[Any, ...] = (x, weight, bias, stride, padding, dilation, False, zeros, groups)
    want = aten.convolution.default(*args)
    got = CONV(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_other_convolutions_stay_torch_calls() -> None:
    x = torch.randn(1, 4, 8, 8)
    zeros, ones = [0, 0], [1, 1]
    dense = torch.randn(6, 4, 3, 3)
    assert CONV(x, dense, None, ones, zeros, ones, False, zeros, 1) is NotImplemented
    grouped = torch.randn(4, 2, 3, 3)  # two input channels per group
    assert CONV(x, grouped, None, ones, zeros, ones, False, zeros, 2) is NotImplemented
    depthwise = torch.randn(4, 1, 3, 3)
    assert CONV(x, depthwise, None, ones, zeros, ones, True, zeros, 4) is NotImplemented
    wide = torch.randn(4, 1, 7, 7)  # 49 taps
    assert CONV(x, wide, None, ones, [3, 3], ones, False, zeros, 4) is NotImplemented
