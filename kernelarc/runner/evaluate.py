"""The evaluation flow inside the sandbox: stage, then per workload correctness rounds and timing.

`evaluate_request` yields one Trace per workload in request order so the entry point can write
partial results as it goes (a later crash or timeout then still leaves the earlier traces).
"""

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelarc.runner.correctness import (
    OutputFormatError,
    WorstErrors,
    collect_outputs,
    compare,
    find_lazy_output,
    type_mismatch,
)
from kernelarc.runner.environment import describe_environment
from kernelarc.runner.inputs import (
    CustomFn,
    Value,
    allocate_outputs,
    generate_inputs,
    seed_everything,
)
from kernelarc.runner.outcome import Outcome, exception_log, make_trace
from kernelarc.runner.staging import load_entry, load_reference, write_sources
from kernelarc.runner.timing import median_latency_ms, timing_method
from kernelarc.schema import EvalRequest, EvalStatus, Performance, Trace, Workload

logger = logging.getLogger(__name__)

Fn = Callable[..., Any]


@dataclass(frozen=True)
class Staged:
    """The imported reference and candidate of a request."""

    request: EvalRequest
    reference: Fn
    custom: CustomFn | None
    entry: Fn


class _Stop(Exception):
    """Ends a workload early with an outcome."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.status)
        self.outcome = outcome


def evaluate_request(request: EvalRequest, root: Path) -> Iterator[Trace]:
    """Evaluate every workload of the request, one trace each, in order."""
    environment = describe_environment(request.device)
    staged_or_failure = _stage(request, root)
    if isinstance(staged_or_failure, Outcome):
        for workload in request.workloads:
            yield make_trace(request, workload, environment, staged_or_failure)
        return
    seed_everything(request.seed)
    for workload in request.workloads:
        logger.info("workload %s", workload.uuid)
        try:
            outcome = _evaluate_workload(staged_or_failure, workload)
        except _Stop as stop:
            outcome = stop.outcome
        yield make_trace(request, workload, environment, outcome)


def _stage(request: EvalRequest, root: Path) -> Staged | Outcome:
    try:
        module: ModuleType = load_reference(request.definition, root)
        reference: Fn = module.run
        entry_name = request.definition.custom_inputs_entrypoint
        custom: CustomFn | None = getattr(module, entry_name) if entry_name else None
    except Exception:
        return Outcome(EvalStatus.INVALID_REFERENCE, exception_log("reference failed to load"))
    try:
        src = write_sources(request.solution, root)
        entry = load_entry(request.solution, src)
    except Exception:
        return Outcome(EvalStatus.RUNTIME_ERROR, exception_log("solution failed to import"))
    return Staged(request=request, reference=reference, custom=custom, entry=entry)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _clone(values: list[Value]) -> list[Value]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _run_reference(staged: Staged, inputs: list[Value]) -> list[torch.Tensor]:
    req = staged.request
    try:
        outputs = collect_outputs(staged.reference(*_clone(inputs)), req.definition, req.device)
        _sync(req.device)
    except Exception:
        raise _Stop(
            Outcome(EvalStatus.INVALID_REFERENCE, exception_log("reference run failed"))
        ) from None
    return outputs


def _run_candidate(staged: Staged, workload: Workload, inputs: list[Value]) -> list[Any]:
    req = staged.request
    try:
        if req.solution.spec.destination_passing_style:
            outputs: list[Any] = allocate_outputs(req.definition, workload, req.device)
            staged.entry(*inputs, *outputs)
        else:
            outputs = collect_outputs(staged.entry(*inputs), req.definition, req.device)
        _sync(req.device)
    except OutputFormatError as exc:
        raise _Stop(Outcome(EvalStatus.RUNTIME_ERROR, f"solution output: {exc}")) from None
    except Exception:
        raise _Stop(Outcome(EvalStatus.RUNTIME_ERROR, exception_log("solution failed"))) from None
    return outputs


def _check_round(
    staged: Staged,
    workload: Workload,
    outputs: list[Any],
    refs: list[torch.Tensor],
    worst: WorstErrors,
    round_index: int,
) -> None:
    names = list(staged.request.definition.outputs)
    lazy = find_lazy_output(outputs, names)
    if lazy is not None:
        raise _Stop(Outcome(EvalStatus.REWARD_HACK, f"lazy or subclass output: {lazy}"))
    for name, out, ref in zip(names, outputs, refs, strict=True):
        mismatch = type_mismatch(out, ref, name)
        if mismatch is not None:
            kind, message = mismatch
            status = EvalStatus.INCORRECT_SHAPE if kind == "shape" else EvalStatus.INCORRECT_DTYPE
            raise _Stop(Outcome(status, message))
    for name, out, ref in zip(names, outputs, refs, strict=True):
        check = compare(out, ref, workload.tolerance, name)
        worst.add(check)
        if not check.ok:
            log = f"round {round_index}: {check.reason}"
            raise _Stop(Outcome(EvalStatus.INCORRECT_NUMERICAL, log, correctness=worst.result()))


def _evaluate_workload(staged: Staged, workload: Workload) -> Outcome:
    req = staged.request
    worst = WorstErrors()
    inputs: list[Value] = []
    for round_index in range(req.correctness_rounds):
        try:
            inputs = generate_inputs(
                req.definition, workload, req.device, req.problem_dir, staged.custom
            )
        except Exception:
            return Outcome(EvalStatus.RUNTIME_ERROR, exception_log("input generation failed"))
        refs = _run_reference(staged, inputs)
        outputs = _run_candidate(staged, workload, inputs)
        _check_round(staged, workload, outputs, refs, worst, round_index)
    try:
        performance, notes = _measure(staged, workload, inputs)
    except Exception:
        return Outcome(EvalStatus.RUNTIME_ERROR, exception_log("timing the solution failed"))
    return Outcome(EvalStatus.PASSED, notes, correctness=worst.result(), performance=performance)


def _measure(staged: Staged, workload: Workload, inputs: list[Value]) -> tuple[Performance, str]:
    """Time the candidate, then the reference, on the last round's inputs."""
    req = staged.request
    dps = req.solution.spec.destination_passing_style

    def candidate_args() -> list[Any]:
        args: list[Any] = _clone(inputs)
        if dps:
            args.extend(allocate_outputs(req.definition, workload, req.device))
        return args

    timing = req.timing
    latency = median_latency_ms(
        staged.entry,
        candidate_args,
        device=req.device,
        warmup=timing.warmup,
        iterations=timing.iterations,
        flush_l2=timing.flush_l2,
    )
    reference_latency, notes = 0.0, ""
    if timing.time_reference:
        try:
            reference_latency = median_latency_ms(
                staged.reference,
                lambda: _clone(inputs),
                device=req.device,
                warmup=timing.warmup,
                iterations=timing.iterations,
                flush_l2=timing.flush_l2,
            )
        except Exception:
            # As upstream: a reference that cannot be timed gives latency 0, not a failure.
            notes = exception_log("timing the reference failed; reference_latency_ms = 0")
    speedup = reference_latency / latency if latency > 0 else 0.0
    performance = Performance(
        latency_ms=latency,
        reference_latency_ms=reference_latency,
        speedup_factor=speedup,
        timing_method=timing_method(req.device),
    )
    return performance, notes
