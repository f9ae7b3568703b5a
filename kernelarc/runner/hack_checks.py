"""Reward-hack checks: probes installed in the worker, and the judge's rules over their reports.

Worker side (installed before the candidate is imported, so the candidate sees them in place):

- `ThreadMonitor` hooks `threading.Thread.start` and `_thread.start_new_thread` (and
  `start_joinable_thread` where it exists) and counts every Python thread started.
- `Guards` keeps strong references to the timers (`time.perf_counter` & co., `torch.cuda.Event`
  and its methods, `torch.cuda.synchronize`, `statistics.median`), `torch.save`, the thread
  hooks, the `cpp_extension` stubs and every function and class of the runner modules the worker
  uses; `tampered()` names those no longer identical to the snapshot (identity, not `id()`).
- `ban_cpp_extension` replaces `torch.utils.cpp_extension.load`/`load_inline` with functions
  that raise (Python-language solutions may not JIT C++, as upstream).

All of this runs in the candidate's own process, so a determined candidate can blind it; it
catches the naive hacks and explains them. What a candidate cannot blind is on the judge side:
outputs are compared by the judge, and `implausible_latency` checks the claimed latency
against wall time the judge measured itself.
"""

import _thread
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import torch

# Judge-side timing plausibility (see `implausible_latency`).
PLAUSIBILITY_FACTOR = 8.0
PLAUSIBILITY_SLACK_S = 0.05
#: Times the judge's own (de)serialisation a verified call may add. 4 was too few for an
#: honest CPU problem of 256 MiB of inputs sent by copy: the worker's side (its torch.load of
#: the inputs into fresh pages, its torch.save of the outputs) cost ~5.8x the judge's, and the
#: memory-limit test (tests/sandboxes/test_local_sandbox.py) flagged it REWARD_HACK on an idle
#: 2-core host, run after run.
TRANSFER_ALLOWANCE = 8.0

_THREAD_STARTERS = ("start_new_thread", "start_joinable_thread")


class ThreadMonitor:
    """Counts Python threads started from now on (hooks stay installed for the process)."""

    def __init__(self) -> None:
        """Install the hooks."""
        self.started = 0
        original_start = threading.Thread.start
        monitor = self

        def start(thread: threading.Thread) -> None:
            monitor.started += 1
            original_start(thread)

        threading.Thread.start = start  # type: ignore[method-assign,assignment]
        for name in _THREAD_STARTERS:
            original = getattr(_thread, name, None)
            if original is not None:
                setattr(_thread, name, _counting(original, monitor))

    @staticmethod
    def alive() -> int:
        """Live Python threads (`threading.active_count()`)."""
        return threading.active_count()


def _counting(original: Callable[..., Any], monitor: ThreadMonitor) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        monitor.started += 1
        return original(*args, **kwargs)

    return wrapper


class CppExtensionBanned(RuntimeError):
    """Raised by the `cpp_extension` stubs."""


def ban_cpp_extension() -> None:
    """Replace the C++ JIT entry points with functions that raise (Python languages only)."""
    import torch.utils.cpp_extension as cpp_extension  # heavy: only when banning

    def banned(*_args: Any, **_kwargs: Any) -> Any:
        msg = (
            "torch.utils.cpp_extension.load/load_inline are disabled for Python-language "
            "solutions; declare a C++ language (cuda_cpp, ...) to ship C++ sources"
        )
        raise CppExtensionBanned(msg)

    cpp_extension.load = banned
    cpp_extension.load_inline = banned


def _timer_attributes() -> list[tuple[str, Any, str]]:
    event = torch.cuda.Event
    return [
        ("time.perf_counter", time, "perf_counter"),
        ("time.perf_counter_ns", time, "perf_counter_ns"),
        ("time.monotonic", time, "monotonic"),
        ("time.monotonic_ns", time, "monotonic_ns"),
        ("time.time", time, "time"),
        ("time.process_time", time, "process_time"),
        ("statistics.median", statistics, "median"),
        ("torch.save", torch, "save"),
        ("torch.cuda.Event", torch.cuda, "Event"),
        ("torch.cuda.Event.elapsed_time", event, "elapsed_time"),
        ("torch.cuda.Event.record", event, "record"),
        ("torch.cuda.Event.synchronize", event, "synchronize"),
        ("torch.cuda.synchronize", torch.cuda, "synchronize"),
        ("threading.Thread.start", threading.Thread, "start"),
        *[(f"_thread.{n}", _thread, n) for n in _THREAD_STARTERS if hasattr(_thread, n)],
    ]


