"""One long-lived thread that starts the local sandbox's runner processes.

The runner's parent-death signal (`process_limits`, prctl(PR_SET_PDEATHSIG)) fires when the
*thread* that forked it ends, not the process. A cold runner is waited for by the thread that
started it, so that was enough; a spare runner outlives the `evaluate()` call that started it,
and would die with that call's thread (an executor's or a test's worker thread) while its
sandbox still counts on it. So every runner is forked from this daemon thread, which lives as
long as the host process: a runner still dies with its host (SIGKILLed, or crashed), but never
with the thread that asked for it.
"""

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[Callable[[], Any], "Future[Any]"]

_lock = threading.Lock()
_jobs: "queue.SimpleQueue[_Job] | None" = None
_thread: threading.Thread | None = None


def _serve(jobs: "queue.SimpleQueue[_Job]") -> None:
    while True:
        fn, future = jobs.get()
        if future.set_running_or_notify_cancel():
            try:
                result = fn()
            except BaseException as exc:  # the caller's thread re-raises it
                future.set_exception(exc)
            else:
                future.set_result(result)
                del result
        del fn, future  # a job must not keep its sandbox alive (its finalizer kills spares)


def _started() -> "queue.SimpleQueue[_Job]":
    global _jobs, _thread
    with _lock:
        if _jobs is None or _thread is None or not _thread.is_alive():
            _jobs = queue.SimpleQueue()
            _thread = threading.Thread(
                target=_serve, args=(_jobs,), name="kernelarc-runner-spawn", daemon=True
            )
            _thread.start()
        return _jobs


def _forget_after_fork() -> None:
    """A forked child has no spawn thread (only the forking thread survives a fork)."""
    global _lock, _jobs, _thread
    _lock, _jobs, _thread = threading.Lock(), None, None


os.register_at_fork(after_in_child=_forget_after_fork)


def submit_to_spawn_thread(fn: Callable[[], T]) -> "Future[T]":
    """Queue `fn` on the spawn thread and return at once: its future (result or exception)."""
    future: Future[T] = Future()
    _started().put((fn, future))
    return future


def call_in_spawn_thread(fn: Callable[[], T]) -> T:
    """Run `fn` (which starts a process) on the spawn thread; its result, or its exception."""
    if threading.current_thread() is _thread:
        return fn()
    return submit_to_spawn_thread(fn).result()
