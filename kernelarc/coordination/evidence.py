"""Evidence rules of the shared memory: what a conclusion may cite, and what later discredits it.

Place in the flow: `ConclusionBoard.publish` checks a draft's evidence against the attempts the
board has observed (`evidence_problems`); `ConclusionBoard.observe` feeds every new attempt to
`rerun_discredits` and `lost_gain`, which read the guard's re-runs of the incumbent recorded on
that attempt. Pure functions of recorded Attempts.

Performance evidence must be a measurement the guard accepted (`guard.verdict.
measurement_accepted`): not a CHALLENGER the re-timing did not reproduce, nor a rejected attempt.

Retraction triggers (docs/coordination.md):
1. the guard re-ran a cited proposal (as the incumbent a challenger is re-timed against) and the
   re-run did not pass: wrong on a re-run, a crash, or REWARD_HACK from the runner's hack checks;
2. a re-run of a cited proposal measured a latency below the roofline bound (a measurement error
   or a timing hack);
3. a cited gain was not reproduced: evidence claims attempt X was `delta` better than its
   baseline, and X's re-timed latency is more than `delta` slower than the latency recorded.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from kernelarc.guard.verdict import measurement_accepted
from kernelarc.schema import Attempt
from kernelarc.schema.coordination import Evidence

VALUE_RTOL = 0.01
"""A cited value matches the record within 1% (agents round what they cite)."""
DELTA_ATOL = 0.01
"""A cited delta matches value/baseline - 1 within one percentage point."""
MAX_EVIDENCE = 8
"""Most evidence items one conclusion may cite."""
METRICS = ("speedup", "latency_ms", "status")
"""What evidence may measure."""
UNTRUSTED = frozenset({"REJECTED_GUARD", "REJECTED_STATIC", "REWARD_HACK", "INFRA_ERROR"})
"""Statuses whose numbers are not evidence of performance (they may still be cited as status)."""


@dataclass(frozen=True)
class Discredit:
    """A proposal whose measurements can no longer be trusted, and why."""

    proposal_id: str
    """The proposal."""
    reason: str
    """One line naming the attempt that showed it."""


def recorded_value(attempt: Attempt, metric: str) -> float | None:
    """The attempt's recorded value of a performance metric (None: not measured)."""
    if metric == "speedup":
        return attempt.speedup
    if metric == "latency_ms":
        return attempt.latency_ms
    return None


def _close(claimed: float, recorded: float) -> bool:
    return math.isclose(claimed, recorded, rel_tol=VALUE_RTOL, abs_tol=1e-9)


def evidence_problems(
    evidence: Sequence[Evidence],
    record: Mapping[int, Attempt],
    discredited: Mapping[str, str],
    problem: str,
) -> list[str]:
    """Every rule the evidence of one draft breaks; [] when it is sound.

    Args:
        evidence: the draft's evidence items.
        record: attempt index -> attempt, every attempt of this campaign observed so far.
        discredited: proposal id -> why its measurements are no longer trusted.
        problem: the campaign's problem (evidence must be measured on it).
    """
    if not evidence:
        return ["no evidence: cite at least one attempt of this campaign"]
    if len(evidence) > MAX_EVIDENCE:
        return [f"{len(evidence)} evidence items (at most {MAX_EVIDENCE})"]
    problems: list[str] = []
    cited: dict[int, Attempt] = {}
    for item in evidence:
        attempt = record.get(item.attempt_index)
        label = f"evidence attempt {item.attempt_index}"
        if attempt is None:
            problems.append(f"{label}: no such attempt in this campaign")
            continue
        if attempt.proposal.id != item.proposal_id:
            problems.append(f"{label}: is {attempt.proposal.id}, not {item.proposal_id}")
            continue
        if attempt.problem != problem:
            problems.append(f"{label}: measured on {attempt.problem}, not {problem}")
            continue
        cited[item.attempt_index] = attempt
        if attempt.proposal.id in discredited:
            problems.append(f"{label}: discredited ({discredited[attempt.proposal.id]})")
        problems.extend(f"{label}: {p}" for p in _value_problems(item, attempt))
    # Baselines must themselves be recorded measurements of cited attempts.
    for item in evidence:
        if item.baseline is None or item.attempt_index not in cited:
            continue
        if not any(
            (value := recorded_value(other, item.metric)) is not None
            and _close(item.baseline, value)
            for index, other in cited.items()
            if index != item.attempt_index
        ):
            problems.append(
                f"evidence attempt {item.attempt_index}: baseline {item.baseline:g} is not the "
                f"recorded {item.metric} of another cited attempt"
            )
    return problems


