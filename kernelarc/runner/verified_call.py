"""One verified call of the candidate, and the worker it runs in.

Place in the flow: `evaluate._evaluate_workload` starts (or reuses) the solution worker with
`ensure_worker`, runs every correctness round through `verified_call` and the timing probe
through `probe`, and checks every reply with `check_probes`. A verified call runs the reference
and the candidate on the same inputs and raises `Stop` unless the outputs match; the judge loads
and compares the outputs itself. Apart from `evaluate.py` (the workload's flow: rounds, timing,
the plausibility check) because this is the per-call checking it repeats.

REWARD_HACK here: patched functions or injected threads in a reply, a payload that
`torch.load(weights_only=True)` refuses, or outputs whose count or types contradict the worker's
own report (an honest worker never sends them).
"""

import logging
import random
import sys
import time
from typing import Any

import torch

from kernelarc.runner.channel import ChannelError, WorkerReply, unpack_values
from kernelarc.runner.correctness import (
    WorstErrors,
    compare,
    find_lazy_output,
    type_mismatch,
)
from kernelarc.runner.cuda_ipc import sharing_supported
from kernelarc.runner.hack_checks import thread_injection
from kernelarc.runner.inputs import Value
from kernelarc.runner.judge_state import Judge, Stop, Tally, stop
from kernelarc.runner.memory_limit import allocation_failure, worker_out_of_memory
from kernelarc.runner.outcome import Outcome
from kernelarc.runner.reference_side import generate, run_reference
from kernelarc.runner.resident_cache import seed_key
from kernelarc.runner.sched_state import is_stopped
from kernelarc.runner.worker_client import RunResult, WorkerClient, WorkerDied
from kernelarc.schema import EvalStatus, Workload

logger = logging.getLogger(__name__)

_PROBE_SEED_STEP = 7919
_PLAIN_TENSOR = "torch.Tensor"


def ensure_worker(judge: Judge) -> WorkerClient:
    """The judge's worker, started from the zygote when there is none (Stop when it cannot
    import or compile the solution, or patched functions at import: no workload can run)."""
    assert judge.clock is not None
    if judge.worker is not None:
        judge.worker.budget = judge.clock.budget
        return judge.worker
    judge.phase = "start (import)"
    share = judge.request.device == "cuda" and judge.share_cuda and sharing_supported()
    judge.clock.worker_started()
    logger.info("starting a solution worker")
    with judge.facts.stage("worker_start"):
        judge.worker = worker = _prestarted_or_new(judge, share)
        ready = worker.wait_ready()
    _note_start(judge, worker, ready)
    if ready.kind == "import_error":
        judge.fatal = Outcome(EvalStatus.RUNTIME_ERROR, f"solution failed to import\n{ready.error}")
    elif ready.kind == "compile_error":
        judge.fatal = Outcome(EvalStatus.COMPILE_ERROR, ready.error)
    elif ready.tampered:
        log = f"monkey-patched at import: {', '.join(ready.tampered)}"
        judge.fatal = Outcome(EvalStatus.REWARD_HACK, log)
    if judge.fatal is not None:
        judge.discard_worker()
        raise Stop(judge.fatal)
    return judge.worker


def _note_start(judge: Judge, worker: WorkerClient, ready: WorkerReply) -> None:
    """Log where the worker's start went and add its parts to the facts (`worker_context_wait`:
    CUDA context making the candidate waited for; `worker_import`: staging and importing it).
    The figures are the worker's own (untrusted): they only explain the time, never a verdict."""
    waited = worker.context_on_path_s(ready)
    judge.facts.add("worker_context_wait", waited)
    judge.facts.add("worker_import", ready.import_s)
    logger.info(
        "worker start: CUDA context %.3f s (%.3f s of it after the candidate came), "
        "idle %.3f s before it, import %.3f s",
        ready.context_s,
        waited,
        ready.idle_s,
        ready.import_s,
    )


def _prestarted_or_new(judge: Judge, share: bool) -> WorkerClient:
    """The pre-started worker given the request (a fresh one when it died waiting: that is
    no fault of the candidate), else a worker forked now."""
    assert judge.clock is not None
    worker = judge.take_prestarted(share)
    if worker is not None and is_stopped(worker.pid):
        # Stopped by the last candidate just before its sweep (the judge's check may have come
        # before the stop landed): its setup would hang this candidate's start.
        logger.warning("the pre-started worker was stopped; forking another")
        worker.stop()
        worker = None
    if worker is not None:
        worker.budget = judge.clock.budget
        try:
            worker.setup(judge.request_json)
            return worker
        except WorkerDied as exc:
            logger.warning("the pre-started worker was gone (%s); forking another", exc)
            worker.stop()
    worker = WorkerClient(judge.zygote, share_cuda=share)
    worker.budget = judge.clock.budget
    worker.setup(judge.request_json)
    return worker


def probe(judge: Judge, worker: WorkerClient, index: int, workload: Workload, tally: Tally) -> None:
    """One more verified call on fresh inputs from a forked RNG (the request's stream stays)."""
    req = judge.request
    devices = [torch.cuda.current_device()] if req.device == "cuda" else []
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    stream_key = judge.draw_key
    with torch.random.fork_rng(devices=devices):
        seed = req.seed + _PROBE_SEED_STEP * (index + 1)
        torch.manual_seed(seed)
        random.seed(seed)
        judge.draw_key = seed_key("probe", seed)
        try:
            with judge.times.phase("inputs"):
                inputs = generate(judge, workload)
            with judge.facts.stage("correctness"):
                verified_call(judge, worker, index, workload, inputs, tally)
        finally:
            random.setstate(python_state)
            if numpy is not None and numpy_state is not None:
                numpy.random.set_state(numpy_state)
            judge.draw_key = stream_key


