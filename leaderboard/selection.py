"""Which attempts qualify for the leaderboard, and which one per problem is exported (pure).

Place in the flow: `leaderboard.export` builds Candidates (a qualifying attempt, its campaign and
its score) and calls `select`; the reasons feed `--dry-run` and manifest.json.

Rule: only accepted attempts qualify (`qualifies`); per problem the lowest confirmed latency wins
(the geometric mean over workloads of the exported traces, which the guard confirmed), GPU-timed
before CPU-timed (a CPU timing is a pipeline check); ties go to the older attempt (finished_at,
then the input order, then the attempt index). Ranking by latency ranks every candidate of a
problem against one baseline: the SOL score falls as latency rises for a common T_b and T_SOL,
whereas each campaign's own reference (or compile) time would rank one kernel differently per
campaign (issue 17: a 0.51 ms attempt ranked above the same proposal at 0.132 ms).
"""

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kernelarc.guard.score import ProblemScore
from kernelarc.schema import Attempt, EvalStatus, Verdict


def qualifies(attempt: Attempt) -> bool:
    """The judge accepted the attempt: PASSED with verdict NEW_BEST, and confirmed by the
    benchmark guard where the record has a confirmation field (False there disqualifies)."""
    if attempt.status != EvalStatus.PASSED or attempt.verdict != Verdict.NEW_BEST:
        return False
    return getattr(attempt, "confirmed", None) is not False


@dataclass(frozen=True)
class Candidate:
    """A qualifying attempt with where it came from and its score."""

    campaign: str
    """The input's label (run dir or MLflow run)."""
    order: int
    """Position of the input on the command line (MLflow: oldest first)."""
    attempt: Attempt
    """The attempt."""
    score: ProblemScore
    """Its times and SOL score."""


@dataclass(frozen=True)
class Choice:
    """The exported candidate of one problem, with the ranked alternatives."""

    problem: str
    """Definition name."""
    ranked: tuple[Candidate, ...]
    """Every candidate, best first; `ranked[0]` is exported."""
    reason: str
    """Why ranked[0] won, in one line."""

    @property
    def chosen(self) -> Candidate:
        """The exported candidate."""
        return self.ranked[0]


@dataclass(frozen=True)
class Selection:
    """The outcome for every problem seen in the inputs."""

    choices: dict[str, Choice]
    """Problem to its choice, for problems with a qualifying attempt."""
    unqualified: dict[str, str]
    """Problem to why no attempt qualified, for the others."""


def rank_key(candidate: Candidate) -> tuple[bool, float, datetime, int, int]:
    """Sort key, best first: GPU-timed, latency, finish time, input, index."""
    latency = candidate.score.latency_ms
    return (
        candidate.score.cpu_timed,
        latency if math.isfinite(latency) else math.inf,
        _finished(candidate.attempt),
        candidate.order,
        candidate.attempt.index,
    )


def select(candidates: Iterable[Candidate], attempts: Iterable[Attempt]) -> Selection:
    """Pick per problem the best candidate; explain problems of `attempts` without one."""
    by_problem: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_problem.setdefault(candidate.attempt.problem, []).append(candidate)
    choices = {}
    for problem, group in sorted(by_problem.items()):
        ranked = tuple(sorted(group, key=rank_key))
        choices[problem] = Choice(problem, ranked, _reason(ranked))
    seen: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        seen.setdefault(attempt.problem, []).append(attempt)
    unqualified = {
        problem: describe_unqualified(group)
        for problem, group in sorted(seen.items())
        if problem not in choices
    }
    return Selection(choices, unqualified)


def describe_unqualified(attempts: Sequence[Attempt]) -> str:
    """Why none of a problem's attempts qualifies, e.g. `5 attempts (PASSED 2, RUNTIME_ERROR 3);
    no NEW_BEST`."""
    statuses = Counter(str(a.status) for a in attempts)
    text = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
    best = [a for a in attempts if a.status == EvalStatus.PASSED and a.verdict == Verdict.NEW_BEST]
    if best:
        why = (
            f"{len(best)} NEW_BEST not confirmed by the benchmark guard "
            "(guard or confirmation off, or a record from before the guard)"
        )
    elif statuses.get(EvalStatus.PASSED.value):
        why = "PASSED attempts, but none accepted (NEW_BEST)"
    else:
        why = "none PASSED"
    return f"{len(attempts)} attempts ({text}); {why}"


def _reason(ranked: Sequence[Candidate]) -> str:
    first = ranked[0]
    head = f"attempt {first.attempt.index} of {first.campaign}"
    if len(ranked) == 1:
        return f"{head}: the only accepted attempt"
    second = ranked[1]
    a, b = first.score, second.score
    other = f"attempt {second.attempt.index} of {second.campaign}"
    if b.cpu_timed and not a.cpu_timed:
        return f"{head}: timed on a GPU, {other} on the CPU"
    if a.latency_ms != b.latency_ms:
        return f"{head}: latency {a.latency_ms:.4g} ms < {b.latency_ms:.4g} ms of {other}"
    return f"{head}: same latency; older than {other}"


def _finished(attempt: Attempt) -> datetime:
    try:
        when = datetime.fromisoformat(attempt.finished_at)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
