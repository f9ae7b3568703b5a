"""Plateau-triggered drafting: notice when an agent has stalled and tell it to start a fresh line.

Place in the flow: the campaign loop keeps one `PlateauTracker` per agent, feeds it that agent's
judged attempts, and (drafting on) puts `draft_order(...)` into the agent's next context once the
tracker is due; when the drafted proposal is accepted into the budget the loop calls `drafted()`.
"""

from dataclasses import dataclass

from kernelarc.agents.context import DraftOrder
from kernelarc.coordination.peers import frozen_copy
from kernelarc.schema import Attempt, EvalStatus


@dataclass
class PlateauTracker:
    """Counts an agent's attempts since its incumbent last improved beyond noise.

    Progress is a passing attempt whose speedup exceeds `level * (1 + min_gain)`, where `level`
    is the speedup at the last progress (the first passing attempt is progress). Every other
    attempt (slower, within noise, or failed) is flat. Drafting is due after `patience` flat
    attempts in a row, not before; `drafted()` starts the count again.
    """

    patience: int
    """Flat attempts before drafting is due."""
    min_gain: float
    """Relative gain that counts as progress."""
    level: float | None = None
    """Speedup at the last progress (None: no passing attempt yet)."""
    flat: int = 0
    """Flat attempts since the last progress or draft."""
    drafts: int = 0
    """Drafts issued so far."""

    def observe(self, attempt: Attempt) -> None:
        """Count one of the agent's own judged attempts."""
        speedup = attempt.speedup if attempt.status == EvalStatus.PASSED else None
        progress = speedup is not None and (
            self.level is None or speedup > self.level * (1 + self.min_gain)
        )
        if progress:
            self.level = speedup
            self.flat = 0
        else:
            self.flat += 1

    @property
    def due(self) -> bool:
        """True once `patience` flat attempts have accumulated."""
        return self.flat >= self.patience

    def drafted(self) -> None:
        """A draft was accepted into the budget: give the fresh line `patience` attempts."""
        self.flat = 0
        self.drafts += 1


def draft_order(
    tracker: PlateauTracker,
    *,
    agent: str,
    draft_from: str,
    peer_state: bool,
    global_best: Attempt | None,
) -> DraftOrder:
    """What a due agent drafts from: the campaign's best attempt when `draft_from` is
    `global_best`, peer state is on, a best exists and another agent holds it; else the
    reference (a stalled holder of the global best gains nothing from restarting there)."""
    reason = f"no gain beyond {tracker.min_gain:.1%} in {tracker.flat} attempts"
    if (
        draft_from == "global_best"
        and peer_state
        and global_best is not None
        and global_best.proposal.agent != agent
    ):
        return DraftOrder(source="global_best", base=frozen_copy(global_best), reason=reason)
    return DraftOrder(source="reference", base=None, reason=reason)
