"""What a solution worker does before its candidate comes: make its CUDA context and, while no
candidate waits, import Triton (`worker.worker_main` calls these between its fork and its
`setup`; a worker forked ahead or by a spare's head start has time for both)."""

import logging
import select
import socket
import traceback

import torch

logger = logging.getLogger(__name__)


def create_cuda_context() -> None:
    """Initialise CUDA before the candidate exists (a failure is left for the candidate's own
    first CUDA call to report)."""
    try:
        torch.cuda.init()  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
    except Exception:
        logger.warning("creating the worker's CUDA context failed:\n%s", traceback.format_exc())


def setup_waiting(sock: socket.socket) -> bool:
    """Whether the judge's `setup` has already come (the worker is on its candidate's path)."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def preload_triton() -> None:
    """Import Triton and make its CUDA driver (its utility module loaded from the cache) in a
    worker forked ahead, while no candidate waits for it: most candidates import Triton, which
    took most of a worker's start on the GPU (0.9 s on an H100). Only when no `setup` is
    waiting yet, so a worker forked for a candidate at hand (or a non-Triton candidate's one-off
    runner) does not pay it on the candidate's path. A failure is left for the candidate's own
    import to meet.

    Also Triton's own cache key (`triton_key`, computed once per process): it hashes Triton's
    installation, a library of about half a gigabyte, at the first kernel a process loads, even
    from the cache (0.43 s on the CPU dev machine), which was part of every Triton candidate's
    first call (0.6-1.2 s on the GPU). And `torch.utils.cpp_extension`, which the worker's
    set-up imports for every Python candidate (`hack_checks.ban_cpp_extension`)."""
    try:
        import triton
        import triton.language

        triton.runtime.driver.active.get_current_device()
        _triton_key()
        # What the worker's set-up imports for every Python candidate (to ban its C++ JIT).
        import torch.utils.cpp_extension  # noqa: F401
    except Exception:
        logger.info("triton not preloaded:\n%s", traceback.format_exc())


def _triton_key() -> None:
    """Compute (and so cache) Triton's installation hash, wherever this Triton keeps it."""
    import importlib

    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        key = getattr(importlib.import_module(module), "triton_key", None)
        if callable(key):
            key()
            return
