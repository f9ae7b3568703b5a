"""Who gets a free slot next: the waiter with the lowest priority, then the earliest.

Place in the flow: the executors' pools (`local_executor.SlotQueue`, `ray_executor._ActorPool`)
hand a freed slot to the waiter `TurnOrder` names, instead of to whichever thread the OS wakes
first. The campaign loop gives each candidate the priority (its agent's candidates admitted
before it, its agent's place in the team) and the guard's own runs `GUARD_PRIORITY`, so with one
timed slot a campaign evaluates breadth-first in team order: every agent's first candidate
before any agent's second, and a guard run (its candidate holds the guard lock) before any new
candidate. A campaign cut short by its time budget then has judged the team's first ideas, in
an order the config fixes, not a thread race.
"""

import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Priority = tuple[int, ...]
"""Lower first; compared as tuples."""
GUARD_PRIORITY: Priority = ()
"""Before every candidate's (an empty tuple sorts first)."""

T = TypeVar("T")


class TurnOrder:
    """Waiters' tickets in priority order; use under the pool's condition."""

    def __init__(self, cond: threading.Condition) -> None:
        """Tickets are served under `cond`, which the pool notifies (all) on every release."""
        self._cond = cond
        self._tickets: list[tuple[Priority, int]] = []
        self._count = itertools.count()

    def waiting(self) -> int:
        """Tickets not yet served (call holding `cond`)."""
        return len(self._tickets)

    def wait_turn(self, priority: Priority, ready: Callable[[], bool]) -> None:
        """Wait (holding `cond`) until `ready()` and no waiter comes before this one."""
        ticket = (priority, next(self._count))
        heapq.heappush(self._tickets, ticket)
        try:
            while not (ready() and self._tickets[0] == ticket):
                self._cond.wait()
        finally:
            self._tickets.remove(ticket)
            heapq.heapify(self._tickets)
            self._cond.notify_all()  # the next ticket may be served now


class SlotQueue(Generic[T]):
    """Free slots, handed out in `TurnOrder`; thread-safe."""

    def __init__(self) -> None:
        """An empty queue."""
        self._cond = threading.Condition()
        self._free: list[T] = []
        self._turns = TurnOrder(self._cond)

    def get(self, priority: Priority = GUARD_PRIORITY) -> T:
        """A free slot, once every waiter before this one was served."""
        with self._cond:
            self._turns.wait_turn(priority, lambda: bool(self._free))
            return self._free.pop(0)

    def waiting(self) -> int:
        """Callers blocked in `get` now."""
        with self._cond:
            return self._turns.waiting()

    def put(self, slot: T) -> None:
        """Give a slot back (or add one)."""
        with self._cond:
            self._free.append(slot)
            self._cond.notify_all()
