"""The campaign's shared state and what it reports: `CampaignState` (guarded by its lock, read by
the agent threads, the recorder and the live view), the callbacks that see it, and the
`CampaignSummary` of a finished campaign.

Place in the flow: `assemble.py` makes the state, `restore.py` replays a killed campaign's attempts
into it, `recorder.py` adds each judged attempt, `loop.py` turns it into the summary. It sits below
all of them so none of them imports another only for these types (loop.py and restore.py once
imported each other for `CampaignState`).
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.campaign.time_budget import TimeBudget
from kernelarc.schema import Attempt
from kernelarc.schema.throughput import ThroughputReport


@dataclass
class CampaignState:
    """Mutable campaign state, guarded by `lock`."""

    budget: int
    attempts: list[Attempt] = field(default_factory=list)
    seen_ids: set[str] = field(default_factory=set)
    reserved: int = 0
    best: Attempt | None = None
    failures: int = 0
    infra_failures_in_a_row: int = 0
    guard_evaluations: int = 0
    aborted: str = ""
    conclusions: int = 0
    """Conclusions published to the shared memory."""
    retracted: int = 0
    """Conclusions retracted since."""
    drafts: int = 0
    """Drafted proposals accepted into the budget."""
    roster: tuple[tuple[str, str], ...] = ()
    """(name, strategy) of every agent of the team, in team order."""
    stopped: bool = False
    """Set when the campaign is stopped from outside (Ctrl-C): no attempt is recorded after it,
    so an evaluation cut short by the shutdown is not mistaken for a result."""
    clock: TimeBudget = field(default_factory=lambda: TimeBudget(None))
    """The wall-clock budget (budget.time_s) and the time used."""
    propose_s: float = 0.0
    """Seconds the agents spent in `propose` (summed over agents)."""
    throughput: ThroughputReport | None = None
    """The executor's throughput so far (updated after each attempt, for the live view)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    guard_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a passing candidate is judged: the incumbent is stable meanwhile."""

    @property
    def best_speedup(self) -> float | None:
        """Speedup of the best attempt so far."""
        return self.best.speedup if self.best else None


ProgressCallback = Callable[[Attempt, CampaignState], None]
StateCallback = Callable[[CampaignState], None]
IdleCallback = Callable[[str, str], None]
"""Called once per agent that proposes nothing at all, with its name and the reason."""


class CampaignStopped(Exception):
    """Raised in an agent's thread when the campaign was stopped (CampaignState.stopped)."""


@dataclass(frozen=True)
class CampaignSummary:
    """What a finished campaign reports."""

    run_dir: Path
    problem: str
    device: str
    attempts: int
    passed: int
    failures: int
    best: Attempt | None
    status: str
    guard_evaluations: int = 0
    """Extra sandbox evaluations the guard made (re-timing, confirmation); not in the budget."""
    conclusions: int = 0
    """Conclusions published to the shared memory."""
    retracted: int = 0
    """Of those, retracted by the end."""
    drafts: int = 0
    """Drafted proposals evaluated."""
    throughput: ThroughputReport | None = None
    """Candidates per minute, slot use, queue wait, overheads (also in campaign.json)."""
    stop_reason: str = ""
    """`candidates`, `time_budget`, `agents_done` or `aborted` (campaign.json)."""
    time_used_s: float = 0.0
    """Wall time used, earlier sessions of a resumed campaign included."""
