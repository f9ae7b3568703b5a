"""The judge: per workload, correctness rounds and timing, with the candidate in a worker process.

The judge (this process) never imports candidate code and never puts `src/` on sys.path. It
loads the reference, draws every round's inputs from the request's RNG stream, runs the
reference on its own copies, sends the inputs to the solution worker (`worker.py`, forked from
the zygote), and compares the outputs it gets back itself. It times the reference itself; the
candidate is timed in the worker, and the claimed median is checked against the judge's own
clock (`hack_checks.implausible_latency`) using a verified "timing probe" call on fresh inputs
drawn from a forked RNG, so the request's stream stays the official one.

A worker that dies fails that workload (RUNTIME_ERROR); the next workload gets a fresh worker,
as it does after any workload that did not pass. A worker that overruns the workload's deadline
(`hang_deadline.py`: derived from the reference's own time, capped by the request's timeouts)
is TIMEOUT there, and every later workload is TIMEOUT without starting the candidate again: a
hung candidate costs one deadline, not one per workload or the sandbox's whole timeout.
`evaluate_request` yields (request index, Trace) per workload as it finishes, so the entry point
can sign and write partial results as it goes. C++ is built first (`build_step.py`), then the
candidate's JIT caches are warmed if the host asks (`jit_warmup.py`); the order, early stop and
stream positioning of a screen are `stream_order.py`'s; with `checked_rounds="last"` only the
last round is compared (a screen compared them all). Seconds per stage go to `RunFacts`.

Statuses decided here beyond the official flow: an input the solution changed although the
reference leaves it unchanged is INCORRECT_NUMERICAL (its observable result differs from the
reference's); a worker payload that `torch.load(weights_only=True)` refuses, or outputs whose
types contradict the worker's own report, are REWARD_HACK (an honest worker never sends them).
"""

import functools
import logging
import random
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelarc.runner.build_step import build_before_workloads
from kernelarc.runner.channel import ChannelError, WorkerReply, unpack_values
from kernelarc.runner.correctness import (
    WorstErrors,
    compare,
    find_lazy_output,
    type_mismatch,
)
from kernelarc.runner.cuda_ipc import sharing_supported
from kernelarc.runner.environment import describe_environment
from kernelarc.runner.hack_checks import implausible_latency, thread_injection
from kernelarc.runner.hang_deadline import WorkloadClock
from kernelarc.runner.inputs import CustomFn, Value
from kernelarc.runner.interleaved import SpeedupInterval
from kernelarc.runner.interleaved_session import time_interleaved
from kernelarc.runner.jit_warmup import warm_jit_caches
from kernelarc.runner.judge_state import Fn, Judge, Stop, Tally, stop
from kernelarc.runner.memory_limit import (
    allocation_failure,
    worker_killed_note,
    worker_out_of_memory,
)
from kernelarc.runner.outcome import Outcome, exception_log, make_trace
from kernelarc.runner.phase_times import PhaseTimes
from kernelarc.runner.reference_side import (
    generate,
    import_allowance_s,
    run_reference,
    time_reference,
)
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.staging import load_reference
from kernelarc.runner.stream_order import StreamCursor, evaluation_order
from kernelarc.runner.timing import timing_method
from kernelarc.runner.worker import worker_main
from kernelarc.runner.worker_client import RunResult, WorkerClient, WorkerDied, WorkerTimedOut
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest, EvalStatus, Performance, Trace, Workload

logger = logging.getLogger(__name__)

_PROBE_SEED_STEP = 7919
_PLAIN_TENSOR = "torch.Tensor"
_TIMING_METHODS = frozenset({"cupti", "cuda_events", "cpu_monotonic"})


def start_zygote(request: EvalRequest, root: Path) -> Zygote:
    """Fork the worker zygote; call before touching CUDA, the reference or any secret."""
    return Zygote(functools.partial(worker_main, request=request, root=root))


