"""Read-only cross-agent state: immutable snapshots of every peer, built from campaign state.

Place in the flow: the campaign loop calls `build_peer_snapshots` (peer state on) while building
an agent's context. Read-only by construction: `PeerSnapshot` is a frozen dataclass of tuples,
and every Attempt in it is a deep copy of a frozen pydantic model, so assigning to any field
raises and mutating a list inside a copy (pydantic keeps lists as lists) changes only the copy,
never the campaign's record, its incumbent or another agent's view.
"""

from collections.abc import Sequence

from kernelarc.agents.context import PeerSnapshot
from kernelarc.schema import Attempt, EvalStatus

TREND_LENGTH = 5
"""Attempts in a snapshot's `recent_speedups`."""


def frozen_copy(attempt: Attempt) -> Attempt:
    """A deep copy that shares no mutable object (lists, nested models) with `attempt`."""
    return attempt.model_copy(deep=True)


def best_passing(attempts: Sequence[Attempt]) -> Attempt | None:
    """The attempt with the highest speedup among those that PASSED (earliest on a tie)."""
    best: Attempt | None = None
    for attempt in attempts:
        if attempt.status != EvalStatus.PASSED or attempt.speedup is None:
            continue
        if best is None or best.speedup is None or attempt.speedup > best.speedup:
            best = attempt
    return best


def build_peer_snapshots(
    team: Sequence[tuple[str, str]], attempts: Sequence[Attempt], me: str
) -> tuple[PeerSnapshot, ...]:
    """One snapshot per teammate other than `me`, in team order.

    Args:
        team: (agent name, strategy) of every agent of the campaign.
        attempts: the campaign's attempts so far, in completion order.
        me: the agent the context is for (left out).
    """
    snapshots: list[PeerSnapshot] = []
    for name, strategy in team:
        if name == me:
            continue
        own = [a for a in attempts if a.proposal.agent == name]
        incumbent = best_passing(own)
        snapshots.append(
            PeerSnapshot(
                agent=name,
                strategy=strategy,
                incumbent=frozen_copy(incumbent) if incumbent is not None else None,
                best_speedup=incumbent.speedup if incumbent is not None else None,
                attempts=len(own),
                recent_speedups=tuple(
                    a.speedup if a.status == EvalStatus.PASSED else None
                    for a in own[-TREND_LENGTH:]
                ),
            )
        )
    return tuple(snapshots)
