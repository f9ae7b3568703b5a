"""Latency measurement of the candidate (and the reference) after correctness passed.

Protocol (official v1.0.2): `warmup` untimed calls, then `iterations` timed calls, each with
fresh arguments from `make_args` (made outside the timed window; pass
`memory_pool.ShiftingInputPool.next_args` for the official shifted copies) and, on CUDA, a
2x-L2 int8 buffer zeroed before the call; the median of the samples is reported.

Methods (`Performance.timing_method`):
- "cupti": CUPTI activity spans (`cupti_timing`), when `cupti-python` imports and tracing
  starts; the official method. Counts work on every stream; errors (RUNTIME_ERROR upstream)
  when a call launches no GPU work or the kernel set changes between iterations.
- "cuda_events": the fallback. Events recorded on the current stream around the call (no
  synchronize between the flush and the start event, so the host can queue the call's launches
  while the flush runs, as in `triton.testing.do_bench`). Work on other streams that is not
  joined back is caught by waiting for the end event, then timing a device-wide synchronize on
  the host: a wait longer than `SIDE_STREAM_THRESHOLD_S` (or 4x the idle synchronize cost) is
  added to the sample, minus the idle cost. Error: side-stream work that ends within that
  threshold (~20 us) after the current stream is not counted; when it is counted, the host's
  wake-up latency (a few us) is included. Relative to CUPTI, events add the launch latency of
  the first kernel when the call's host work outlasts the flush (about +4 us on tiny kernels on
  an H200: 5.8 vs 1.3 us), and agree within ~1% on large kernels. A call that launches nothing
  is not detected.
- "cpu_monotonic": `time.perf_counter` around each call (no L2 flush), made as steady as a
  shared machine allows: the timed loop runs with one intra-op thread on one core (the last of
  the process's affinity set), for the reference and the candidate alike, and the previous
  thread count and affinity come back afterwards. With two free-running threads the same
  kernel's samples were bimodal (issue 17). `budget_s` stops the loop once the samples add up
  to that many seconds, after at least `CPU_MIN_SAMPLES`.
"""

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from kernelarc.runner.cupti_timing import (
    CuptiUnavailable,
    TimingError,
    cupti_available,
    cupti_samples_ms,
)

ArgFactory = Callable[[], list[Any]]
SIDE_STREAM_THRESHOLD_S = 20e-6
#: Fewest timed CPU iterations, whatever `budget_s` says.
CPU_MIN_SAMPLES = 5

__all__ = [
    "ArgFactory",
    "LatencySamples",
    "TimingError",
    "l2_flush_buffer",
    "measure_latency",
    "timing_method",
]


@dataclass(frozen=True)
class LatencySamples:
    """Raw per-iteration timings and how they were taken."""

    samples_ms: list[float]
    """One per timed iteration, in order."""
    method: str
    """"cupti", "cuda_events" or "cpu_monotonic"."""
    note: str = ""
    """Why a fallback was taken, if one was."""

    @property
    def median_ms(self) -> float:
        """The reported latency."""
        return float(statistics.median(self.samples_ms))


