"""The guard's own measurements: interleaved re-timing of a challenger against the incumbent, and
the confirmation run of a would-be new best on fresh inputs.

Place in the flow: the campaign loop calls `run_challenge` (holding the guard lock, so the
incumbent cannot change meanwhile) for a passing candidate that beats the incumbent's speedup.
Every evaluation is a fresh sandbox run through the `evaluate` callable the loop provides (it
takes an evaluation slot, so timed runs never share a GPU). Extra evaluations do not count
against the candidate budget; they are counted in `GuardRecord.extra_evaluations`. The outcome is
decided afterwards by `verdict.judge_attempt` from the recorded samples alone.
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

    Returns the record with samples, decision, confirmation and extra_evaluations filled in.
    """
    settings = record.settings
    samples: list[RetimingSample] = []
    if challenge.incumbent is not None:
        samples, decision = _retime(challenge, record, evaluate)
        record = record.model_copy(
            update={"samples": samples, "decision": decision, "extra_evaluations": len(samples)}
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
    confirmation = _confirm(challenge, evaluate)
    logger.info(
        "guard: confirmation of %s on seed %d: %s",
        challenge.proposal.id,
        confirmation.seed,
        confirmation.status,
    )
    return record.model_copy(
        update={"confirmation": confirmation, "extra_evaluations": len(samples) + 1}
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
            samples.append(_sample(challenge.request, proposal, role, round_index, evaluate))
        decision = decide_samples(samples, settings)
        if decision.outcome != "undecided" or any(x.status != "PASSED" for x in samples):
            break
    return samples, decision


def _sample(
    base: EvalRequest, proposal: Proposal, role: Role, round_index: int, evaluate: Evaluate
) -> RetimingSample:
    t0 = time.monotonic()
    try:
        result = evaluate(retiming_request(base, proposal))
    except SandboxError as exc:
        logger.warning("guard: re-timing %s failed in the sandbox: %s", proposal.id, exc)
        status, latencies = "INFRA_ERROR", []
    else:
        score = score_traces(result.traces)
        status, latencies = str(score.status), list(score.latencies_ms)
    return RetimingSample(
        round=round_index,
        role=role,
        proposal_id=proposal.id,
        status=status,
        latencies_ms=latencies,
        wall_s=round(time.monotonic() - t0, 3),
    )


def _confirm(challenge: Challenge, evaluate: Evaluate) -> Confirmation:
    t0 = time.monotonic()
    request = confirmation_request(challenge.request, challenge.confirm_seed)
    try:
        result = evaluate(request)
    except SandboxError as exc:
        return Confirmation(
            seed=challenge.confirm_seed,
            status="INFRA_ERROR",
            wall_s=round(time.monotonic() - t0, 3),
            log=f"{type(exc).__name__}: {exc}",
        )
    score = score_traces(result.traces)
    return Confirmation(
        seed=challenge.confirm_seed,
        status=str(score.status),
        latencies_ms=list(score.latencies_ms),
        speedup=score.speedup,
        wall_s=round(time.monotonic() - t0, 3),
        log=first_failure_log(result.traces)[:2000],
    )