def evaluate_request(
    request: EvalRequest, root: Path, zygote: Zygote, facts: RunFacts | None = None
) -> Iterator[tuple[int, Trace]]:
    """Evaluate the request's workloads in `workload_order`: (request index, trace) each."""
    facts = facts if facts is not None else RunFacts()
    environment = describe_environment(request.device)
    try:
        module: ModuleType = load_reference(request.definition, root)
        reference: Fn = module.run
        entry_name = request.definition.custom_inputs_entrypoint
        custom: CustomFn | None = getattr(module, entry_name) if entry_name else None
    except Exception:
        failed = Outcome(EvalStatus.INVALID_REFERENCE, exception_log("reference failed to load"))
        for index, workload in enumerate(request.workloads):
            yield index, make_trace(request, workload, environment, failed)
        return
    judge = Judge(request=request, reference=reference, custom=custom, zygote=zygote, facts=facts)
    judge.clock = WorkloadClock.for_request(request, import_allowance_s(request))
    with facts.stage("build"):
        facts.build, judge.fatal = build_before_workloads(request, root)
    if judge.fatal is None:
        with facts.stage("jit_warm_up"):
            warm_jit_caches(request, root, zygote, custom, facts, judge.clock.wall_deadline())
    cursor = StreamCursor(request, functools.partial(generate, judge))
    order = evaluation_order(request)
    try:
        for position, index in enumerate(order):
            workload = request.workloads[index]
            logger.info("workload %s", workload.uuid)
            outcome = judge.fatal or _evaluate_in_stream(judge, cursor, index, workload)
            passed = outcome.status == EvalStatus.PASSED
            cursor.finished(index, every_round_drawn=passed)
            if not passed:
                # A worker that failed is not reused: a poisoned CUDA context (illegal address),
                # device memory it still holds, or state it broke must not decide the next one.
                judge.discard_worker()
            yield index, make_trace(request, workload, environment, outcome)
            if not passed and request.stop_at_first_failure and judge.fatal is None:
                facts.skipped = order[position + 1 :]
                logger.info("stopping at the first failure: %d workloads left", len(facts.skipped))
                return
    finally:
        judge.discard_worker()


def _evaluate_in_stream(
    judge: Judge, cursor: StreamCursor, index: int, workload: Workload
) -> Outcome:
    """Position the RNG stream at the workload's start, then evaluate it."""
    try:
        cursor.move_to(index)
    except Stop as ended:
        log = f"drawing the inputs of the workloads before this one: {ended.outcome.log}"
        return Outcome(ended.outcome.status, log)
    return _evaluate_guarded(judge, index, workload)


def _evaluate_guarded(judge: Judge, index: int, workload: Workload) -> Outcome:
    try:
        return _evaluate_workload(judge, index, workload)
    except Stop as ended:
        return ended.outcome
    except WorkerTimedOut:
        how = judge.discard_worker()
        deadline = judge.clock.describe() if judge.clock is not None else "its deadline"
        log = (
            f"the solution worker overran its deadline on this workload during {judge.phase} "
            f"and was killed ({how}): {deadline}"
        )
        judge.fatal = Outcome(
            EvalStatus.TIMEOUT,
            f"not run: the candidate overran its deadline on workload {workload.uuid} "
            f"({judge.phase}), so no later workload starts it again",
        )
        return Outcome(EvalStatus.TIMEOUT, log)
    except WorkerDied as exc:
        how = judge.discard_worker()
        log = f"the solution worker {how} during {judge.phase} ({exc})"
        log += worker_killed_note(judge.request, how, judge.oom)
        return Outcome(EvalStatus.RUNTIME_ERROR, log)


def _ensure_worker(judge: Judge) -> WorkerClient:
    assert judge.clock is not None
    if judge.worker is not None:
        judge.worker.budget = judge.clock.budget
        return judge.worker
    judge.phase = "start (import)"
    share = judge.request.device == "cuda" and judge.share_cuda and sharing_supported()
    judge.clock.worker_started()
    logger.info("starting a solution worker")
    with judge.facts.stage("worker_start"):
        judge.worker = WorkerClient(judge.zygote, share_cuda=share)
        judge.worker.budget = judge.clock.budget
        ready = judge.worker.wait_ready()
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


