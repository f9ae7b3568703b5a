"""Verdicts as pure functions of recorded measurements.

Place in the flow: the campaign loop calls `judge_attempt` once the guard's measurements for an
attempt are complete; `replay.py` calls it again on every line of attempts.jsonl and must reach
the same verdict. Nothing here measures, reads a clock or draws an unseeded random number.

Order of the rules (first match decides):
1. a blocking static finding (and `block_static`)     -> REJECTED_STATIC, FAILED
2. the evaluation did not pass                        -> its status, FAILED (INFRA_ERROR stays)
3. guard off: faster than the incumbent               -> NEW_BEST, else CORRECT (naive)
4. any latency below the roofline bound * (1 - slack) -> REJECTED_GUARD, FAILED
5. not faster than the incumbent                      -> CORRECT
6. the challenger fails a re-timing evaluation       -> REJECTED_GUARD, FAILED
7. a re-timing evaluation failed in the sandbox       -> INFRA_ERROR (status PASSED)
8. incumbent exists and re-timing does not accept     -> CHALLENGER (status PASSED)
9. the confirmation failed in the sandbox             -> INFRA_ERROR (status PASSED)
10. confirmation on fresh inputs missing or failed    -> REJECTED_GUARD, FAILED
11. otherwise                                         -> NEW_BEST (confirmed when confirm is on)

"Failed in the sandbox" is status INFRA_ERROR after `settings.infra_retries` retries: the
runner could not be started or set up, before any candidate code ran (docs/guard.md). Rules 7
and 9 apply to records with `infra_retries` set; older records (None) keep the rules they were
judged by: an infrastructure failure in re-timing left the challenger undecided (rule 8) and a
failed confirmation rejected it whatever the cause (rule 10).
"""

from dataclasses import dataclass
from typing import Literal

from kernelarc.guard.bootstrap import decide_samples
from kernelarc.guard.roofline import below_speed_of_light
from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.schema.guard_record import GuardRecord, RooflineBound

AttemptStatus = EvalStatus | Literal["INFRA_ERROR", "REJECTED_STATIC", "REJECTED_GUARD"]
"""Every status an Attempt can carry."""


@dataclass(frozen=True)
class Judgement:
    """The acceptance decision for one attempt."""

    verdict: Verdict
    """FAILED, CORRECT, CHALLENGER, NEW_BEST (or INFRA_ERROR)."""
    status: AttemptStatus
    """The attempt's status (the evaluation's, or the guard's REJECTED_*)."""
    confirmed: bool
    """NEW_BEST accepted by the guard (re-timed if there was an incumbent, and confirmed)."""
    reason: str
    """One line."""


#: Verdicts whose measurement stands: the incumbent's (re-timed and confirmed with the guard on)
#: and a passing attempt's that was not faster (never challenged, so never contradicted).
_STANDING = frozenset({Verdict.NEW_BEST, Verdict.CORRECT})


def measurement_accepted(attempt: Attempt) -> bool:
    """Whether the attempt's speedup and latency may be cited as results: PASSED with verdict
    NEW_BEST (confirmed, when the guard recorded that it confirms) or CORRECT. A CHALLENGER's
    single measurement was not reproduced by the guard's re-timing, and REJECTED_* attempts
    were rejected: their numbers must not reach conclusions, per-agent bests, credit or the
    best-so-far (issue 17: a rejected compile candidate's "+16251%" was published)."""
    if attempt.status != EvalStatus.PASSED or attempt.verdict not in _STANDING:
        return False
    guard = attempt.guard
    confirms = guard is not None and guard.settings.enabled and guard.settings.confirm
    return not (attempt.verdict == Verdict.NEW_BEST and confirms and not attempt.confirmed)


def is_challenger(speedup: float | None, incumbent_speedup: float | None) -> bool:
    """A passing candidate with a higher single-measurement speedup than the incumbent's."""
    if speedup is None:
        return False
    return incumbent_speedup is None or speedup > incumbent_speedup


def roofline_violation(
    latencies: list[tuple[str, list[float]]], bounds: list[RooflineBound], slack: float
) -> str:
    """The first (source, workload) latency below speed of light, as a message; '' if none."""
    for source, values in latencies:
        for value, bound in zip(values, bounds, strict=False):
            if below_speed_of_light(value, bound, slack):
                return (
                    f"faster than the speed of light: {source} latency {value:.6g} ms on "
                    f"{bound.workload} < roofline bound {bound.bound_ms:.6g} ms x (1 - {slack})"
                )
    return ""


def roofline_message(latencies_ms: tuple[float, ...], record: GuardRecord) -> str:
    """Why the attempt's measured latencies (evaluation, re-timing, confirmation) beat the
    roofline bound; '' when none does or the check is off."""
    slack = record.settings.roofline_slack
    if slack is None or not record.roofline:
        return ""
    return roofline_violation(_measured_latencies(latencies_ms, record), record.roofline, slack)


def _measured_latencies(
    latencies_ms: tuple[float, ...], record: GuardRecord
) -> list[tuple[str, list[float]]]:
    found = [("evaluation", list(latencies_ms))]
    for sample in record.samples:
        if sample.role == "challenger" and sample.latencies_ms:
            found.append((f"re-timing round {sample.round}", sample.latencies_ms))
    if record.confirmation is not None and record.confirmation.latencies_ms:
        found.append(("confirmation", record.confirmation.latencies_ms))
    return found


