"""Warm a candidate's JIT caches (torch.compile's Inductor, Triton) in a throwaway worker before
any evaluation input exists, and hash what they then hold, so the host can keep them for this
candidate's later evaluations.

Place in the flow: with `EvalRequest.warm_jit_caches` (the host sets it when its cache holds no
entry for the candidate, `kernelarc/sandboxes/jit_cache.py`), `evaluate.evaluate_request` calls
`warm_jit_caches` after the C++ build and before the RNG stream is seeded. Workers forked from
the zygote import the candidate and are called once per workload on inputs drawn from a fresh
random seed (never an evaluation's inputs, probes or confirmations: those come from the
request's seeds); their outputs are not looked at. Up to MAX_WARM_UP_WORKERS workers compile
at once, each for its own workloads (on CUDA inputs and outputs go by IPC, as in the
evaluation), so a problem of several workload shapes pays about one compile's time, not one per
shape. The workers are then killed with everything they started, and every regular file of the
runner's JIT cache dirs is hashed (`RunFacts.jit_cache`,
signed with the result). The evaluation's own workers are fresh processes (no state, call counts
or memory of the warm-up; only the caches on disk), and find the compiled kernels there.

Why this is safe to carry into later evaluations: the files were written by the candidate's own
code (the compiler runs inside its calls), but before it had seen any evaluation input,
reference output or timing; the hashes fix them at that moment, and the host stores them only
if they still match and hands them only to evaluations of the same candidate (same sources). So
the cache carries nothing a candidate could not compute from its own sources at import time.
A candidate that fails or hangs during the warm-up is left to the evaluation to judge: nothing is
snapshotted, and the evaluation runs as without a warm-up.
"""

import logging
import os
import random
import secrets
import stat
from pathlib import Path

import torch

from kernelarc.runner.build_step import file_sha256
from kernelarc.runner.cuda_ipc import sharing_supported
from kernelarc.runner.hang_deadline import Budget
from kernelarc.runner.inputs import CustomFn, generate_inputs
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.worker_client import WorkerClient, WorkerDied, WorkerTimedOut
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest
from kernelarc.schema.build import CachedFile, JitSnapshot

logger = logging.getLogger(__name__)

#: The environment variables naming the runner's JIT cache dirs (set by the sandbox).
CACHE_DIR_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
#: At most this long for the warm-up (import and one call per workload), whatever is less than
#: the request's own workload budget; past it the warm-up is abandoned.
WARM_UP_BUDGET_S = 300.0
#: At most this many warm-up workers at once (each compiles for its own workloads).
MAX_WARM_UP_WORKERS = 4
#: Workers at once only while their largest workload's tensors stay under this together.
WARM_UP_PARALLEL_BYTES = 8 << 30
WARM_UP_PARALLEL_BYTES_CPU = 256 << 20
MAX_FILES = 20_000
MAX_BYTES = 512 << 20
_MAX_OUTPUT_BLOB = 1 << 40


def warm_jit_caches(
    request: EvalRequest,
    root: Path,
    zygote: Zygote,
    custom: CustomFn | None,
    facts: RunFacts,
    wall_deadline: float | None = None,
) -> None:
    """Warm the JIT caches under `root` and record their files in `facts.jit_cache` (nothing
    when the request does not ask, the caches live outside `root`, or the warm-up fails).
    `wall_deadline` (time.monotonic()) ends the warm-up early enough for the overall timeout.

    The workloads are spread over `warm_up_workers(request)` workers that compile at the same
    time (each workload's shapes may need kernels of their own): the judge sends every worker
    its next call before it waits for any answer."""
    if not request.warm_jit_caches:
        return
    dirs = _cache_dirs(root)
    if not dirs:
        logger.info("JIT warm-up skipped: the cache dirs are not inside the runner's dir")
        return
    count = warm_up_workers(request)
    share = request.device == "cuda" and sharing_supported()
    limit = request.workload_timeout_s
    workers: list[WorkerClient] = []
    request_json = request.model_dump_json().encode("utf-8")
    try:
        for _ in range(count):
            worker = WorkerClient(zygote, share_cuda=share)
            workers.append(worker)
            worker.budget = Budget(
                limit_s=WARM_UP_BUDGET_S if limit is None else min(limit, WARM_UP_BUDGET_S),
                wall_deadline=wall_deadline,
            )
            worker.setup(request_json)
        for worker in workers:
            ready = worker.wait_ready()
            if ready.kind != "ready":
                logger.info("JIT warm-up skipped: the candidate did not import (%s)", ready.kind)
                return
        indices = list(range(len(request.workloads)))
        for first in range(0, len(indices), count):
            batch = indices[first : first + count]
            pending = [
                (worker, worker.start_run(index, _fresh_inputs(request, index, custom)))
                for worker, index in zip(workers, batch, strict=False)
            ]
            for worker, sent in pending:
                worker.finish_run(sent, _MAX_OUTPUT_BLOB)  # outputs are not looked at
    except (WorkerDied, WorkerTimedOut) as exc:
        logger.info("JIT warm-up abandoned (%s: %s)", type(exc).__name__, exc)
        return
    except Exception as exc:  # inputs that cannot be drawn: the evaluation will say so
        logger.info("JIT warm-up abandoned (%s: %s)", type(exc).__name__, exc)
        return
    finally:
        for worker in workers:
            worker.stop()  # the whole process tree: nothing of the warm-up writes after this
    logger.info("JIT warm-up: %d workload(s) over %d worker(s)", len(request.workloads), count)
    facts.jit_cache = snapshot(root, dirs)


