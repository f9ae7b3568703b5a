"""The campaign side of coordination: what each agent sees, and what its attempts publish.

Place in the flow: `loop.py` owns one `Coordinator`. Under the campaign lock it asks `context` for
an agent's `AgentContext` (built per `coordination.*` switch: conclusions only with memory on,
peer snapshots only with peer state on, a draft order only with drafting on), `stamp`s the
provenance of the proposal that came back (conclusions seen, draft, parent), counts an accepted
draft, and `observe`s every judged attempt (plateau trackers, retractions). Outside the lock it
runs an agent's `conclude` hook (memory on only) and publishes the drafts. A resumed campaign
calls `restore` first with the recorded attempts. Everything an agent
receives is a deep copy: nothing it holds aliases the campaign's state.
"""

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from kernelarc.agents import Agent, AgentContext, ConcludingAgent
from kernelarc.config import CoordinationConfig
from kernelarc.coordination import (
    ConclusionBoard,
    ConclusionRejected,
    PlateauTracker,
    best_passing,
    build_peer_snapshots,
    draft_order,
    frozen_copy,
)
from kernelarc.errors import KernelarcError
from kernelarc.problems.files import Problem
from kernelarc.rundir import CONCLUSIONS_FILE
from kernelarc.schema import Attempt, Proposal
from kernelarc.schema.coordination import Conclusion, CoordinationSettings

logger = logging.getLogger(__name__)


