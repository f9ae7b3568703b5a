"""One agent's thread: propose, take a budget slot, evaluate and record (candidate.py), conclude,
until the candidate budget or the time budget is spent, the campaign aborts, or the agent stops.

Place in the flow: `loop.run_assembled` starts one thread per agent on `AgentWorker.run`. At most
`budget.max_proposing` agents are inside `propose`/`conclude` at once (default all); evaluations
are bounded separately, by the executor's slots. Duplicates are dropped (an agent that only
repeats itself is stopped), no proposal is accepted that is not expected to finish before the
deadline (time_budget.py), and each agent's candidates queue at the slots breadth-first in team
order (proposal_order.py). After an attempt the agent's `conclude` hook may publish conclusions
(shared memory on).
"""

import contextlib
import logging
import threading
import time
from contextlib import AbstractContextManager

from kernelarc.agents import Agent, AgentContext, AnchoringAgent
from kernelarc.campaign.candidate import CandidateEvaluation
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.campaign.proposal_order import ProposalOrder, slot_priority
from kernelarc.campaign.recorder import AttemptRecorder
from kernelarc.campaign.state import CampaignState, CampaignStopped, IdleCallback, StateCallback
from kernelarc.executor import NotAdmitted
from kernelarc.schema import Attempt, Proposal

logger = logging.getLogger(__name__)

#: An agent that keeps proposing already-evaluated candidates is stopped after this many in a row.
_MAX_DUPLICATES_IN_A_ROW = 25


class AgentWorker:
    """Runs one agent's propose -> evaluate -> record loop; shared state under a lock."""

    def __init__(
        self,
        state: CampaignState,
        coordinator: Coordinator,
        evaluation: CandidateEvaluation,
        recorder: AttemptRecorder,
        team: list[Agent],
        max_proposing: int | None = None,
        on_progress: StateCallback | None = None,
        on_idle: IdleCallback | None = None,
    ) -> None:
        self.state = state
        self.coordinator = coordinator
        self.evaluation = evaluation
        self.recorder = recorder
        self.on_progress = on_progress
        self.on_idle = on_idle
        self.team_order: dict[str, int] = {agent.name: i for i, agent in enumerate(team)}
        """Each agent's place in the team: the second key of its candidates' slot priority."""
        self._order = ProposalOrder(self.team_order)
        # Proposal concurrency, separate from the evaluation slots.
        self.proposing: AbstractContextManager[object] = (
            threading.BoundedSemaphore(max_proposing)
            if max_proposing is not None
            else contextlib.nullcontext()
        )

    def run(self, agent: Agent) -> None:
        """Propose, evaluate, record and conclude until the budget is spent or the agent stops."""
        try:
            self._run(agent)
        except CampaignStopped:
            return
        except Exception:
            if self.state.stopped:  # the shutdown broke an evaluation: not this agent's fault
                return
            raise

    def _run(self, agent: Agent) -> None:
        duplicates = 0
        proposed = 0
        taken = 0  # this agent's candidates that took a budget slot so far
        while True:
            with self.state.lock:
                if self.state.aborted or self.state.reserved >= self.state.budget:
                    return
                if self.state.clock.expired():
                    logger.info("agent %s stops: the time budget is spent", agent.name)
                    return
                ctx = self._context(agent.name)
            proposing_since = time.monotonic()
            self._order.started(agent.name, taken)
            try:
                with self.proposing:
                    proposal = agent.propose(ctx)
            except Exception:  # an agent bug must not end the campaign (isolation boundary)
                logger.exception("agent %s failed to propose; retiring it", agent.name)
                return
            finally:
                self._order.finished(agent.name)
                with self.state.lock:
                    self.state.propose_s += time.monotonic() - proposing_since
            if proposal is None:
                logger.info("agent %s has nothing new to propose", agent.name)
                self._report_idle(agent, proposed)
                return
            proposed += 1
            proposal = self.coordinator.stamp(proposal, ctx)
            with self.state.lock:
                if proposal.id in self.state.seen_ids:
                    duplicates += 1
                    if duplicates >= _MAX_DUPLICATES_IN_A_ROW:
                        logger.warning("agent %s only repeats itself; stopping it", agent.name)
                        return
                    continue
                if self.state.reserved >= self.state.budget:
                    return
                if not self.state.clock.fits():
                    logger.info(
                        "agent %s stops: %s is not expected to finish before the deadline "
                        "(%.1f s left, a candidate takes %.1f s)",
                        agent.name,
                        proposal.id,
                        self.state.clock.left_s() or 0.0,
                        self.state.clock.expected_s(),
                    )
                    return
                duplicates = 0
                self.state.seen_ids.add(proposal.id)
                ordinal = self.state.reserved
                self.state.reserved += 1
                self.coordinator.accepted(proposal)
                self.state.drafts += int(proposal.draft)
            candidate_since = time.monotonic()
            # Breadth-first in team order at the slots (proposal_order.py): every agent's n-th
            # candidate before any agent's (n+1)-th, the compiler's anchors (compile default on
            # CUDA, then the eager reference) first in theirs; they need no tracing, so they
            # never wait for the Triton agents either.
            anchor = isinstance(agent, AnchoringAgent) and agent.is_anchor(proposal)
            priority = slot_priority(self.team_order, agent.name, taken, anchor)
            if not anchor:
                self._order.wait_for_earlier(agent.name, taken)
            taken += 1
            try:
                attempt = self.evaluation.screen_evaluate_and_record(proposal, ordinal, priority)
            except NotAdmitted:
                with self.state.lock:
                    self._withdraw(proposal)
                    left = self.state.clock.left_s() or 0.0
                logger.info(
                    "agent %s stops: %s reached its slot %.1f s before the deadline, less than "
                    "a candidate takes; dropped unrecorded",
                    agent.name,
                    proposal.id,
                    left,
                )
                return
            with self.state.lock:
                self.state.clock.finished(time.monotonic() - candidate_since)
            self._conclude(agent, attempt)

    def _withdraw(self, proposal: Proposal) -> None:
        """Give back the budget slot of a proposal the time budget turned away at its slot (under
        the state lock): it was never evaluated, so a resume may propose it again."""
        self.state.reserved -= 1
        self.state.seen_ids.discard(proposal.id)
        self.state.drafts -= int(proposal.draft)

    def _report_idle(self, agent: Agent, proposed: int) -> None:
        """Tell `on_idle` why an agent that never proposed does not apply (if it says)."""
        reason_of = getattr(agent, "idle_reason", None)
        if proposed or self.on_idle is None or not callable(reason_of):
            return
        reason = reason_of()
        if isinstance(reason, str) and reason:
            self.on_idle(agent.name, reason)

    def _context(self, agent: str) -> AgentContext:
        """The agent's context (under the state lock)."""
        return self.coordinator.context(
            agent, self.state.attempts, frozenset(self.state.seen_ids), self.state.best
        )

    def _conclude(self, agent: Agent, attempt: Attempt) -> None:
        """The agent's conclusions on its attempt (shared memory on only)."""
        if self.coordinator.board is None:
            return
        with self.state.lock:
            ctx = self._context(agent.name)
        with self.proposing:
            published = self.coordinator.conclude(agent, attempt, ctx)
        if not published:
            return
        with self.state.lock:
            self.state.conclusions += len(published)
            if self.on_progress is not None:
                self.on_progress(self.state)
        self.recorder.log_conclusions(published)
