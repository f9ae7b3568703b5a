"""`LLMAgent`: a strategy-specialized proposer that asks an LLM for complete solutions.

Place in the flow: built by `make_llm_agent` (from `make_team` for `kind: llm` specs); the
campaign loop calls `propose(ctx)` and, after the attempt is judged, `conclude(attempt, ctx)`.

One proposal round: build the messages from the context, ask the client (which retries transient
endpoint failures), parse the reply; an unusable reply (malformed, invalid, or a candidate already
evaluated) is sent back with the parse error, up to `llm.max_parse_retries` times. Every exchange
is kept and stored on the next proposal the agent returns (`Proposal.llm`), so the failures
before a proposal travel with it into attempts.jsonl. An agent retires (returns None from then
on, with a warning) after `max_failed_rounds` rounds in a row without a usable candidate, or when
a replayed transcript runs out.
"""

import logging
from collections.abc import Sequence

from kernelarc.agents.context import AgentContext
from kernelarc.agents.llm.prompt_builder import (
    build_messages,
    own_incumbent,
    reask_message,
    visible_attempts,
)
from kernelarc.agents.llm.reply_parser import ParsedReply, ReplyFormatError, parse_reply
from kernelarc.agents.llm.strategy_names import resolve_strategy
from kernelarc.agents.proposals import stable_hash
from kernelarc.errors import LLMError
from kernelarc.llm.exchange import (
    UNUSABLE_REPLY,
    Completion,
    LLMClient,
    is_transport_failure,
)
from kernelarc.schema import Attempt, EvalStatus, Proposal, proposal_id_for
from kernelarc.schema.coordination import ChatMessage, ConclusionDraft, LLMExchange

logger = logging.getLogger(__name__)

MAX_FAILED_ROUNDS = 3
"""Proposal rounds in a row without a usable candidate before an agent retires."""


