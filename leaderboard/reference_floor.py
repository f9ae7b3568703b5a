"""The reference floor: an export is never slower than the problem's own reference (pure).

Place in the flow: `leaderboard.export.plan_export` selects per problem by SOL score
(`selection.py`), then asks `apply_floor` whether the chosen attempt is slower than the
reference as its campaign measured it (the median reference latency of the campaign's PASSED
evaluations, per workload: `score.reference_baseline`). The guard accepts the first passing
candidate of a campaign without an incumbent to beat, so an accepted kernel can be slower than
the reference (a campaign without the compiler agent's eager attempt, or whose eager attempt
was never accepted). Then the next ranked candidate that is not slower is exported, else the
campaign's PASSED attempt of the reference itself (its solution is the definition's reference,
as the compiler agent's `eager` variant), else nothing, with the reason.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernelarc.schema import Attempt, Definition, EvalStatus
from leaderboard.score import Baseline, ProblemScore
from leaderboard.selection import Candidate, Choice


@dataclass(frozen=True)
class Floor:
    """What the floor needs of one campaign and problem."""

    reference: Baseline | None
    """The campaign's reference latency per workload (None: none measured)."""
    definition: Definition | None
    """The problem's definition (None: problem files unavailable)."""
    attempts: Sequence[Attempt]
    """The campaign's attempts of the problem."""


def slowdown(score: ProblemScore, reference: Baseline) -> float | None:
    """Geometric mean over workloads of T_k / reference latency (> 1: slower than the
    reference), or None when the reference does not cover every workload."""
    ratios = []
    for row in score.workloads:
        ref = reference.latencies_ms.get(row.workload)
        if ref is None or ref <= 0:
            return None
        ratios.append(max(row.latency_ms / ref, 1e-12))
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def is_reference(attempt: Attempt, definition: Definition) -> bool:
    """A PASSED attempt whose solution is the definition's reference itself."""
    sources = attempt.proposal.solution.sources
    return (
        attempt.status == EvalStatus.PASSED
        and len(sources) == 1
        and sources[0].content.strip() == definition.reference.strip()
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
        ratio = slowdown(candidate.score, floor.reference) if floor.reference else None
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
            if is_reference(attempt, floor.definition):
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
    ratio = slowdown(candidate.score, reference) if reference else None
    times = f"{ratio:.3f}x the reference latency" if ratio is not None else "slower"
    return f"the best accepted, {_name(candidate)}, takes {times}"
