"""Timing protocol, the shifting input pool and CUPTI span attribution (GPU parts marked)."""

import os
import time
from typing import Any

import pytest
import torch

from kernelarc.runner.cupti_timing import TimingError, _Collected, _spans
from kernelarc.runner.memory_pool import ShiftingInputPool, storage_span
from kernelarc.runner.timing import CPU_MIN_SAMPLES, measure_latency, timing_method

# -- shifting pool --------------------------------------------------------------------------


def test_pool_gives_fresh_addresses_same_values_and_strides() -> None:
    x = torch.randn(4, 6)
    t = x.t()  # non-contiguous
    b = torch.randn(6).expand(4, 6)  # stride-0 broadcast
    pool = ShiftingInputPool([x, t, b, 2.5], [], calls=5)
    seen: set[int] = set()
    for _ in range(5):
        px, pt, pb, scalar = pool.next_args()
        assert torch.equal(px, x) and torch.equal(pt, t) and torch.equal(pb, b)
        assert pt.stride() == t.stride() and pb.stride() == (0, 1)
        assert scalar == 2.5
        seen.add(px.data_ptr())
        px.add_(1.0)  # a call scribbling on its inputs does not leak into the next call
    assert len(seen) == 5
    assert pool.calls_left == 0
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.next_args()


def test_pool_addresses_advance_by_256_bytes_and_outputs_are_zeroed() -> None:
    x = torch.randn(100, dtype=torch.float16)
    out = torch.empty(10)
    pool = ShiftingInputPool([x], [out], calls=3)
    first = pool.next_args()
    first[1].fill_(7.0)
    second = pool.next_args()
    assert second[0].data_ptr() - first[0].data_ptr() == 256
    assert second[1].data_ptr() - first[1].data_ptr() == 256
    assert not bool(second[1].any())


def test_storage_span_counts_only_physical_elements() -> None:
    assert storage_span(torch.empty(3, 4)) == 12
    assert storage_span(torch.empty(3, 4).t()) == 12
    assert storage_span(torch.empty(5).expand(7, 5)) == 5
    assert storage_span(torch.empty(0, 3)) == 0


# -- CPU timing -----------------------------------------------------------------------------


def test_cpu_protocol_counts_calls_and_reports_the_median() -> None:
    calls: list[str] = []

    def fn(tag: str) -> None:
        calls.append(tag)
        time.sleep(0.002 if tag == "timed" else 0.0)

    made = iter(["warm"] * 3 + ["timed"] * 5)
    result = measure_latency(fn, lambda: [next(made)], device="cpu", warmup=3, iterations=5)
    assert calls == ["warm"] * 3 + ["timed"] * 5
    assert result.method == "cpu_monotonic" == timing_method("cpu")
    assert len(result.samples_ms) == 5 and all(s >= 2.0 for s in result.samples_ms)
    assert result.median_ms == sorted(result.samples_ms)[2]


def test_cpu_timing_runs_on_one_thread_and_one_core_and_restores_both() -> None:
    """Issue 17: with torch's intra-op threads left free, CPU samples of one kernel were
    bimodal (0.006 to 15.85 ms over four runs); the timed loop now runs single-threaded on one
    core, the reference's and the candidate's alike."""
    before_threads, before_cores = torch.get_num_threads(), os.sched_getaffinity(0)
    seen: list[tuple[int, frozenset[int]]] = []

    def fn() -> None:
        seen.append((torch.get_num_threads(), frozenset(os.sched_getaffinity(0))))

    measure_latency(fn, list, device="cpu", warmup=1, iterations=4)
    assert len(seen) == 5
    assert all(threads == 1 and len(cores) == 1 for threads, cores in seen)
    assert seen[0][1] <= before_cores
    assert torch.get_num_threads() == before_threads
    assert os.sched_getaffinity(0) == before_cores


def test_the_cpu_budget_stops_the_loop_after_the_minimum_samples() -> None:
    result = measure_latency(
        lambda: time.sleep(0.01), list, device="cpu", warmup=0, iterations=50, budget_s=0.001
    )
    assert len(result.samples_ms) == CPU_MIN_SAMPLES
    unbounded = measure_latency(lambda: None, list, device="cpu", warmup=0, iterations=12)
    assert len(unbounded.samples_ms) == 12


# -- CUPTI attribution (records faked; no GPU needed) -----------------------------------------


def _collected(api: list[tuple[int, int]], gpu: dict[int, list[Any]]) -> _Collected:
    return _Collected(api=api, gpu=gpu)


def test_spans_cover_every_kernel_launched_in_the_window_on_any_stream() -> None:
    collected = _collected(
        api=[(100, 1), (110, 2), (500, 3), (90, 9)],
        gpu={
            1: [(200, 250, "k1")],
            2: [(240, 400, "k2")],  # e.g. on a side stream, ends last
            3: [(600, 650, "k1")],
            9: [(95, 99, "flush")],  # launched before the window: ignored
        },
    )
    windows = [(100, 120), (490, 510)]
    with pytest.raises(TimingError, match="inconsistent kernel set"):
        _spans(windows, collected)
    collected.gpu[3].append((610, 700, "k2"))
    assert _spans(windows, collected) == [pytest.approx(200 / 1e6), pytest.approx(100 / 1e6)]


def test_spans_reject_an_iteration_without_gpu_work() -> None:
    collected = _collected(api=[(100, 1)], gpu={})
    with pytest.raises(TimingError, match="No kernel activities"):
        _spans([(100, 120)], collected)


# -- GPU ----------------------------------------------------------------------------------------


def _copy_fn(src: torch.Tensor, dst: torch.Tensor) -> None:
    dst.copy_(src)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["cuda_events", "auto"])
def test_copy_kernel_time_is_within_bandwidth_bounds(method: str) -> None:
    n = 64 * 1024 * 1024  # 256 MiB read + 256 MiB written
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    pool = ShiftingInputPool([src], [dst], calls=3 + 10)
    result = measure_latency(
        _copy_fn,
        pool.next_args,
        device="cuda",
        warmup=3,
        iterations=10,
        method=None if method == "auto" else method,
    )
    moved = 2 * n * 4
    ms = result.median_ms
    # Between 0.5 TB/s and 10 TB/s effective bandwidth.
    assert moved / 10e12 * 1e3 < ms < moved / 0.5e12 * 1e3, (ms, result.method)
    assert result.method in ("cupti", "cuda_events")


@pytest.mark.gpu
def test_pool_on_gpu_gives_distinct_pointers() -> None:
    x = torch.randn(1000, device="cuda")
    pool = ShiftingInputPool([x], [torch.empty(10, device="cuda")], calls=20)
    pointers = {pool.next_args()[0].data_ptr() for _ in range(20)}
    assert len(pointers) == 20


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["cuda_events", "auto"])
def test_side_stream_work_is_counted(method: str) -> None:
    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def on_current(x: torch.Tensor) -> None:
        torch.mm(x, x)

    def on_side(x: torch.Tensor) -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # type: ignore[arg-type]
            for _ in range(4):
                torch.mm(x, x)

    chosen = None if method == "auto" else method
    one = measure_latency(
        on_current, lambda: [a], device="cuda", warmup=2, iterations=5, method=chosen
    )
    four = measure_latency(
        on_side, lambda: [a], device="cuda", warmup=2, iterations=5, method=chosen
    )
    # Four matmuls on a side stream must not look faster than one on the current stream.
    assert four.median_ms > 2.0 * one.median_ms, (four, one)