def l2_flush_buffer() -> torch.Tensor:
    """An int8 buffer twice the current device's L2 size (64 MiB assumed if unknown)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    size = int(getattr(props, "L2_cache_size", 0)) or 64 * 1024 * 1024
    return torch.empty(2 * size, dtype=torch.int8, device="cuda")


def _idle_sync_s(rounds: int = 15) -> float:
    torch.cuda.synchronize()
    costs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        costs.append(time.perf_counter() - t0)
    return float(statistics.median(costs))


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _events_samples_ms(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    warmup: int,
    iterations: int,
    flush: torch.Tensor | None,
) -> list[float]:
    torch.cuda.synchronize()
    for _ in range(warmup):
        args = make_args()
        if flush is not None:
            flush.zero_()
        fn(*args)
    idle = _idle_sync_s()
    threshold = max(SIDE_STREAM_THRESHOLD_S, 4 * idle)
    samples: list[float] = []
    for _ in range(iterations):
        args = make_args()
        if flush is not None:
            flush.zero_()
        start, end = _event(), _event()
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        t0 = time.perf_counter()
        torch.cuda.synchronize()  # anything still running is on another stream
        tail = time.perf_counter() - t0
        sample = float(start.elapsed_time(end))
        if tail > threshold:
            sample += (tail - idle) * 1000.0
        samples.append(sample)
    return samples


def _affinity() -> set[int] | None:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None


@contextmanager
def pinned_core(core: int | None) -> Iterator[None]:
    """This thread on `core` for the block, when `core` is in its affinity set (else nothing
    changes); the previous affinity comes back afterwards. Threads started inside inherit it."""
    affinity = _affinity()
    if core is None or not affinity or core not in affinity:
        yield
        return
    pinned = False
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {core})
        pinned = True
    try:
        yield
    finally:
        if pinned:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, affinity)


@contextmanager
def steady_cpu(core: int | None = None) -> Iterator[None]:
    """One intra-op thread, and this thread on one core (`core` when it is in the affinity set,
    else the set's last), for the block; restored after."""
    threads = torch.get_num_threads()
    affinity = _affinity()
    chosen = core if affinity and core in affinity else max(affinity) if affinity else None
    torch.set_num_threads(1)
    try:
        with pinned_core(chosen):
            yield
    finally:
        torch.set_num_threads(threads)


def _cpu_samples_ms(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    warmup: int,
    iterations: int,
    budget_s: float | None = None,
    core: int | None = None,
) -> list[float]:
    with steady_cpu(core):
        for _ in range(warmup):
            fn(*make_args())
        samples: list[float] = []
        for _ in range(iterations):
            args = make_args()
            start = time.perf_counter()
            fn(*args)
            samples.append((time.perf_counter() - start) * 1000.0)
            spent_s = sum(samples) / 1000.0
            if budget_s is not None and len(samples) >= CPU_MIN_SAMPLES and spent_s >= budget_s:
                break
    return samples


def timing_method(device: str) -> str:
    """The method `measure_latency` will try first on a device.

    Prefer `LatencySamples.method`, which says what was actually used (CUPTI may fail to
    start and fall back to events).
    """
    if device != "cuda":
        return "cpu_monotonic"
    return "cupti" if cupti_available() else "cuda_events"


def measure_latency(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    *,
    device: str,
    warmup: int,
    iterations: int,
    flush_l2: bool = True,
    method: str | None = None,
    budget_s: float | None = None,
    core: int | None = None,
) -> LatencySamples:
    """Time `fn(*make_args())`: warm-up, then one sample per timed iteration.

    `make_args` is called once per call (warm-up included), at most `warmup + iterations`
    times (on CPU `budget_s` may end the timed loop earlier; see the module docstring).
    `method` forces "cupti" / "cuda_events" / "cpu_monotonic"; by default the best available.
    `core`: pin the timing thread to this core (`TimingConfig.timing_core`; on CPU the last
    core of the affinity set when None, on CUDA no pinning when None).
    Raises TimingError when CUPTI finds the call untimeable (no GPU work, changing kernels).
    """
    chosen = method or timing_method(device)
    if chosen == "cpu_monotonic":
        samples = _cpu_samples_ms(fn, make_args, warmup, iterations, budget_s, core)
        return LatencySamples(samples, chosen)
    with pinned_core(core):
        return _gpu_latency(fn, make_args, chosen, warmup, iterations, flush_l2)


def _gpu_latency(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    chosen: str,
    warmup: int,
    iterations: int,
    flush_l2: bool,
) -> LatencySamples:
    flush = l2_flush_buffer() if flush_l2 else None
    note = ""
    if chosen == "cupti":
        try:
            samples = cupti_samples_ms(
                fn, make_args, warmup=warmup, iterations=iterations, flush=flush
            )
            return LatencySamples(samples, "cupti")
        except CuptiUnavailable as exc:
            note = f"CUPTI unavailable, timed with CUDA events: {exc}"
    samples = _events_samples_ms(fn, make_args, warmup, iterations, flush)
    return LatencySamples(samples, "cuda_events", note)
