"""Pooling written as padding, strided slices and a chain over the window's taps.

Place in the flow: `fx_trace` traces a reference with Inductor's decomposition table plus these
entries, so max and average pooling (1-d pooling reaches here as 2-d) arrive at the generator as
`constant_pad_nd`, strided `slice` and pointwise ops, which it fuses into one kernel with
whatever surrounds the pooling (a conv's bias and activation before it, an epilogue after it).
A window of more than `MAX_TAPS` taps is left whole (a torch call in the generated solution):
unrolled, its loads would swamp the kernel, and there cuDNN's or ATen's kernel is the better
choice (Inductor falls back at a similar size).

The arithmetic is PyTorch's, so the values are bitwise those of ATen's kernels where the
operations allow: the output size rule (ceil mode drops a last window that would start in the
right padding); max pooling ignores padding and propagates NaN, and its index is the flat
position within the input's pooled dims of the first maximum (the last NaN); average pooling
sums in float32 for 16-bit inputs and divides by the window's size clipped to the padded input
(`count_include_pad`), by the in-bounds count (without it), or by `divisor_override`.
"""

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

#: Most taps (product of the window's sizes) unrolled into a fused kernel.
MAX_TAPS = 32

aten = torch.ops.aten


def pool_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition table entries (each returns NotImplemented for what it leaves whole)."""
    return {
        aten.max_pool2d_with_indices.default: _max_pool(2),
        aten.max_pool3d_with_indices.default: _max_pool(3),
        aten.avg_pool2d.default: _avg_pool(2),
        aten.avg_pool3d.default: _avg_pool(3),
    }


class Window:
    """The window's geometry over the last dims of an input (pooling's and a depthwise
    convolution's)."""

    def __init__(
        self,
        sizes: Sequence[int],
        kernel: Sequence[int],
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        ceil_mode: bool,
    ) -> None:
        self.sizes = list(sizes)
        self.kernel, self.stride = list(kernel), list(stride)
        self.padding, self.dilation = list(padding), list(dilation)
        self.out = [
            _out_size(n, k, s, p, d, ceil_mode)
            for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation, strict=True)
        ]
        # Ceil mode's last window may reach past the right padding: more (excluded) padding.
        self.overhang = [
            max(0, (o - 1) * s + (k - 1) * d + 1 - (n + 2 * p))
            for n, k, s, p, d, o in zip(
                sizes, kernel, stride, padding, dilation, self.out, strict=True
            )
        ]

    @classmethod
    def of(
        cls,
        sizes: Sequence[int],
        kernel: Sequence[int],
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: bool = False,
    ) -> "Window | None":
        """The window over `sizes` (ATen's arguments: an int or a list per dim, an empty
        stride meaning the kernel's), or None where ATen would refuse it or have no output."""
        dims = len(kernel)
        strides = _expand(stride, dims, kernel)
        pads = _expand(padding, dims, [0] * dims)
        dilations = _expand(dilation, dims, [1] * dims)
        if strides is None or pads is None or dilations is None or len(sizes) != dims:
            return None
        if min(*kernel, *strides, *dilations) < 1 or min(pads) < 0:
            return None
        window = cls(sizes, kernel, strides, pads, dilations, bool(ceil_mode))
        return window if min(window.out) >= 1 else None

    @property
    def taps(self) -> list[tuple[int, ...]]:
        """Every tap's offsets in the window, in ATen's order (the last dim fastest)."""
        grids: list[tuple[int, ...]] = [()]
        for k in self.kernel:
            grids = [(*g, i) for g in grids for i in range(k)]
        return grids

    def pad(self, x: torch.Tensor, value: float, overhang_value: float) -> torch.Tensor:
        """`x` with the padding (`value`) and the ceil-mode overhang (`overhang_value`)."""
        spec: list[int] = []
        for p in reversed(self.padding):
            spec += [p, p]
        padded = aten.constant_pad_nd.default(x, spec, value) if any(spec) else x
        extra: list[int] = []
        for o in reversed(self.overhang):
            extra += [0, o]
        if any(extra):
            padded = aten.constant_pad_nd.default(padded, extra, overhang_value)
        return padded

    def tap(self, padded: torch.Tensor, offsets: tuple[int, ...]) -> torch.Tensor:
        """The padded input's values under one tap at every output position."""
        rank = padded.dim()
        view = padded
        for j, (i, s, d, o) in enumerate(
            zip(offsets, self.stride, self.dilation, self.out, strict=True)
        ):
            dim = rank - len(offsets) + j
            start = i * d
            view = aten.slice.Tensor(view, dim, start, start + (o - 1) * s + 1, s)
        return view


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1  # the last window would start in the right padding
    return out


