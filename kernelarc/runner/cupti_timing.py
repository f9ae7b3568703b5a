"""Kernel-span timing with CUPTI activity tracing (`cupti-python`), the official v1.0.2 method.

Per timed iteration: fresh arguments, the L2 flush, then the call between two CUPTI host
timestamps, then a device synchronize. Every runtime/driver API call whose start falls inside
that host window is matched by correlation id to the GPU activities it caused (kernels, memcpys,
memsets, on any stream); the iteration's time is the last end minus the first start of those
activities. So side-stream work and gaps between kernels count, host work before the first
launch does not. An iteration that launched nothing, or kernel-name sets that differ between
iterations, are errors (`TimingError`), as upstream ("Timing failed" -> RUNTIME_ERROR).
"""

import bisect
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

ArgFactory = Callable[[], list[Any]]
_BUFFER_BYTES = 8 * 1024 * 1024


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot be used here (not installed, or tracing could not start)."""


class TimingError(RuntimeError):
    """The measurement itself says the candidate is not timeable (a verdict, not a setup issue)."""


def load_cupti() -> ModuleType:
    """The `cupti.cupti` bindings; CuptiUnavailable if `cupti-python` is not importable."""
    try:
        from cupti import cupti  # type: ignore[import-not-found, unused-ignore]
    except Exception as exc:  # ImportError, or a broken install failing at load time
        msg = f"cupti-python is not usable: {exc}"
        raise CuptiUnavailable(msg) from exc
    return cupti  # type: ignore[no-any-return]


def cupti_available() -> bool:
    """Whether `cupti-python` imports here."""
    try:
        load_cupti()
    except CuptiUnavailable:
        return False
    return True


@dataclass
class _Collected:
    api: list[tuple[int, int]] = field(default_factory=list)  # (start ns, correlation id)
    gpu: dict[int, list[tuple[int, int, str | None]]] = field(default_factory=dict)


def _kinds(cupti: ModuleType) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    kind = cupti.ActivityKind
    api = (kind.RUNTIME, kind.DRIVER)
    gpu = (kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET)
    return api, gpu


def _collector(
    cupti: ModuleType, into: _Collected
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    api_kinds, gpu_kinds = _kinds(cupti)
    kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL

    def requested() -> tuple[int, int]:
        return _BUFFER_BYTES, 0

    def completed(activities: list[Any]) -> None:
        for record in activities:
            kind = record.kind
            corr = int(record.correlation_id)
            if kind in api_kinds:
                into.api.append((int(record.start), corr))
            elif kind in gpu_kinds:
                name = str(record.name) if kind == kernel_kind else None
                into.gpu.setdefault(corr, []).append((int(record.start), int(record.end), name))

    return requested, completed


@contextlib.contextmanager
def _tracing(cupti: ModuleType, into: _Collected) -> Any:
    api_kinds, gpu_kinds = _kinds(cupti)
    kinds = api_kinds + gpu_kinds
    requested, completed = _collector(cupti, into)
    try:
        for kind in kinds:
            cupti.activity_enable(kind)
        cupti.activity_register_callbacks(requested, completed)
    except Exception as exc:
        with contextlib.suppress(Exception):
            for kind in kinds:
                cupti.activity_disable(kind)
        msg = f"CUPTI activity tracing could not start: {exc}"
        raise CuptiUnavailable(msg) from exc
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            cupti.activity_flush_all(1)
        with contextlib.suppress(Exception):
            for kind in kinds:
                cupti.activity_disable(kind)
        with contextlib.suppress(Exception):
            cupti.finalize()


def _spans(windows: list[tuple[int, int]], collected: _Collected) -> list[float]:
    launches = sorted(collected.api)
    starts = [start for start, _ in launches]
    samples: list[float] = []
    names_first: frozenset[str] | None = None
    for index, (t0, t1) in enumerate(windows):
        lo, hi = bisect.bisect_left(starts, t0), bisect.bisect_right(starts, t1)
        work = [a for _, corr in launches[lo:hi] for a in collected.gpu.get(corr, [])]
        if not work:
            msg = (
                f"No kernel activities recorded in timed iteration {index}: the call launched "
                "no GPU work (pure-CPU or cached result?)"
            )
            raise TimingError(msg)
        names = frozenset(name for _, _, name in work if name is not None)
        if names_first is None:
            names_first = names
        elif names != names_first:
            msg = (
                f"inconsistent kernel set in timed iteration {index}: "
                f"{sorted(names)} vs {sorted(names_first)} in the first iteration"
            )
            raise TimingError(msg)
        span_ns = max(end for _, end, _ in work) - min(start for start, _, _ in work)
        samples.append(span_ns / 1e6)
    return samples


def cupti_samples_ms(
    fn: Callable[..., Any],
    make_args: ArgFactory,
    *,
    warmup: int,
    iterations: int,
    flush: torch.Tensor | None,
) -> list[float]:
    """Per-iteration kernel spans in ms. CuptiUnavailable before any timed call if CUPTI cannot
    be used (the caller may fall back); TimingError when the candidate is not timeable."""
    cupti = load_cupti()
    torch.cuda.synchronize()
    for _ in range(warmup):
        args = make_args()
        if flush is not None:
            flush.zero_()
        fn(*args)
    torch.cuda.synchronize()
    collected = _Collected()
    windows: list[tuple[int, int]] = []
    with _tracing(cupti, collected):
        for _ in range(iterations):
            args = make_args()
            if flush is not None:
                flush.zero_()
            t0 = int(cupti.get_timestamp())
            fn(*args)
            t1 = int(cupti.get_timestamp())
            torch.cuda.synchronize()
            windows.append((t0, t1))
    return _spans(windows, collected)