def warm_up_workers(request: EvalRequest) -> int:
    """How many workers warm the caches at once: one per workload, at most MAX_WARM_UP_WORKERS
    and the CPUs this process may use (compilers are CPU-bound), and only as many as keep the
    largest workload's tensors (inputs and outputs, judge and worker copies) under
    WARM_UP_PARALLEL_BYTES (WARM_UP_PARALLEL_BYTES_CPU on the CPU) together; 1 when sizes cannot
    be worked out."""
    workloads = request.workloads
    if len(workloads) <= 1:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = min(len(workloads), MAX_WARM_UP_WORKERS, max(1, cores or 1))
    try:
        largest = max(sum(request.definition.tensor_bytes(w.axes)) for w in workloads)
    except (ValueError, KeyError):
        return 1
    per_call = 2 * largest  # the judge's staged copies and the worker's own
    # On the CPU every copy is host memory, which the sandbox limits as a whole.
    allowed = WARM_UP_PARALLEL_BYTES if request.device == "cuda" else WARM_UP_PARALLEL_BYTES_CPU
    if per_call > 0:
        count = min(count, max(1, allowed // per_call))
    return count


def _cache_dirs(root: Path) -> list[Path]:
    """The JIT cache dirs the environment names, when they lie inside `root`."""
    found = []
    for name in CACHE_DIR_VARIABLES:
        value = os.environ.get(name)
        if value and Path(value).resolve().is_relative_to(root.resolve()):
            found.append(Path(value).resolve())
    return found


def _fresh_inputs(request: EvalRequest, index: int, custom: CustomFn | None) -> list[object]:
    """One round of the workload's inputs from a fresh random seed; the request's RNG stream
    (and Python's) are left as they were."""
    devices = [torch.cuda.current_device()] if request.device == "cuda" else []
    python_state = random.getstate()
    with torch.random.fork_rng(devices=devices):
        seed = secrets.randbits(62)
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            workload = request.workloads[index]
            return list(
                generate_inputs(
                    request.definition, workload, request.device, request.problem_dir, custom
                )
            )
        finally:
            random.setstate(python_state)


def snapshot(root: Path, dirs: list[Path]) -> JitSnapshot | None:
    """Every regular file under `dirs` (no link followed), hashed, with paths relative to
    `root`; None when there are more than MAX_FILES or MAX_BYTES."""
    files: list[CachedFile] = []
    total = 0
    base = root.resolve()
    for folder in dirs:
        for current, subdirs, names in os.walk(folder, followlinks=False):
            subdirs.sort()
            for name in sorted(names):
                path = Path(current) / name
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode):
                    continue
                total += info.st_size
                if len(files) >= MAX_FILES or total > MAX_BYTES:
                    logger.info(
                        "JIT caches too large to keep (%d files, %d bytes)", MAX_FILES, total
                    )
                    return None
                relative = path.relative_to(base).as_posix()
                files.append(CachedFile(path=relative, sha256=file_sha256(path), size=info.st_size))
    return JitSnapshot(files=files)
