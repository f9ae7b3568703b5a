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
Each round's call and those checks are `verified_call.py`'s; this module is the workload's flow.
What the numbers and statuses mean to a user (hang deadlines, memory limits, interleaved
timing, the thread checks): docs/runner.md.
"""

import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kernelarc.runner.build_step import build_before_workloads
from kernelarc.runner.environment import describe_environment
from kernelarc.runner.hack_checks import implausible_latency
from kernelarc.runner.hang_deadline import WorkloadClock
from kernelarc.runner.inputs import CustomFn, Value
from kernelarc.runner.interleaved import SpeedupInterval
from kernelarc.runner.interleaved_session import time_interleaved
from kernelarc.runner.jit_warmup import warm_jit_caches
from kernelarc.runner.judge_state import Fn, Judge, Stop, Tally, stop
from kernelarc.runner.memory_limit import worker_killed_note
from kernelarc.runner.outcome import Outcome, exception_log, make_trace
from kernelarc.runner.phase_times import PhaseTimes
from kernelarc.runner.reference_side import generate, import_allowance_s, time_reference
from kernelarc.runner.resident_cache import ProblemCache
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.sched_state import SchedWatch
from kernelarc.runner.staging import load_reference
from kernelarc.runner.stream_order import StreamCursor, evaluation_order
from kernelarc.runner.timing import timing_method
from kernelarc.runner.verified_call import check_probes, ensure_worker, probe, verified_call
from kernelarc.runner.worker import worker_main
from kernelarc.runner.worker_client import WorkerClient, WorkerDied, WorkerTimedOut
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest, EvalStatus, Performance, Trace, Workload

logger = logging.getLogger(__name__)

_TIMING_METHODS = frozenset({"cupti", "cuda_events", "cpu_monotonic"})


def start_zygote(device: str, root: Path) -> Zygote:
    """Fork the worker zygote; call before touching CUDA, the reference or any secret. Its
    workers write their candidate under `root/src` and, on `cuda`, make their CUDA context
    before they know it."""
    return Zygote(functools.partial(worker_main, device=device, root=root))


def prestart_worker(zygote: Zygote) -> WorkerClient | None:
    """A worker forked now for the next candidate (None when the fork fails: the candidate's
    own start will say why)."""
    try:
        return WorkerClient(zygote)
    except WorkerDied as exc:
        logger.warning("cannot pre-start a worker: %s", exc)
        return None


def evaluate_request(
    request: EvalRequest,
    root: Path,
    zygote: Zygote,
    facts: RunFacts | None = None,
    *,
    cache: ProblemCache | None = None,
    prestarted: WorkerClient | None = None,
    sched: SchedWatch | None = None,
) -> Iterator[tuple[int, Trace]]:
    """Evaluate the request's workloads in `workload_order`: (request index, trace) each.

    `cache`: a resident judge's inputs, reference outputs and latencies of this problem;
    `prestarted`: a worker forked ahead for the candidate (else, on CUDA, one is forked at once,
    so that its CUDA context is made while the judge loads the reference);
    `sched`: the judge's processes and their scheduling before any candidate ran (else read
    now, before this request's candidate runs: the judge and the zygote)."""
    facts = facts if facts is not None else RunFacts()
    sched = sched or SchedWatch.of_judge(zygote.pid)
    if prestarted is None and request.device == "cuda":
        prestarted = prestart_worker(zygote)
    environment = describe_environment(request.device)
    try:
        reference, custom = _reference_of(request, root, cache)
    except Exception:
        if prestarted is not None:
            prestarted.stop()
        failed = Outcome(EvalStatus.INVALID_REFERENCE, exception_log("reference failed to load"))
        for index, workload in enumerate(request.workloads):
            yield index, make_trace(request, workload, environment, failed)
        return
    judge = Judge(request=request, reference=reference, custom=custom, zygote=zygote, facts=facts)
    judge.cache, judge.prestarted, judge.sched = cache, prestarted, sched
    if cache is not None:
        cache.begin_request()
    judge.clock = WorkloadClock.for_request(request, import_allowance_s(request))
    with facts.stage("build"):
        facts.build, judge.fatal = build_before_workloads(request, root)
    if judge.fatal is None:
        with facts.stage("jit_warm_up"):
            warm_jit_caches(request, root, zygote, custom, facts, judge.clock.wall_deadline())
    cursor = StreamCursor(request, functools.partial(generate, judge), judge.reseeded)
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
        if judge.prestarted is not None:
            judge.prestarted.stop()
            judge.prestarted = None
        if cache is not None:
            facts.cache = dict(cache.counts.counts)


def _reference_of(
    request: EvalRequest, root: Path, cache: ProblemCache | None
) -> tuple[Fn, CustomFn | None]:
    """The reference's `run` and custom-inputs function: loaded once per problem by a resident
    judge, else loaded now (errors propagate: INVALID_REFERENCE)."""
    if cache is not None and cache.reference is not None:
        return cache.reference, cache.custom
    module: ModuleType = load_reference(request.definition, root)
    entry_name = request.definition.custom_inputs_entrypoint
    custom: CustomFn | None = getattr(module, entry_name) if entry_name else None
    if cache is not None:
        cache.reference, cache.custom = module.run, custom
    return module.run, custom


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


def _evaluate_workload(judge: Judge, index: int, workload: Workload) -> Outcome:
    req = judge.request
    assert judge.clock is not None
    judge.clock.begin_workload()
    judge.oom.reset()
    times = judge.times = PhaseTimes()
    with times.phase("worker start"):
        worker = ensure_worker(judge)
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
            run = verified_call(judge, worker, index, workload, inputs, tally)
        worker = ensure_worker(judge)  # a fresh one when IPC failed its first call
        reply = run.reply
        if tally.base_threads is None:
            tally.base_threads = (reply.threads_started, reply.threads_alive)
    judge.phase = "timing"
    with times.phase("candidate timing"), judge.facts.stage("timing"):
        timed = worker.time(req.timing)
    check_probes(judge, timed, tally)
    if timed.error:
        raise stop(EvalStatus.RUNTIME_ERROR, timed.error)
    with times.phase("reference timing"), judge.facts.stage("reference_timing"):
        reference_latency, notes = time_reference(judge, workload, inputs)
    judge.phase = "timing probe"
    probe(judge, worker, index, workload, tally)
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
                judge, worker, inputs, clock, functools.partial(check_probes, judge, tally=tally)
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
    if judge.sched is not None and (changed := judge.sched.changes()) is not None:
        # Checked once the candidate's calls of this workload are done (none runs after).
        raise stop(EvalStatus.REWARD_HACK, changed)
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