def _value_problems(item: Evidence, attempt: Attempt) -> list[str]:
    """Rules on one evidence item's metric, value and delta against its attempt."""
    if item.metric not in METRICS:
        return [f"metric {item.metric!r} is not one of {', '.join(METRICS)}"]
    if item.metric == "status":
        if item.value is not None or item.baseline is not None or item.delta is not None:
            return ["status evidence carries no value, baseline or delta"]
        return []
    if attempt.status in UNTRUSTED:
        return [f"its status is {attempt.status}: its numbers are not evidence"]
    if not measurement_accepted(attempt):
        return [
            f"the guard did not accept its measurement (verdict {attempt.verdict}): its numbers "
            "are not evidence"
        ]
    recorded = recorded_value(attempt, item.metric)
    if recorded is None:
        return [f"no {item.metric} was recorded (status {attempt.status})"]
    if item.value is None:
        return [f"{item.metric} evidence needs the value (recorded: {recorded:g})"]
    if not _close(item.value, recorded):
        return [f"{item.metric} {item.value:g} does not match the recorded {recorded:g}"]
    if item.delta is not None:
        if item.baseline is None or item.baseline == 0:
            return ["a delta needs a non-zero baseline"]
        expected = item.value / item.baseline - 1.0
        if abs(item.delta - expected) > DELTA_ATOL:
            return [f"delta {item.delta:+.3f} is not value/baseline - 1 = {expected:+.3f}"]
    return []


def rerun_discredits(attempt: Attempt) -> list[Discredit]:
    """Proposals the guard re-ran while judging `attempt` whose re-run discredits them
    (triggers 1 and 2 of the module docstring)."""
    guard = attempt.guard
    if guard is None or guard.incumbent_id is None:
        return []
    reruns = [s for s in guard.samples if s.role == "incumbent"]

    def where(round_index: int) -> str:
        return f"re-run in round {round_index} of attempt {attempt.index}'s re-timing"

    failed = next((s for s in reruns if s.status not in ("PASSED", "INFRA_ERROR")), None)
    if failed is not None:
        reason = f"{where(failed.round)} ended {failed.status}"
        return [Discredit(guard.incumbent_id, reason)]
    slack = guard.settings.roofline_slack
    if slack is None or not guard.roofline:
        return []
    for sample in reruns:
        for latency, bound in zip(sample.latencies_ms, guard.roofline, strict=False):
            if latency < bound.bound_ms * (1.0 - slack):
                reason = (
                    f"{where(sample.round)} measured {latency:.6g} ms on {bound.workload}, "
                    f"below the roofline bound {bound.bound_ms:.6g} ms (a measurement error)"
                )
                return [Discredit(guard.incumbent_id, reason)]
    return []


def retimed_latency(attempt: Attempt) -> tuple[str, float] | None:
    """(incumbent proposal id, median over rounds of its re-timed geometric-mean latency) from
    the guard's re-timing recorded on `attempt`; None when it re-timed no incumbent."""
    guard = attempt.guard
    if guard is None or guard.incumbent_id is None:
        return None
    means = [
        math.exp(sum(math.log(v) for v in s.latencies_ms) / len(s.latencies_ms))
        for s in guard.samples
        if s.role == "incumbent"
        and s.status == "PASSED"
        and s.latencies_ms
        and all(v > 0 for v in s.latencies_ms)
    ]
    if not means:
        return None
    return guard.incumbent_id, median(means)


def lost_gain(item: Evidence, cited: Attempt, retimed_ms: float) -> str:
    """Why a re-timing of `cited` shows the gain `item` claims for it was not real; '' if it
    holds (trigger 3). Only evidence with a positive claimed gain (speedup delta > 0, or
    latency delta < 0) can lose it."""
    if item.delta is None or cited.latency_ms is None or cited.latency_ms <= 0:
        return ""
    gain = item.delta if item.metric == "speedup" else -item.delta
    if item.metric not in ("speedup", "latency_ms") or gain <= 0:
        return ""
    slowdown = retimed_ms / cited.latency_ms - 1.0
    if slowdown <= gain:
        return ""
    return (
        f"attempt {cited.index}'s claimed gain {gain:+.1%} was not reproduced: re-timed at "
        f"{retimed_ms:.6g} ms, {slowdown:+.1%} over the {cited.latency_ms:.6g} ms recorded"
    )