def _evaluate_workload(judge: Judge, index: int, workload: Workload) -> Outcome:
    req = judge.request
    assert judge.clock is not None
    judge.clock.begin_workload()
    judge.oom.reset()
    times = judge.times = PhaseTimes()
    with times.phase("worker start"):
        worker = _ensure_worker(judge)
    tally = Tally()
    inputs: list[Value] = []
    last = req.correctness_rounds - 1
    for round_index in range(req.correctness_rounds):
        judge.phase = f"round {round_index}"
        with times.phase("inputs"):
            inputs = generate(judge, workload)
        if req.checked_rounds == "last" and round_index < last:
            continue  # drawn for the stream; a screen compared this round on the same inputs
        with judge.facts.stage("correctness"):
            run = _verified_call(judge, worker, index, workload, inputs, tally)
        worker = _ensure_worker(judge)  # a fresh one when IPC failed its first call
        reply = run.reply
        if tally.base_threads is None:
            tally.base_threads = (reply.threads_started, reply.threads_alive)
    judge.phase = "timing"
    with times.phase("candidate timing"), judge.facts.stage("timing"):
        timed = worker.time(req.timing)
    _check_probes(judge, timed, tally)
    if timed.error:
        raise stop(EvalStatus.RUNTIME_ERROR, timed.error)
    with times.phase("reference timing"), judge.facts.stage("reference_timing"):
        reference_latency, notes = time_reference(judge, inputs)
    judge.phase = "timing probe"
    _probe(judge, worker, index, workload, tally)
    observed_s, transfer_s = min(tally.warm)
    logger.info(
        "timing check: claimed %.4g ms, verified calls took >= %.4g ms (transfer %.4g ms, %s)",
        timed.latency_ms,
        observed_s * 1000,
        transfer_s * 1000,
        "by CUDA IPC" if worker.share_cuda else "by copy",
    )
    _check_plausible(timed.latency_ms, observed_s, transfer_s)
    method = timed.timing_method
    clock = method if method in _TIMING_METHODS else timing_method(req.device)
    interval, interleave_note = None, ""
    if reference_latency > 0 and req.timing.interleave:
        # After the official claim passed its check: a forged timer is REWARD_HACK before it
        # can spend the deadline on the blocks.
        judge.phase = "interleaved timing"
        with times.phase("interleaved timing"), judge.facts.stage("interleaved_timing"):
            interval, interleave_note = time_interleaved(
                judge, worker, inputs, clock, functools.partial(_check_probes, judge, tally=tally)
            )
        if interval is not None:
            _check_plausible(interval.solution_ms, observed_s, transfer_s)
    logger.info("workload %s took %s", workload.uuid, times.summary())
    latency = timed.latency_ms
    performance = Performance(
        latency_ms=latency,
        reference_latency_ms=reference_latency,
        speedup_factor=reference_latency / latency if latency > 0 else 0.0,
        timing_method=clock,
        **_interval_fields(interval),
    )
    sharing = worker.sharing_note or judge.sharing_note
    notes = "\n".join(n for n in (timed.timing_note, notes, interleave_note, sharing) if n)
    return Outcome(
        EvalStatus.PASSED, notes, correctness=tally.worst.result(), performance=performance
    )


def _check_plausible(claimed_ms: float, observed_s: float, transfer_s: float) -> None:
    """REWARD_HACK (Stop) when a claimed median cannot be true (`implausible_latency`)."""
    forged = implausible_latency(claimed_ms, observed_s, transfer_s)
    if forged is not None:
        raise stop(EvalStatus.REWARD_HACK, forged)


def _interval_fields(interval: SpeedupInterval | None) -> dict[str, float | str]:
    """The Performance fields of the interleaved stage (none when it did not run)."""
    if interval is None:
        return {}
    return {
        "interleaved_latency_ms": interval.solution_ms,
        "interleaved_reference_latency_ms": interval.reference_ms,
        "interleaved_speedup": interval.estimate,
        "speedup_ci_low": interval.low,
        "speedup_ci_high": interval.high,
        "speedup_ci_method": interval.method,
    }


def _probe(
    judge: Judge, worker: WorkerClient, index: int, workload: Workload, tally: Tally
) -> None:
    """One more verified call on fresh inputs from a forked RNG (the request's stream stays)."""
    req = judge.request
    devices = [torch.cuda.current_device()] if req.device == "cuda" else []
    python_state = random.getstate()
    with torch.random.fork_rng(devices=devices):
        seed = req.seed + _PROBE_SEED_STEP * (index + 1)
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            with judge.times.phase("inputs"):
                inputs = generate(judge, workload)
            with judge.facts.stage("correctness"):
                _verified_call(judge, worker, index, workload, inputs, tally)
        finally:
            random.setstate(python_state)


def _check_probes(judge: Judge, reply: WorkerReply, tally: Tally) -> None:
    """REWARD_HACK (Stop) when the reply shows patched functions or injected threads."""
    if reply.tampered:
        log = f"{judge.phase}: monkey-patched: {', '.join(reply.tampered)}"
        raise stop(EvalStatus.REWARD_HACK, log)
    if tally.base_threads is not None:
        injected = thread_injection(reply.threads_started, reply.threads_alive, *tally.base_threads)
        if injected is not None:
            raise stop(EvalStatus.REWARD_HACK, f"{judge.phase}: {injected}")


def _verified_call(
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
    _check_probes(judge, reply, tally)
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
        return _ensure_worker(judge).run(index, inputs, max_blob)
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
