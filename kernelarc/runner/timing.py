"""Latency measurement of the candidate (and the reference) after correctness passed.

CUDA: CUDA events around each call, a 2x-L2 buffer zeroed before each iteration so no call
finds its data in L2. CPU: time.perf_counter around each call. Both: `warmup` untimed calls,
then `iterations` timed calls with fresh argument copies made outside the timed window; the
median is reported.
"""

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

ArgFactory = Callable[[], list[Any]]


def _l2_flush_buffer() -> torch.Tensor:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    size = int(getattr(props, "L2_cache_size", 0)) or 64 * 1024 * 1024
    return torch.empty(2 * size, dtype=torch.int8, device="cuda")


def _time_cuda(
    fn: Callable[..., Any], make_args: ArgFactory, warmup: int, iterations: int, flush_l2: bool
) -> list[float]:
    flush = _l2_flush_buffer() if flush_l2 else None
    times: list[float] = []
    for i in range(warmup + iterations):
        args = make_args()
        if flush is not None:
            flush.zero_()
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(float(start.elapsed_time(end)))
    return times


def _time_cpu(
    fn: Callable[..., Any], make_args: ArgFactory, warmup: int, iterations: int
) -> list[float]:
    times: list[float] = []
    for i in range(warmup + iterations):
        args = make_args()
        start = time.perf_counter()
        fn(*args)
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed * 1000.0)
    return times


def timing_method(device: str) -> str:
    """The `Performance.timing_method` label of a device."""
    return "cuda_events" if device == "cuda" else "cpu_monotonic"


def median_latency_ms(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    *,
    device: str,
    warmup: int,
    iterations: int,
    flush_l2: bool = True,
) -> float:
    """Median milliseconds per call of `fn(*make_args())`."""
    if device == "cuda":
        torch.cuda.synchronize()
        times = _time_cuda(fn, make_args, warmup, iterations, flush_l2)
    else:
        times = _time_cpu(fn, make_args, warmup, iterations)
    return float(statistics.median(times))
