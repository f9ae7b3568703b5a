"""The judge's own work on the reference side: inputs, reference outputs and the reference's time.

Place in the flow: `evaluate.py` calls these per round and per workload; none of them runs
candidate code. A failure that is the problem's size against the sandbox's memory is reported
as an infrastructure limit (INVALID_REFERENCE naming the limit), never as the candidate's fault.
"""

import time
from typing import Any

import torch

from kernelarc.runner.correctness import collect_outputs
from kernelarc.runner.cpp_build import DEFAULT_BUILD_TIMEOUT_S
from kernelarc.runner.hack_checks import same_bits
from kernelarc.runner.inputs import Value, generate_inputs
from kernelarc.runner.judge_state import Judge, stop
from kernelarc.runner.memory_limit import allocation_failure, judge_out_of_memory
from kernelarc.runner.memory_pool import ShiftingInputPool
from kernelarc.runner.outcome import exception_log
from kernelarc.runner.resident_cache import ReferenceRun, chain
from kernelarc.runner.timing import measure_latency
from kernelarc.schema import EvalRequest, EvalStatus, Workload
from kernelarc.schema.solution import CPP_LANGUAGES


def import_allowance_s(request: EvalRequest) -> float:
    """Extra deadline of the workload that starts a worker: a C++ solution builds at import."""
    cpp = any(lang in CPP_LANGUAGES for lang in request.solution.spec.languages)
    return DEFAULT_BUILD_TIMEOUT_S if cpp else 0.0


def generate(judge: Judge, workload: Workload) -> list[Value]:
    """One round's inputs for `workload` on the request's RNG stream (from a resident judge's
    cache when that stream position was drawn before: `resident_cache.py`)."""
    req = judge.request
    key = None if judge.draw_key is None else chain(judge.draw_key, workload)
    judge.draw_key, judge.last_draw = None, None  # unknown until this draw succeeds
    try:
        with judge.facts.stage("inputs"):
            inputs = None
            if judge.cache is not None and key is not None:
                inputs = judge.cache.inputs_of(key)
            if inputs is None:
                inputs = generate_inputs(
                    req.definition, workload, req.device, req.problem_dir, judge.custom
                )
                if judge.cache is not None and key is not None:
                    judge.cache.keep_inputs(key, inputs)
    except Exception:
        log = exception_log("input generation failed")
        if allocation_failure(log):  # the problem against the sandbox, not the candidate
            log = judge_out_of_memory(req, "generating the inputs", log)
            raise stop(EvalStatus.INVALID_REFERENCE, log) from None
        raise stop(EvalStatus.RUNTIME_ERROR, log) from None
    if key is not None:
        judge.draw_key, judge.last_draw = key, (key, inputs)
    return inputs


def run_reference(judge: Judge, inputs: list[Value]) -> tuple[list[torch.Tensor], set[str]]:
    """Reference outputs on copies of the inputs, and the inputs the reference changes (a
    resident judge's cached run when these inputs are its last draw's, `resident_cache.py`)."""
    req = judge.request
    key = judge.last_draw[0] if judge.last_draw and judge.last_draw[1] is inputs else None
    if judge.cache is not None and key is not None:
        cached = judge.cache.reference_run(key)
        if cached is not None:
            if judge.clock is not None:
                judge.clock.reference_ran(cached.seconds)
            return cached.outputs, cached.changed
    try:
        args: list[Any] = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        started = time.perf_counter()
        outputs = collect_outputs(judge.reference(*args), req.definition, req.device)
        if req.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        if judge.clock is not None:
            judge.clock.reference_ran(seconds)
        names = list(req.definition.inputs)
        changed = {n for n, a, b in zip(names, inputs, args, strict=True) if not same_bits(a, b)}
    except Exception:
        log = exception_log("reference run failed")
        if allocation_failure(log):
            log = judge_out_of_memory(req, "running the reference", log)
        raise stop(EvalStatus.INVALID_REFERENCE, log) from None
    if judge.cache is not None and key is not None:
        judge.cache.keep_reference_run(key, ReferenceRun(outputs, changed, seconds))
    return outputs, changed


def time_reference(judge: Judge, workload: Workload, inputs: list[Value]) -> tuple[float, str]:
    """The reference's median latency on the last round's inputs (0 when it cannot be timed);
    a resident judge reports the median of its recent measurements and measures again on its
    schedule (`resident_cache.py`)."""
    req = judge.request
    if not req.timing.time_reference:
        return 0.0, ""
    key = None
    if judge.cache is not None:
        key = judge.cache.timing_key(workload, req.timing)
        cached = judge.cache.latency(key)
        if cached is not None:
            return cached
    try:
        pool = ShiftingInputPool(inputs, [], req.timing.warmup + req.timing.iterations)
        measured = measure_latency(
            judge.reference,
            pool.next_args,
            device=req.device,
            warmup=req.timing.warmup,
            iterations=req.timing.iterations,
            flush_l2=req.timing.flush_l2,
            budget_s=req.timing.budget_s,
        )
    except Exception:
        # As upstream: a reference that cannot be timed gives latency 0, not a failure.
        return 0.0, exception_log("timing the reference failed; reference_latency_ms = 0")
    if judge.cache is not None and key is not None and measured.median_ms > 0:
        return judge.cache.record_latency(key, measured.median_ms)
    return measured.median_ms, ""
