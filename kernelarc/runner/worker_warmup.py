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
    import to meet."""
    try:
        import triton
        import triton.language

        triton.runtime.driver.active.get_current_device()
    except Exception:
        logger.info("triton not preloaded:\n%s", traceback.format_exc())
