"""A spare runner's head start: its worker zygote and the first candidate's worker, forked while
the spare waits for `go`.

Why: a sandbox starts a spare runner before its candidate exists, but the spare used to fork its
zygote and the candidate's worker only after `go`, so the first request of every runner paid
the worker's start on the candidate's path (on an H100 its CUDA context took 0.2-1.9 s and
importing Triton 0.4-0.6 s per one-off runner, 2026-12-06). Short campaigns (a suite share of
40-50 s) judge most candidates in a runner's first request, and a one-off runner
(`sandbox.resident_requests: 0`) judges only first requests. Forked before `go`, the worker
makes its CUDA context and imports Triton while the spare waits (`worker.py`).

What allows it: nothing the zygote inherits depends on the request. The judge has no key yet
(it is read after `go`), loaded no reference and touched no CUDA; the per-request address-space
limit of a CPU evaluation is applied by each worker when its candidate comes (`setup`) and by
the judge to itself after `go`. The runner leads its own process group first
(`go_line.lead_own_group`), so a Docker deadline, which kills the group, kills the zygote and
its workers too. torch.compile's modules must be loaded before the zygote is forked: a CUDA
spare loads them before its head start (`__main__._preload_compile_for_cuda`); a CPU request for
a torch.compile candidate drops the head start and loads them (`__main__._preload_compile`).
Anything failing here leaves the spare as it was: the zygote is started after `go`.
"""

import logging
import traceback
from dataclasses import dataclass
from pathlib import Path

from kernelarc.runner.evaluate import prestart_worker, start_zygote
from kernelarc.runner.go_line import lead_own_group
from kernelarc.runner.worker_client import WorkerClient
from kernelarc.runner.zygote import Zygote

logger = logging.getLogger(__name__)


@dataclass
class HeadStart:
    """The zygote and the worker forked before `go` (None when that fork failed)."""

    zygote: Zygote
    worker: WorkerClient | None

    def close(self) -> None:
        """Stop the worker and the zygote (a discarded spare, or a head start not used)."""
        if self.worker is not None:
            self.worker.stop()
        self.zygote.close()


def head_start(device: str, root: Path) -> HeadStart | None:
    """Fork the zygote for `device` (its workers stage candidates under `root`) and one worker;
    None when the zygote cannot start (the runner starts one after `go`, as without)."""
    try:
        lead_own_group()
        zygote = start_zygote(device, root)
    except Exception:
        logger.warning("no head start: the zygote did not start:\n%s", traceback.format_exc())
        return None
    return HeadStart(zygote, prestart_worker(zygote))