class Coordinator:
    """Coordination state of one campaign: the board, the plateau trackers, the team roster.

    Args:
        cfg: the coordination switches.
        problem: the campaign's problem.
        device: `cpu` or `cuda`.
        team: the agents (name and strategy are read once).
        run_dir: where conclusions.jsonl goes (None: the board stays in memory).
    """

    def __init__(
        self,
        cfg: CoordinationConfig,
        problem: Problem,
        device: str,
        team: Sequence[Agent],
        run_dir: Path | None,
    ) -> None:
        self.cfg = cfg
        self.problem = problem
        self.device: Literal["cpu", "cuda"] = "cuda" if device == "cuda" else "cpu"
        self.roster = tuple((agent.name, agent.strategy) for agent in team)
        self.board: ConclusionBoard | None = None
        if cfg.memory:
            path = run_dir / CONCLUSIONS_FILE if run_dir is not None else None
            self.board = ConclusionBoard(
                problem.name, problem.definition.op_type or "", path, cfg.max_claim_chars
            )
        self.plateaus = {
            name: PlateauTracker(cfg.plateau_patience, cfg.plateau_min_gain)
            for name, _ in self.roster
        }
        self.gpu = ""

    def restore(self, attempts: Sequence[Attempt]) -> None:
        """Take up a resumed campaign: the board from its conclusions.jsonl (ConclusionBoard.
        restore, which also makes retractions a crash kept out of the log), and each agent's
        plateau count by replaying its recorded attempts, drafts restarting the count as they
        did when accepted.

        Raises:
            TrackingError: a complete line of conclusions.jsonl is not a valid event.
        """
        if self.board is not None and self.board.path is not None:
            self.board = ConclusionBoard.restore(
                self.board.path,
                attempts,
                self.problem.name,
                self.problem.definition.op_type or "",
                self.cfg.max_claim_chars,
            )
        for attempt in attempts:
            self._note_gpu(attempt)
            tracker = self.plateaus.get(attempt.proposal.agent)
            if tracker is None:
                continue
            if attempt.proposal.draft:
                tracker.drafted()
            tracker.observe(attempt)

    def settings(self, guard_enabled: bool) -> CoordinationSettings:
        """The switches as recorded in campaign.json (`guard` as actually in force)."""
        cfg = self.cfg
        return CoordinationSettings(
            memory=cfg.memory,
            guard=guard_enabled,
            peer_state=cfg.peer_state,
            drafting=cfg.drafting,
            plateau_patience=cfg.plateau_patience,
            plateau_min_gain=cfg.plateau_min_gain,
            draft_from=cfg.draft_from,
            max_conclusions=cfg.max_conclusions,
        )

    def context(
        self,
        agent: str,
        attempts: Sequence[Attempt],
        seen_ids: frozenset[str],
        global_best: Attempt | None,
    ) -> AgentContext:
        """The context of `agent`'s next call (call under the campaign lock)."""
        own = tuple(frozen_copy(a) for a in attempts if a.proposal.agent == agent)
        conclusions: tuple[Conclusion, ...] = ()
        if self.board is not None:
            conclusions = tuple(
                c.model_copy(deep=True) for c in self.board.live(self.cfg.max_conclusions)
            )
        peers = build_peer_snapshots(self.roster, attempts, agent) if self.cfg.peer_state else ()
        draft = None
        tracker = self.plateaus.get(agent)
        if self.cfg.drafting and tracker is not None and tracker.due:
            draft = draft_order(
                tracker,
                agent=agent,
                draft_from=self.cfg.draft_from,
                peer_state=self.cfg.peer_state,
                global_best=global_best,
            )
        return AgentContext(
            problem=self.problem,
            device=self.device,
            attempts=own,
            seen_ids=seen_ids,
            gpu=self.gpu,
            incumbent=best_passing(own),
            conclusions=conclusions,
            peers=peers,
            draft=draft,
        )

    def stamp(self, proposal: Proposal, ctx: AgentContext) -> Proposal:
        """The proposal with its provenance: conclusions seen and, for a draft, its source."""
        update: dict[str, object] = {"conclusions_seen": [c.id for c in ctx.conclusions]}
        if ctx.draft is not None:
            update["draft"] = True
            update["draft_source"] = ctx.draft.source
            if proposal.parent_id is None and ctx.draft.base is not None:
                update["parent_id"] = ctx.draft.base.proposal.id
        return proposal.model_copy(update=update)

    def accepted(self, proposal: Proposal) -> None:
        """A proposal took a budget slot; a draft restarts its agent's plateau count."""
        tracker = self.plateaus.get(proposal.agent)
        if proposal.draft and tracker is not None:
            tracker.drafted()
            logger.info("agent %s drafts a fresh line (%s)", proposal.agent, proposal.draft_source)

    def observe(self, attempt: Attempt) -> list[Conclusion]:
        """Count a judged attempt (call under the campaign lock, after it is recorded).

        Returns:
            Conclusions the attempt retracted.
        """
        self._note_gpu(attempt)
        tracker = self.plateaus.get(attempt.proposal.agent)
        if tracker is not None:
            tracker.observe(attempt)
        if self.board is None:
            return []
        try:
            return self.board.observe(attempt)
        except KernelarcError:
            logger.exception("conclusions.jsonl could not be written; retractions may be late")
            return []

    def _note_gpu(self, attempt: Attempt) -> None:
        """The GPU name, from the first CUDA trace that has one."""
        if not self.gpu and self.device == "cuda":
            self.gpu = next(
                (t.evaluation.environment.hardware for t in attempt.traces if t.evaluation), ""
            )

    def conclude(self, agent: Agent, attempt: Attempt, ctx: AgentContext) -> list[Conclusion]:
        """Run `agent`'s conclude hook on its attempt and publish what the board accepts (memory
        on only; call outside the campaign lock: an LLM agent may take seconds)."""
        if self.board is None or not isinstance(agent, ConcludingAgent):
            return []
        try:
            drafts = agent.conclude(frozen_copy(attempt), ctx)
        except Exception:  # an agent bug must not end the campaign (isolation boundary)
            logger.exception("agent %s failed to conclude on attempt %d", agent.name, attempt.index)
            return []
        published: list[Conclusion] = []
        for draft in drafts:
            try:
                published.append(self.board.publish(agent.name, agent.strategy, draft))
            except ConclusionRejected as exc:
                logger.info("conclusion by %s rejected: %s", agent.name, exc)
            except KernelarcError:
                logger.exception("conclusions.jsonl could not be written; dropping a conclusion")
        return published