def _module_attributes(module: ModuleType) -> list[tuple[str, Any, str]]:
    """Every function and class defined in `module` (what its code calls by global name)."""
    return [
        (f"{module.__name__}.{name}", module, name)
        for name, value in vars(module).items()
        if callable(value) and getattr(value, "__module__", None) == module.__name__
    ]


class Guards:
    """A strong-reference snapshot of functions the worker's verdicts depend on."""

    def __init__(self, modules: Iterable[ModuleType], cpp_banned: bool) -> None:
        """Snapshot now: after the hooks and stubs are in place, before the candidate import."""
        attributes = _timer_attributes()
        if cpp_banned:
            import torch.utils.cpp_extension as cpp_extension

            attributes += [
                ("torch.utils.cpp_extension.load", cpp_extension, "load"),
                ("torch.utils.cpp_extension.load_inline", cpp_extension, "load_inline"),
            ]
        for module in modules:
            attributes += _module_attributes(module)
        self._snapshot = tuple(
            (label, owner, name, getattr(owner, name)) for label, owner, name in attributes
        )

    def tampered(self) -> list[str]:
        """Labels of guarded attributes replaced since the snapshot."""
        return [
            label
            for label, owner, name, original in self._snapshot
            if getattr(owner, name, None) is not original
        ]


def same_bits(before: Any, after: Any) -> bool:
    """Whether a value is bitwise unchanged (NaN-safe for tensors)."""
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return bool(before == after)
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    try:
        return torch.equal(before.view(torch.uint8), after.view(torch.uint8))
    except RuntimeError:  # views of this dtype/stride as bytes are not possible
        return torch.equal(before, after)


def implausible_latency(claimed_ms: float, observed_s: float, transfer_s: float) -> str | None:
    """Why a claimed median latency cannot be true, or None.

    `observed_s` is the least the judge measured for a warm `run` request whose output it
    verified (fresh inputs, so the work had to be done): per request the smaller of the wall
    round trip and the worker's kernel-accounted CPU time over it (a loaded host delays the
    worker's wake-ups, which inflates wall time but not CPU time); `transfer_s` is the judge's
    own (de)serialisation time for that request, a proxy for the worker's mirror-image work.
    The claim is rejected when

        observed_s > PLAUSIBILITY_FACTOR * claimed + PLAUSIBILITY_SLACK_S
                     + TRANSFER_ALLOWANCE * transfer_s

    i.e. a verified call took at least 8x the claimed latency plus 50 ms plus eight times the
    transfer cost. Honest kernels have observed ~= claimed + transfer + IPC, far inside this;
    kernels under ~50 ms are never flagged (their cheating cannot be told from IPC noise), while
    a 200 ms kernel that claims 1 ms (a forged timer, or skipping work when called from the
    timing loop, or work hidden on a side stream that CUDA events miss) is. A kernel that only
    waits (sleeps, or a blocking CUDA synchronize) uses little CPU and is judged by that.
    """
    allowed = (
        PLAUSIBILITY_FACTOR * claimed_ms / 1000.0
        + PLAUSIBILITY_SLACK_S
        + TRANSFER_ALLOWANCE * transfer_s
    )
    if observed_s <= allowed:
        return None
    return (
        f"timing forged: claimed median latency {claimed_ms:.4g} ms, but every verified call "
        f"took at least {observed_s * 1000:.4g} ms of judge-measured wall and CPU time (allowed "
        f"at most {allowed * 1000:.4g} ms)"
    )


def thread_injection(started: int, alive: int, base_started: int, base_alive: int) -> str | None:
    """Why the thread counts after later calls show injection, or None.

    The baseline is taken after the workload's first call (imports, JIT and compile threads are
    done by then); any Python thread started afterwards, or more live threads, is injection.
    """
    if started <= base_started and alive <= base_alive:
        return None
    return (
        f"thread injection: {started - base_started} Python thread(s) started after the "
        f"workload's first call; {alive} alive vs {base_alive} after that call"
    )
