"""The pooling decompositions against ATen's own kernels, on real CPU tensors: values, indices
and the NotImplemented answer for what stays a torch call."""

import math
from typing import Any

import pytest
import torch

from kernelarc.tracing.pool_decomp import MAX_TAPS, pool_decompositions

aten = torch.ops.aten
TABLE = pool_decompositions()

MAX_CASES = [
    # (input shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 9, 11), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((2, 3, 9, 11), [3, 2], [2, 3], [1, 1], [1, 1], True),
    ((1, 2, 10, 10), [2, 2], [], [0, 0], [1, 1], False),
    ((1, 2, 13, 12), [3, 3], [1, 1], [1, 0], [2, 3], False),
    ((1, 2, 7, 8), [4, 4], [3, 3], [2, 2], [1, 1], True),
    ((3, 1, 17), [1, 4], [1, 1], [0, 2], [1, 3], True),  # 1-d pooling reaches here as 2-d
]


@pytest.mark.parametrize(("shape", "kernel", "stride", "padding", "dilation", "ceil"), MAX_CASES)
def test_max_pool_2d_values_and_indices_are_atens(
    shape: tuple[int, ...],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    ceil: bool,
) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape)
    if len(shape) == 3:
        x = x.unsqueeze(-2)
    # Ties (equal values) and a NaN: the first maximum's index, NaN propagated.
    x = torch.round(x * 2) / 2
    x.view(-1)[5] = math.nan
    args = (x, kernel, stride, padding, dilation, ceil)
    want_values, want_index = aten.max_pool2d_with_indices.default(*args)
    values, index = TABLE[aten.max_pool2d_with_indices.default](*args)
    assert torch.equal(values.isnan(), want_values.isnan())
    assert torch.equal(values.nan_to_num(), want_values.nan_to_num())
    assert torch.equal(index, want_index)


def test_max_pool_3d_matches_aten() -> None:
    torch.manual_seed(1)
    x = torch.randn(2, 2, 7, 9, 8)
    args = (x, [3, 2, 3], [2, 2, 2], [1, 1, 1], [1, 2, 1], True)
    want_values, want_index = aten.max_pool3d_with_indices.default(*args)
    values, index = TABLE[aten.max_pool3d_with_indices.default](*args)
    assert torch.equal(values, want_values)
    assert torch.equal(index, want_index)


AVG_CASES = [
    # (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ([3, 3], [2, 2], [1, 1], False, True, None),
    ([3, 3], [2, 2], [1, 1], False, False, None),
    ([3, 2], [2, 2], [1, 1], True, True, None),
    ([3, 2], [2, 2], [1, 0], True, False, None),
    ([4, 4], [], [0, 0], False, True, None),
    ([2, 3], [1, 2], [1, 1], False, True, 5),
]


@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil", "include", "divisor"), AVG_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_avg_pool_2d_matches_aten(
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil: bool,
    include: bool,
    divisor: int | None,
    dtype: torch.dtype,
) -> None:
    torch.manual_seed(2)
    x = torch.randn(2, 3, 11, 10).to(dtype)
    args: tuple[Any, ...] = (x, kernel, stride, padding, ceil, include, divisor)
    want = aten.avg_pool2d.default(*args)
    got = TABLE[aten.avg_pool2d.default](*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_avg_pool_3d_matches_aten() -> None:
    torch.manual_seed(3)
    x = torch.randn(1, 2, 9, 8, 7)
    args = (x, [3, 3, 3], [2, 2, 2], [1, 1, 1], True, False, None)
    want = aten.avg_pool3d.default(*args)
    got = TABLE[aten.avg_pool3d.default](*args)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_large_windows_and_integer_inputs_stay_torch_calls() -> None:
    side = math.isqrt(MAX_TAPS) + 1  # side * side > MAX_TAPS
    x = torch.randn(1, 1, 40, 40)
    avg = TABLE[aten.avg_pool2d.default]
    assert avg(x, [side, side], [], [0, 0], False, True, None) is NotImplemented
    maxpool = TABLE[aten.max_pool2d_with_indices.default]
    ints = torch.arange(64).reshape(1, 1, 8, 8)
    assert maxpool(ints, [2, 2], [], [0, 0], [1, 1], False) is NotImplemented
