"""Breadth-first in team order also against agents still proposing: a candidate waits (a little)
for the earlier agents' proposals of its round before it queues for a slot.

Place in the flow: the executor serves waiting candidates by priority (its agent's round, its
agent's place in the team: `executor/turn_order.py`), but a slot that is free when a candidate
arrives goes to it at once, and agents propose at very different speeds: the compiler agent
wraps the reference in milliseconds, a generated-Triton agent traces the reference first
(seconds), an LLM agent waits for its endpoint. On the H200 suite run the fastest proposers took
the one timed slot while the kernel generator's agents were still tracing, and short campaigns
ended without ever judging a generated kernel. So `_AgentWorker` tells this class when an agent
enters and leaves `propose` and in which round (its candidates taken so far); before queueing a
candidate of round n, an agent waits while an agent earlier in the team is still proposing its
round-n (or earlier) candidate, at most ORDER_WAIT_S, so a slow or stuck agent delays the
others by a bounded time and never stops them.
"""

import threading
import time
from collections.abc import Sequence

from kernelarc.agents import Agent, LeadingAgent
from kernelarc.problems.files import Problem

ORDER_WAIT_S = 15.0
"""The longest a candidate waits for earlier agents' proposals of its round."""
ANCHOR_PLACE = -1
"""The team place an anchor candidate queues with: before every agent's candidate of its round."""


def slot_priority(
    team_order: dict[str, int], agent: str, round_: int, anchor: bool
) -> tuple[int, int]:
    """A candidate's priority at the slots (`executor/turn_order.py`): its agent's round, then
    its agent's place in the team, or `ANCHOR_PLACE` for an anchor (the compiler's compile
    default and eager reference: the bars every kernel is held to).

    Why anchors first: the floor a campaign exports must be measured, not assumed. On the H100
    suite run 13 (2026-12-06, 45 s campaigns) the compiler, last in the team, had compile
    default screened early but queued for the one timed slot behind every Triton agent's first
    candidate; the time budget turned it away at the slot and both campaigns exported a kernel
    at 0.64x of compile default, which they never measured. An anchor needs no tracing and is
    one candidate per round, so it delays the others by one evaluation at most."""
    place = ANCHOR_PLACE if anchor else team_order.get(agent, len(team_order))
    return (round_, place)


def lead_first(team: Sequence[Agent], problem: Problem, device: str) -> list[Agent]:
    """The team in slot order for this problem: agents that lead on it (`agents.LeadingAgent`)
    first, the rest in team order."""
    leading = [a for a in team if isinstance(a, LeadingAgent) and a.leads(problem, device)]
    return leading + [a for a in team if a not in leading]


class ProposalOrder:
    """Which agents are proposing, in which round; thread-safe."""

    def __init__(self, team_order: dict[str, int]) -> None:
        """`team_order`: each agent's place in the team (read live: filled after construction)."""
        self._team_order = team_order
        self._cond = threading.Condition()
        self._proposing: dict[str, int] = {}

    def started(self, agent: str, round_: int) -> None:
        """`agent` entered `propose` for its candidate of round `round_`."""
        with self._cond:
            self._proposing[agent] = round_

    def finished(self, agent: str) -> None:
        """`agent` left `propose` (with a proposal, none, or an exception)."""
        with self._cond:
            self._proposing.pop(agent, None)
            self._cond.notify_all()

    def earlier_proposing(self, agent: str, round_: int) -> list[str]:
        """Agents before `agent` in the team still proposing a candidate of round <= `round_`."""
        last = len(self._team_order)
        mine = self._team_order.get(agent, last)
        with self._cond:
            return sorted(
                name
                for name, theirs in self._proposing.items()
                if theirs <= round_ and self._team_order.get(name, last) < mine
            )

    def wait_for_earlier(self, agent: str, round_: int, limit_s: float = ORDER_WAIT_S) -> float:
        """Wait until no earlier agent is proposing a candidate of round <= `round_`, at most
        `limit_s`; the seconds waited."""
        started = time.monotonic()
        deadline = started + limit_s
        with self._cond:
            while self.earlier_proposing(agent, round_):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        return time.monotonic() - started