def judge_attempt(
    eval_status: EvalStatus | Literal["INFRA_ERROR"],
    speedup: float | None,
    latencies_ms: tuple[float, ...],
    record: GuardRecord,
    incumbent_speedup: float | None,
) -> Judgement:
    """Decide an attempt from its evaluation score, the guard's record and the incumbent's
    speedup at the time (None when there was none). See the module docstring for the order."""
    settings = record.settings
    blocked = [f for f in record.findings if f.severity == "block"]
    if blocked and settings.block_static:
        rules = ", ".join(sorted({f.rule for f in blocked}))
        return Judgement(Verdict.FAILED, "REJECTED_STATIC", False, f"static rules {rules}")
    if eval_status == "INFRA_ERROR":
        return Judgement(Verdict.INFRA_ERROR, "INFRA_ERROR", False, "infrastructure error")
    if eval_status != EvalStatus.PASSED or speedup is None:
        return Judgement(Verdict.FAILED, eval_status, False, f"evaluation {eval_status}")
    challenger = is_challenger(speedup, incumbent_speedup)
    if not settings.enabled:
        verdict = Verdict.NEW_BEST if challenger else Verdict.CORRECT
        return Judgement(verdict, EvalStatus.PASSED, False, "naive acceptance (guard off)")
    return _judge_guarded(latencies_ms, record, incumbent_speedup, challenger=challenger)


def _judge_guarded(
    latencies_ms: tuple[float, ...],
    record: GuardRecord,
    incumbent_speedup: float | None,
    *,
    challenger: bool,
) -> Judgement:
    """Rules 4-9 for a passing attempt with the guard on."""
    settings = record.settings
    violation = roofline_message(latencies_ms, record)
    if violation:
        return Judgement(Verdict.FAILED, "REJECTED_GUARD", False, violation)
    if not challenger:
        return Judgement(Verdict.CORRECT, EvalStatus.PASSED, False, "not faster than incumbent")
    flaky = [
        s
        for s in record.samples
        if s.role == "challenger" and s.status not in (EvalStatus.PASSED, "INFRA_ERROR")
    ]
    if flaky:
        reason = f"challenger ended {flaky[0].status} in re-timing round {flaky[0].round}"
        return Judgement(Verdict.FAILED, "REJECTED_GUARD", False, reason)
    infra = sandbox_failure(record)
    if infra:
        return Judgement(Verdict.INFRA_ERROR, EvalStatus.PASSED, False, infra)
    if incumbent_speedup is not None:
        decision = decide_samples(record.samples, settings)
        if decision.outcome != "accept":
            reason = f"re-timing {decision.outcome}: {_describe(decision.ratio, decision.ci_low)}"
            if decision.ci_high is not None:
                reason += f"..{decision.ci_high:.4f}"
            if decision.reason:
                reason += f" ({decision.reason})"
            return Judgement(Verdict.CHALLENGER, EvalStatus.PASSED, False, reason)
    unconfirmed = _unconfirmed(record)
    if unconfirmed:
        return Judgement(Verdict.FAILED, "REJECTED_GUARD", False, unconfirmed)
    reason = "accepted" + (" and confirmed" if settings.confirm else "")
    return Judgement(Verdict.NEW_BEST, EvalStatus.PASSED, settings.confirm, reason)


def _unconfirmed(record: GuardRecord) -> str:
    """Rule 10: why a confirmation (when `confirm` is on) is missing or failed, or ''."""
    if not record.settings.confirm:
        return ""
    confirmation = record.confirmation
    if confirmation is None:
        return "not confirmed"
    if confirmation.status == EvalStatus.PASSED:
        return ""
    reason = f"confirmation on seed {confirmation.seed} ended {confirmation.status}"
    return reason + (f": {confirmation.log[:300]}" if confirmation.log else "")


def sandbox_failure(record: GuardRecord) -> str:
    """Why the guard's measurements of a passing challenger could not be completed for an
    infrastructure reason (rules 7 and 9: a re-timing or confirmation evaluation ended
    INFRA_ERROR after its retries), or '' (also for records from before `infra_retries`). A
    confirmation runs only after re-timing accepted, so checking both here keeps the order."""
    if record.settings.infra_retries is None:
        return ""
    broken = next((s for s in record.samples if s.status == "INFRA_ERROR"), None)
    if broken is not None:
        return (
            f"{broken.role} re-timing round {broken.round} failed in the sandbox after "
            f"{broken.retries} retries (not the candidate's fault): {broken.log[:300]}"
        )
    confirmation = record.confirmation
    if confirmation is not None and confirmation.status == "INFRA_ERROR":
        return (
            f"confirmation on seed {confirmation.seed} failed in the sandbox after "
            f"{confirmation.retries} retries (not the candidate's fault): {confirmation.log[:300]}"
        )
    return ""


def _describe(ratio: float | None, low: float | None) -> str:
    if ratio is None:
        return "no ratio"
    text = f"ratio {ratio:.4f}"
    if low is not None:
        text += f" CI {low:.4f}"
    return text