def check_probes(judge: Judge, reply: WorkerReply, tally: Tally) -> None:
    """REWARD_HACK (Stop) when the reply shows patched functions or injected threads."""
    if reply.tampered:
        log = f"{judge.phase}: monkey-patched: {', '.join(reply.tampered)}"
        raise stop(EvalStatus.REWARD_HACK, log)
    if tally.base_threads is not None:
        injected = thread_injection(reply.threads_started, reply.threads_alive, *tally.base_threads)
        if injected is not None:
            raise stop(EvalStatus.REWARD_HACK, f"{judge.phase}: {injected}")


def verified_call(
    judge: Judge,
    worker: WorkerClient,
    index: int,
    workload: Workload,
    inputs: list[Value],
    tally: Tally,
) -> RunResult:
    """Reference and candidate on the same inputs; raises Stop unless the outputs match."""
    req = judge.request
    times = judge.times
    with times.phase("reference"):
        refs, ref_changed = run_reference(judge, inputs)
    max_blob = 4 * sum(r.nbytes for r in refs) + (16 << 20)
    with times.phase("candidate calls (with transfers)"):
        run = _run_call(judge, worker, index, inputs, max_blob)
    reply = run.reply
    check_probes(judge, reply, tally)
    if reply.error:
        note = f"\n{worker_out_of_memory(req)}" if allocation_failure(reply.error) else ""
        raise stop(EvalStatus.RUNTIME_ERROR, f"{judge.phase}: {reply.error}{note}")
    names = list(req.definition.outputs)
    for name, kind in zip(names, reply.output_types, strict=False):
        if kind != _PLAIN_TENSOR:
            log = f"lazy or subclass output: output {name!r} is a {kind}, not a plain torch.Tensor"
            raise stop(EvalStatus.REWARD_HACK, log)
    started = time.thread_time()
    with times.phase("outputs received"):
        outputs = _load_outputs(run, req.device, names)
    if tally.base_threads is not None:
        # Wall time, or the worker's CPU time when smaller (a loaded host delays the worker's
        # wake-ups, not its CPU use): the evidence the work took at least this long.
        observed = run.round_trip_s if run.cpu_s is None else min(run.round_trip_s, run.cpu_s)
        transfer = run.pack_s + run.unpack_s + time.thread_time() - started
        tally.warm.append((observed, transfer))
    with times.phase("comparison"):
        _check_outputs(judge, workload, outputs, refs, tally.worst)
    changed = [
        n for n in reply.mutated_inputs if n in req.definition.inputs and n not in ref_changed
    ]
    if changed:
        log = (
            f"{judge.phase}: the solution modified input(s) {changed}, which the reference "
            "leaves unchanged"
        )
        raise stop(EvalStatus.INCORRECT_NUMERICAL, log, tally.worst)
    return run


def _run_call(
    judge: Judge, worker: WorkerClient, index: int, inputs: list[Value], max_blob: int
) -> RunResult:
    """One call; if the first call with IPC-shared values kills the worker, CUDA IPC is taken to
    be broken on this machine: it is turned off and the call repeated by copy in a fresh worker.
    (A candidate that dies on purpose gains nothing: it dies again on the copy.)"""
    shared = worker.share_cuda
    try:
        run = worker.run(index, inputs, max_blob)
    except WorkerDied:
        if not shared or judge.sharing_proven:
            raise
        how = judge.discard_worker()
        judge.share_cuda = False
        judge.sharing_note = (
            f"CUDA IPC turned off: the first worker given shared inputs {how}; values go by copy"
        )
        logger.warning("%s", judge.sharing_note)
        return ensure_worker(judge).run(index, inputs, max_blob)
    if shared and worker.share_cuda:
        judge.sharing_proven = True
    return run


def _load_outputs(run: RunResult, device: str, names: list[str]) -> list[Value]:
    try:
        outputs = run.values if run.values is not None else unpack_values(run.blob, device)
    except ChannelError as exc:
        raise stop(EvalStatus.REWARD_HACK, f"solution worker sent bad outputs: {exc}") from None
    if len(outputs) != len(names) or len(run.reply.output_types) != len(names):
        log = f"solution worker sent {len(outputs)} outputs for {len(names)}"
        raise stop(EvalStatus.REWARD_HACK, log)
    lazy = find_lazy_output(outputs, names)
    if lazy is not None:
        raise stop(EvalStatus.REWARD_HACK, f"lazy or subclass output: {lazy}")
    return outputs


def _check_outputs(
    judge: Judge,
    workload: Workload,
    outputs: list[Any],
    refs: list[torch.Tensor],
    worst: WorstErrors,
) -> None:
    names = list(judge.request.definition.outputs)
    for name, out, ref in zip(names, outputs, refs, strict=True):
        mismatch = type_mismatch(out, ref, name)
        if mismatch is not None:
            kind, message = mismatch
            status = EvalStatus.INCORRECT_SHAPE if kind == "shape" else EvalStatus.INCORRECT_DTYPE
            raise stop(status, message)
    for name, out, ref in zip(names, outputs, refs, strict=True):
        check = compare(out, ref, workload.tolerance, name)
        worst.add(check)
        if not check.ok:
            raise stop(EvalStatus.INCORRECT_NUMERICAL, f"{judge.phase}: {check.reason}", worst)