def _expand(value: Any, dims: int, default: Sequence[int] | None = None) -> list[int] | None:
    if value is None or (isinstance(value, list | tuple) and len(value) == 0):
        return list(default) if default is not None else None
    if isinstance(value, int):
        return [value] * dims
    values = [int(v) for v in value]
    if len(values) == 1:
        return values * dims
    return values if len(values) == dims else None


def _window(
    x: torch.Tensor,
    dims: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
) -> Window | None:
    kernel = _expand(kernel_size, dims)
    if kernel is None or x.dim() < dims or math.prod(kernel) > MAX_TAPS:
        return None
    return Window.of(x.shape[-dims:], kernel, stride, padding, dilation, ceil_mode)


def _max_pool(dims: int) -> Callable[..., Any]:
    def decompose(
        x: torch.Tensor,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> Any:
        window = _window(x, dims, kernel_size, stride, padding, dilation, ceil_mode)
        if window is None or not x.dtype.is_floating_point:
            return NotImplemented
        padded = window.pad(x, -math.inf, -math.inf)
        values: torch.Tensor | None = None
        for offsets in window.taps:
            tap = window.tap(padded, offsets)
            values = tap if values is None else aten.maximum.default(values, tap)
        assert values is not None
        return values, _argmax_index(x, window, padded)

    return decompose


def _argmax_index(x: torch.Tensor, window: Window, padded: torch.Tensor) -> torch.Tensor:
    """ATen's index: the flat position of the first maximum among the in-bounds taps (the last
    NaN if any); dead code, dropped by the tracer, wherever the indices are not used. Built
    from comparisons alone (no constant masks), so the generated kernel's conditions are
    booleans."""
    dims = len(window.kernel)
    positions = [
        torch.arange(o, device=x.device) * s - p
        for o, s, p in zip(window.out, window.stride, window.padding, strict=True)
    ]
    best: torch.Tensor | None = None
    index: torch.Tensor | None = None
    seen: torch.Tensor | None = None
    for offsets in window.taps:
        tap = window.tap(padded, offsets)
        flat: torch.Tensor | None = None
        inside: torch.Tensor | None = None
        for j, (i, d, n, pos) in enumerate(
            zip(offsets, window.dilation, window.sizes, positions, strict=True)
        ):
            coord = (pos + i * d).reshape([-1] + [1] * (dims - 1 - j))
            flat = coord if flat is None else flat * n + coord
            bounds = (coord >= 0) & (coord < n)
            inside = bounds if inside is None else inside & bounds
        assert flat is not None and inside is not None
        if best is None or index is None or seen is None:
            # The first tap in bounds is taken whatever its value (ATen's starting index).
            best = torch.where(inside, tap, -math.inf)
            index = torch.where(inside, flat, 0).expand(tap.shape)
            seen = inside
            continue
        take = inside & (~seen | (tap > best) | torch.isnan(tap))
        best = torch.where(take, tap, best)
        index = torch.where(take, flat, index)
        seen = seen | inside
    assert index is not None
    return index


def _avg_pool(dims: int) -> Callable[..., Any]:
    def decompose(
        x: torch.Tensor,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Any:
        window = _window(x, dims, kernel_size, stride, padding, 1, ceil_mode)
        if window is None or not x.dtype.is_floating_point:
            return NotImplemented
        compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        padded = window.pad(x.to(compute), 0.0, 0.0)
        total: torch.Tensor | None = None
        for offsets in window.taps:
            tap = window.tap(padded, offsets)
            total = tap if total is None else total + tap
        assert total is not None
        if divisor_override:
            divisor: Any = float(divisor_override)
        elif (count_include_pad or not any(window.padding)) and not any(window.overhang):
            divisor = float(math.prod(window.kernel))
        else:
            # The window's count at every output position: taps over a padded tensor of ones
            # (padding counted or not, ceil mode's overhang never).
            ones = torch.ones(window.sizes, dtype=compute, device=x.device)
            counted = window.pad(ones, 1.0 if count_include_pad else 0.0, 0.0)
            count: torch.Tensor | None = None
            for offsets in window.taps:
                tap = window.tap(counted, offsets)
                count = tap if count is None else count + tap
            divisor = count
        return (total / divisor).to(x.dtype)

    return decompose