class LLMAgent:
    """Proposes LLM-written candidates under one strategy, with one model."""

    def __init__(
        self,
        *,
        name: str,
        strategy: str,
        client: LLMClient,
        model: str,
        max_parse_retries: int = 2,
        seed: int = 0,
        max_failed_rounds: int = MAX_FAILED_ROUNDS,
    ) -> None:
        """An agent named `name` owning `strategy` (any spelling `resolve_strategy` accepts).

        Raises:
            ConfigError: the strategy is unknown.
        """
        self.name = name
        self.strategy = resolve_strategy(strategy)
        self.model = model
        self.client = client
        self.usage = client.usage
        self.max_parse_retries = max_parse_retries
        self.max_failed_rounds = max_failed_rounds
        self._seed_base = seed * 1_000_003 + stable_hash(name)
        self._requests = 0
        self._pending: list[LLMExchange] = []
        self._issued: set[str] = set()
        self._drafts: dict[str, tuple[ConclusionDraft, ...]] = {}
        self._failed_rounds = 0
        self._retired = ""

    @property
    def retired(self) -> str:
        """Why the agent stopped proposing ("" while it is active)."""
        return self._retired

    def propose(self, ctx: AgentContext) -> Proposal | None:
        """The next LLM-written candidate, or None once the agent has retired."""
        while not self._retired:
            try:
                proposal = self._round(ctx)
            except LLMError as exc:
                self._retire(str(exc))
                return None
            if proposal is not None:
                self._failed_rounds = 0
                return proposal
            self._failed_rounds += 1
            if self._failed_rounds >= self.max_failed_rounds:
                self._retire(f"{self._failed_rounds} proposal rounds in a row gave no candidate")
        return None

    def restore(self, attempts: Sequence[Attempt]) -> None:
        """Take up a resumed campaign from this agent's recorded attempts: their candidates are
        never proposed again, request seeds go on after the recorded requests, their exchanges
        count in the usage totals, and a replaying client skips what they already served."""
        own = [a for a in attempts if a.proposal.agent == self.name]
        exchanges = [x for a in own for x in a.proposal.llm]
        self._issued.update(a.proposal.id for a in own)
        # At least one exchange per request: the recorded seeds are never reused.
        self._requests = max(self._requests, len(exchanges))
        for exchange in exchanges:
            self.usage.record(self.name, exchange, failed=is_transport_failure(exchange))
        skip = getattr(self.client, "skip", None)
        if callable(skip):
            skip(self.name, len(exchanges))

    def conclude(self, attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        """The conclusions the model attached to this attempt's reply, if the attempt passed."""
        drafts = self._drafts.pop(attempt.proposal.id, ())
        if attempt.proposal.agent != self.name or attempt.status != EvalStatus.PASSED:
            return []
        return list(drafts)

    def _round(self, ctx: AgentContext) -> Proposal | None:
        """One fresh request plus its re-asks; None when no usable candidate came back."""
        messages = build_messages(ctx, agent=self.name, strategy=self.strategy)
        skip = ctx.seen_ids | self._issued | {a.proposal.id for a in ctx.attempts}
        pool = visible_attempts(ctx)
        definition = ctx.problem.definition
        for ask in range(self.max_parse_retries + 1):
            completion = self._ask(messages)
            if not completion.ok:
                logger.warning(
                    "agent %s: no reply from the endpoint: %s", self.name, completion.error
                )
                return None
            try:
                parsed = parse_reply(
                    completion.reply,
                    problem=definition.name,
                    author=self.name,
                    op_family=definition.op_type or "",
                    evidence_pool=pool,
                )
                proposal_id = proposal_id_for(parsed.solution)
                if proposal_id in skip:
                    msg = (
                        f"that candidate ({proposal_id}) was already evaluated in this campaign; "
                        "propose a different kernel, not the same code renamed or reformatted"
                    )
                    raise ReplyFormatError(msg)
            except ReplyFormatError as exc:
                self._mark_unusable(str(exc))
                logger.info(
                    "agent %s: unusable reply (ask %d/%d): %s",
                    self.name,
                    ask + 1,
                    self.max_parse_retries + 1,
                    exc,
                )
                messages = [
                    *messages,
                    ChatMessage(role="assistant", content=completion.reply),
                    reask_message(str(exc)),
                ]
                continue
            return self._proposal(ctx, parsed, proposal_id)
        return None

    def _ask(self, messages: list[ChatMessage]) -> Completion:
        seed = (self._seed_base + self._requests) % 2**31
        self._requests += 1
        completion = self.client.complete(messages, model=self.model, agent=self.name, seed=seed)
        self._pending.extend(completion.exchanges)
        return completion

    def _mark_unusable(self, error: str) -> None:
        last = self._pending[-1]
        self._pending[-1] = last.model_copy(update={"error": UNUSABLE_REPLY + error})

    def _proposal(self, ctx: AgentContext, parsed: ParsedReply, proposal_id: str) -> Proposal:
        exchanges, self._pending = self._pending, []
        draft = ctx.draft
        incumbent = own_incumbent(ctx)
        if draft is not None:
            parent = draft.base.proposal.id if draft.base is not None else None
        else:
            parent = incumbent.proposal.id if incumbent is not None else None
        proposal = Proposal(
            id=proposal_id,
            agent=self.name,
            strategy=self.strategy,
            solution=parsed.solution,
            parent_id=parent,
            knobs={"languages": ",".join(str(x) for x in parsed.solution.spec.languages)},
            rationale=parsed.rationale,
            # The model that wrote it: the requested one live, the recorded one in a replay.
            model=exchanges[-1].model,
            draft=draft is not None,
            draft_source=draft.source if draft is not None else None,
            conclusions_seen=[c.id for c in ctx.conclusions],
            llm=exchanges,
        )
        self._issued.add(proposal_id)
        if parsed.conclusions:
            self._drafts[proposal_id] = parsed.conclusions
        for note in parsed.notes:
            logger.info("agent %s: %s", self.name, note)
        usage = self.usage.by_agent().get(self.name)
        logger.info(
            "agent %s: proposal %s after %d exchanges (%s); usage so far: %s",
            self.name,
            proposal_id,
            len(exchanges),
            parsed.rationale or "no rationale",
            usage.describe() if usage is not None else "none",
        )
        return proposal

    def _retire(self, reason: str) -> None:
        self._retired = reason
        logger.warning(
            "agent %s retires: %s (%d exchanges since its last proposal are stored with no "
            "attempt)",
            self.name,
            reason,
            len(self._pending),
        )
