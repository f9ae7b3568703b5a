"""Coordination records: conclusions shared between agents, and LLM exchanges kept with proposals.

Place in the flow: agents publish `Conclusion`s after an attempt is judged (conclusions-only
shared memory: claims and evidence, never code); the campaign appends them to `conclusions.jsonl`
and shows the live ones to every agent. An LLM proposer stores every request/reply it made for a
proposal as `LLMExchange`s on the proposal, so `llm=replay` can reproduce a campaign offline.
"""

from typing import Literal, Self

from pydantic import Field, model_validator

from kernelarc.schema.base import RecordModel


class Evidence(RecordModel):
    """One measured fact a conclusion rests on."""

    attempt_index: int = Field(ge=0)
    """The attempt (its index in attempts.jsonl) that measured it."""
    proposal_id: str
    """That attempt's proposal id."""
    metric: str = "speedup"
    """What was measured (`speedup`, `latency_ms`, `status`)."""
    value: float | None = None
    """The measured value (None for a status-only fact)."""
    baseline: float | None = None
    """What it was compared with (e.g. the agent's incumbent before), if anything."""
    delta: float | None = None
    """Relative change value/baseline - 1, if both exist."""


class ConclusionScope(RecordModel):
    """Where a conclusion applies."""

    problem: str
    """Definition name it was measured on."""
    op_family: str = ""
    """Op family (the definition's op_type), so related problems can reuse it."""


class Conclusion(RecordModel):
    """A short, evidence-backed finding shared between agents (never code)."""

    id: str
    """`c-<n>`, unique within a campaign."""
    agent: str
    """Publishing agent."""
    strategy: str
    """Its strategy."""
    claim: str = Field(min_length=1, max_length=400)
    """The finding in one or two sentences of prose."""
    scope: ConclusionScope
    """Where it applies."""
    evidence: list[Evidence] = Field(min_length=1)
    """Measurements it rests on."""
    confidence: float = Field(ge=0.0, le=1.0)
    """Publisher's confidence in [0, 1]."""
    published_at: str
    """ISO time."""
    retracted: bool = False
    """True once its evidence failed confirmation or was flagged as a hack; then hidden."""
    retraction_reason: str = ""
    """Why it was retracted."""


class ConclusionDraft(RecordModel):
    """What an agent hands the shared memory; the board validates it, then assigns id and time."""

    claim: str
    """The finding in prose (no code: the board rejects code)."""
    evidence: list[Evidence]
    """Measurements it rests on (attempts of this campaign; checked against the record)."""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    """Confidence in [0, 1]."""
    op_family: str = ""
    """Scope beyond this problem (the definition's op_type), if any."""


class ConclusionEvent(RecordModel):
    """One line of `<run_dir>/conclusions.jsonl` (append-only; replayed in order to restore the
    board): a conclusion published, a conclusion retracted, or a draft rejected."""

    kind: Literal["published", "retracted", "rejected"]
    """What happened."""
    at: str
    """ISO time."""
    agent: str
    """The publishing agent (of the draft, or of the conclusion retracted)."""
    conclusion: Conclusion | None = None
    """`published`: the conclusion as published."""
    conclusion_id: str | None = None
    """`retracted`: the conclusion retracted."""
    reason: str = ""
    """`retracted`: why; `rejected`: every rule the draft broke."""
    claim: str = ""
    """`rejected`: the submitted claim (kept for analysis; never shown to agents)."""

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Self:
        if (self.kind == "published") != (self.conclusion is not None):
            msg = "a `published` event carries the conclusion, and only it"
            raise ValueError(msg)
        if (self.kind == "retracted") != (self.conclusion_id is not None):
            msg = "a `retracted` event names conclusion_id, and only it"
            raise ValueError(msg)
        if self.kind != "published" and not self.reason:
            msg = f"a `{self.kind}` event needs a reason"
            raise ValueError(msg)
        return self


class CoordinationSettings(RecordModel):
    """The coordination switches a campaign ran with (campaign.json), so arms can be told apart."""

    memory: bool
    """Conclusions-only shared memory on."""
    guard: bool
    """Benchmark guard on (False: naive acceptance)."""
    peer_state: bool
    """Read-only peer snapshots on."""
    drafting: bool
    """Plateau-triggered drafting on."""
    plateau_patience: int
    """Flat attempts before drafting fires."""
    plateau_min_gain: float
    """Relative gain that counts as progress."""
    draft_from: str
    """`global_best` or `reference`."""
    max_conclusions: int
    """Live conclusions shown per context."""


class TeamMember(RecordModel):
    """One agent of the team as it ran (campaign.json)."""

    name: str
    """Agent name."""
    strategy: str
    """Strategy it owns."""
    kind: str = ""
    """Implementation kind (`tiling`, `llm`, ...; "" for a team passed in code)."""
    model: str | None = None
    """LLM model, None for an offline agent."""


class ChatMessage(RecordModel):
    """One chat message sent to or received from an LLM."""

    role: Literal["system", "user", "assistant"]
    """Chat role."""
    content: str
    """Message text."""


class LLMExchange(RecordModel):
    """One request to an OpenAI-compatible endpoint and what came back."""

    model: str
    """Model name sent to the endpoint."""
    messages: list[ChatMessage]
    """The request's messages."""
    reply: str = ""
    """The assistant's reply text ("" when the request failed)."""
    prompt_tokens: int = 0
    """Tokens in the request, as the endpoint reported."""
    completion_tokens: int = 0
    """Tokens in the reply."""
    cost_usd: float = 0.0
    """Cost from the configured per-token prices."""
    latency_s: float = 0.0
    """Request to reply."""
    error: str = ""
    """Transport/HTTP/parse error text of this exchange, if any."""
