"""The guard's own measurements: interleaved re-timing of a challenger against the incumbent, and
the confirmation run of a would-be new best on fresh inputs.

Place in the flow: the campaign loop calls `run_challenge` (holding the guard lock, so the
incumbent cannot change meanwhile) for a passing candidate that beats the incumbent's speedup.
Every evaluation is a fresh sandbox run through the `evaluate` callable the loop provides (it
takes an evaluation slot, so timed runs never share a GPU). Extra evaluations do not count
against the candidate budget; they are counted in `GuardRecord.extra_evaluations`. The outcome is
decided afterwards by `verdict.judge_attempt` from the recorded samples alone.

An evaluation whose sandbox failed (SandboxError: the runner could not be started or could not
set itself up, before any candidate code ran) is retried up to `settings.infra_retries` times
(`evaluate_retrying`, also used for a candidate's own evaluation); one that still fails is
recorded as INFRA_ERROR, which the verdict never counts as the candidate's defeat. Whatever
the runner returned once the candidate ran (a crash, a kill, a timeout, wrong outputs) is the
candidate's result and is not retried (docs/guard.md, "Infrastructure failures").
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kernelarc.errors import SandboxError
from kernelarc.guard.bootstrap import decide_samples
from kernelarc.guard.score import first_failure_log, score_traces
from kernelarc.schema import Attempt, EvalRequest, EvalResult, Proposal
from kernelarc.schema.guard_record import (
    BootstrapDecision,
    Confirmation,
    GuardRecord,
    RetimingSample,
)

logger = logging.getLogger(__name__)

Evaluate = Callable[[EvalRequest], EvalResult]
"""Runs one request in a fresh sandbox; raises SandboxError when the sandbox itself fails."""

Role = Literal["challenger", "incumbent"]
#: Seconds before the n-th retry: n times this (a start that failed may succeed a moment later).
RETRY_PAUSE_S = 0.5


@dataclass(frozen=True)
class Retried:
    """An evaluation after its infrastructure retries."""

    result: EvalResult | None
    """The result, or None when every try failed in the sandbox."""
    retries: int
    """Tries that failed in the sandbox and were retried."""
    error: str
    """The last sandbox failure ('' when none)."""


def evaluate_retrying(evaluate: Evaluate, request: EvalRequest, retries: int) -> Retried:
    """Run `evaluate`, again up to `retries` times while it raises SandboxError."""
    error = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(RETRY_PAUSE_S * attempt)
        try:
            return Retried(evaluate(request), attempt, error)
        except SandboxError as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "sandbox failure (try %d of %d) evaluating %s: %s",
                attempt + 1,
                retries + 1,
                request.solution.name,
                exc,
            )
    return Retried(None, retries, error)


@dataclass(frozen=True)
class Challenge:
    """One candidate to re-time and confirm."""

    proposal: Proposal
    """The challenger."""
    incumbent: Attempt | None
    """The incumbent it must beat (None: the first passing candidate, confirmation only)."""
    request: EvalRequest
    """The request the candidate was evaluated with (definition, workloads, seed, timing)."""
    confirm_seed: int
    """Input seed of the confirmation run."""


def retiming_request(base: EvalRequest, proposal: Proposal) -> EvalRequest:
    """Same inputs and timing protocol, one correctness round, no reference timing (the ratio
    compares the two candidates' latencies only)."""
    return base.model_copy(
        update={
            "solution": proposal.solution,
            "correctness_rounds": 1,
            "timing": base.timing.model_copy(update={"time_reference": False}),
        }
    )


def confirmation_request(base: EvalRequest, seed: int) -> EvalRequest:
    """The full evaluation again on inputs from a different seed."""
    return base.model_copy(update={"seed": seed})


def run_challenge(challenge: Challenge, record: GuardRecord, evaluate: Evaluate) -> GuardRecord:
    """Re-time (when there is an incumbent) and confirm (when accepted and `confirm` is on).

    Returns the record with samples, decision, confirmation and extra_evaluations (every
    sandbox run, retried ones included) filled in.
    """
    settings = record.settings
    samples: list[RetimingSample] = []
    runs = 0
    if challenge.incumbent is not None:
        samples, decision = _retime(challenge, record, evaluate)
        runs = sum(1 + s.retries for s in samples)
        record = record.model_copy(
            update={"samples": samples, "decision": decision, "extra_evaluations": runs}
        )
        logger.info(
            "guard: %s vs incumbent %s after %d rounds: %s ratio %s CI [%s, %s]",
            challenge.proposal.id,
            challenge.incumbent.proposal.id,
            decision.rounds,
            decision.outcome,
            decision.ratio,
            decision.ci_low,
            decision.ci_high,
        )
        if decision.outcome != "accept":
            return record
    if not settings.confirm:
        return record
    confirmation = _confirm(challenge, evaluate, settings.infra_retries or 0)
    logger.info(
        "guard: confirmation of %s on seed %d: %s",
        challenge.proposal.id,
        confirmation.seed,
        confirmation.status,
    )
    return record.model_copy(
        update={"confirmation": confirmation, "extra_evaluations": runs + 1 + confirmation.retries}
    )


def _retime(
    challenge: Challenge, record: GuardRecord, evaluate: Evaluate
) -> tuple[list[RetimingSample], BootstrapDecision]:
    settings = record.settings
    assert challenge.incumbent is not None  # checked by the caller
    sides: tuple[tuple[Role, Proposal], ...] = (
        ("challenger", challenge.proposal),
        ("incumbent", challenge.incumbent.proposal),
    )
    samples: list[RetimingSample] = []
    decision = decide_samples(samples, settings)
    for round_index in range(settings.max_repeats):
        # ABBA order: a slow drift of the machine weighs on both sides equally.
        order = sides if round_index % 2 == 0 else sides[::-1]
        for role, proposal in order:
            sample = _sample(
                challenge.request,
                proposal,
                role,
                round_index,
                evaluate,
                settings.infra_retries or 0,
            )
            samples.append(sample)
        decision = decide_samples(samples, settings)
        if decision.outcome != "undecided" or any(x.status != "PASSED" for x in samples):
            break
    return samples, decision


def _sample(
    base: EvalRequest,
    proposal: Proposal,
    role: Role,
    round_index: int,
    evaluate: Evaluate,
    retries: int,
) -> RetimingSample:
    t0 = time.monotonic()
    done = evaluate_retrying(evaluate, retiming_request(base, proposal), retries)
    if done.result is None:
        logger.warning("guard: re-timing %s failed in the sandbox: %s", proposal.id, done.error)
        status, latencies = "INFRA_ERROR", []
    else:
        score = score_traces(done.result.traces)
        status, latencies = str(score.status), list(score.latencies_ms)
    return RetimingSample(
        round=round_index,
        role=role,
        proposal_id=proposal.id,
        status=status,
        latencies_ms=latencies,
        wall_s=round(time.monotonic() - t0, 3),
        retries=done.retries,
        log=done.error[:2000],
    )


def _confirm(challenge: Challenge, evaluate: Evaluate, retries: int) -> Confirmation:
    t0 = time.monotonic()
    request = confirmation_request(challenge.request, challenge.confirm_seed)
    done = evaluate_retrying(evaluate, request, retries)
    if done.result is None:
        return Confirmation(
            seed=challenge.confirm_seed,
            status="INFRA_ERROR",
            wall_s=round(time.monotonic() - t0, 3),
            log=done.error[:2000],
            retries=done.retries,
        )
    score = score_traces(done.result.traces)
    return Confirmation(
        seed=challenge.confirm_seed,
        status=str(score.status),
        latencies_ms=list(score.latencies_ms),
        speedup=score.speedup,
        wall_s=round(time.monotonic() - t0, 3),
        log=first_failure_log(done.result.traces)[:2000],
        retries=done.retries,
    )
