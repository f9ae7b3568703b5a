"""The reference floor: an export is never slower than the problem's own reference (pure).

Place in the flow: `leaderboard.export.plan_export` ranks each problem's accepted attempts by
latency (`selection.py`), then asks `apply_floor` whether the chosen attempt is slower than the
reference as its campaign measured it: per workload, the median reference latency of the
campaign's PASSED evaluations on the same hardware with the same timing method
(`campaign_reference`), which one noisy reference timing cannot move much. The guard accepts
the first passing candidate of a campaign without an incumbent to beat, so an accepted kernel
can be slower than the reference (a team without the compiler agent's `eager` attempt, or whose
`eager` attempt was never accepted), and across campaigns the lowest latency can belong to a
campaign whose reference ran faster still. Then the next ranked candidate that is not slower
than its own campaign's reference is exported, else the first candidate's campaign's PASSED
attempt of the reference itself (its solution is the definition's reference, as the compiler
agent's `eager` variant), else nothing, with the reason.
"""

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kernelarc.guard.score import ProblemScore
from kernelarc.problems.reference import is_reference
from kernelarc.schema import Attempt, Definition, EvalStatus, Trace
from leaderboard.selection import Candidate, Choice

TimingKey = tuple[str, str, str | None]
"""Workload uuid, hardware, timing method: reference latencies compare only within one key (a
CPU timing of the reference says nothing about a GPU-timed kernel)."""


@dataclass(frozen=True)
class Floor:
    """What the floor needs of one campaign and problem."""

    reference: Mapping[TimingKey, float] | None
    """The campaign's reference latency per timing key (None: none measured)."""
    definition: Definition | None
    """The problem's definition (None: problem files unavailable)."""
    attempts: Sequence[Attempt]
    """The campaign's attempts of the problem."""


def timing_key(trace: Trace) -> TimingKey | None:
    """The trace's workload, hardware and timing method (None: no performance)."""
    evaluation = trace.evaluation
    if evaluation is None or evaluation.performance is None:
        return None
    method = evaluation.performance.timing_method
    return (trace.workload.uuid, evaluation.environment.hardware, method)


def campaign_reference(attempts: Iterable[Attempt]) -> dict[TimingKey, float] | None:
    """Per timing key, the median of the reference latencies measured by the PASSED
    evaluations among `attempts` (one campaign, one problem); None without any."""
    measured: dict[TimingKey, list[float]] = {}
    for attempt in attempts:
        if attempt.status != EvalStatus.PASSED:
            continue
        for trace in attempt.traces:
            key = timing_key(trace)
            perf = trace.evaluation.performance if trace.evaluation else None
            if key is not None and perf is not None and 0 < perf.reference_latency_ms < math.inf:
                measured.setdefault(key, []).append(perf.reference_latency_ms)
    if not measured:
        return None
    return {key: statistics.median(values) for key, values in measured.items()}


def slowdown(attempt: Attempt, reference: Mapping[TimingKey, float]) -> float | None:
    """Geometric mean over workloads of T_k / reference latency (> 1: slower than the
    reference), or None when the reference does not cover every workload."""
    ratios = []
    for trace in attempt.traces:
        key = timing_key(trace)
        perf = trace.evaluation.performance if trace.evaluation else None
        ref = reference.get(key) if key is not None else None
        if perf is None or ref is None or ref <= 0:
            return None
        ratios.append(max(perf.latency_ms / ref, 1e-12))
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def is_reference_attempt(attempt: Attempt, definition: Definition) -> bool:
    """A PASSED attempt whose solution is the definition's reference itself."""
    return attempt.status == EvalStatus.PASSED and is_reference(
        attempt.proposal.solution, definition
    )


def apply_floor(
    choice: Choice, floors: Callable[[Candidate], Floor], score: Callable[[Attempt], ProblemScore]
) -> Choice | str:
    """`choice` when its chosen attempt is not slower than its campaign's reference; else the
    first ranked candidate that is not, else the reference's own attempt, else why not.

    `floors` gives a candidate's campaign data, `score` scores a fallback reference attempt.
    """
    for position, candidate in enumerate(choice.ranked):
        floor = floors(candidate)
        ratio = slowdown(candidate.attempt, floor.reference) if floor.reference else None
        if ratio is None or ratio <= 1.0:
            if position == 0:
                return choice
            skipped = _describe(choice.ranked[0], floors)
            reason = f"{_name(candidate)}: the next accepted attempt not slower than the reference"
            return Choice(choice.problem, choice.ranked[position:], f"{reason}; {skipped}")
    first = choice.ranked[0]
    floor = floors(first)
    if floor.definition is not None:
        for attempt in floor.attempts:
            if is_reference_attempt(attempt, floor.definition):
                reference = Candidate(first.campaign, first.order, attempt, score(attempt))
                reason = f"{_name(reference)}: the reference itself; {_describe(first, floors)}"
                return Choice(choice.problem, (reference, *choice.ranked), reason)
    return (
        f"every accepted attempt is slower than the reference ({_describe(first, floors)}), and "
        "no PASSED attempt of the reference itself to export instead"
    )


def _name(candidate: Candidate) -> str:
    return f"attempt {candidate.attempt.index} of {candidate.campaign}"


def _describe(candidate: Candidate, floors: Callable[[Candidate], Floor]) -> str:
    reference = floors(candidate).reference
    ratio = slowdown(candidate.attempt, reference) if reference else None
    times = f"{ratio:.3f}x the reference latency" if ratio is not None else "slower"
    return f"the best accepted, {_name(candidate)}, takes {times}"
