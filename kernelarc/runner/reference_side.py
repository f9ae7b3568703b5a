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
from kernelarc.runner.timing import measure_latency
from kernelarc.schema import EvalRequest, EvalStatus, Workload
from kernelarc.schema.solution import CPP_LANGUAGES


def import_allowance_s(request: EvalRequest) -> float:
    """Extra deadline of the workload that starts a worker: a C++ solution builds at import."""
    cpp = any(lang in CPP_LANGUAGES for lang in request.solution.spec.languages)
    return DEFAULT_BUILD_TIMEOUT_S if cpp else 0.0


def generate(judge: Judge, workload: Workload) -> list[Value]:
    """One round's inputs for `workload` on the request's RNG stream."""
    req = judge.request
    try:
        with judge.facts.stage("inputs"):
            return generate_inputs(
                req.definition, workload, req.device, req.problem_dir, judge.custom
            )
    except Exception:
        log = exception_log("input generation failed")
        if allocation_failure(log):  # the problem against the sandbox, not the candidate
            log = judge_out_of_memory(req, "generating the inputs", log)
            raise stop(EvalStatus.INVALID_REFERENCE, log) from None
        raise stop(EvalStatus.RUNTIME_ERROR, log) from None


def run_reference(judge: Judge, inputs: list[Value]) -> tuple[list[torch.Tensor], set[str]]:
    """Reference outputs on copies of the inputs, and the inputs the reference changes."""
    req = judge.request
    try:
        args: list[Any] = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        started = time.perf_counter()
        outputs = collect_outputs(judge.reference(*args), req.definition, req.device)
        if req.device == "cuda":
            torch.cuda.synchronize()
        if judge.clock is not None:
            judge.clock.reference_ran(time.perf_counter() - started)
    except Exception:
        log = exception_log("reference run failed")
        if allocation_failure(log):
            log = judge_out_of_memory(req, "running the reference", log)
        raise stop(EvalStatus.INVALID_REFERENCE, log) from None
    names = list(req.definition.inputs)
    changed = {n for n, a, b in zip(names, inputs, args, strict=True) if not same_bits(a, b)}
    return outputs, changed


def time_reference(judge: Judge, inputs: list[Value]) -> tuple[float, str]:
    """The reference's median latency on the last round's inputs (0 when it cannot be timed)."""
    req = judge.request
    if not req.timing.time_reference:
        return 0.0, ""
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
    return measured.median_ms, ""
