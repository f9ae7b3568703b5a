"""Proposers: the `Agent` protocol, its context and the team factory.

Place in the flow: the campaign loop calls `make_team(cfg.agents.team, cfg.seed, llm=cfg.llm)`
once, then asks each agent `propose(ctx)` for candidates until it returns None or the budget is
spent, and (shared memory on) `conclude(attempt, ctx)` after each of its attempts is judged; a
resumed campaign first calls `restore(attempts)` on agents that have it.
The shared parts sit here (`context.py`: what an agent sees; `proposals.py`: its candidate as a
Proposal; `knob_search.py`, `knob_findings.py`: knob spaces and how offline agents phrase what
they found); the proposers sit in one sub-package per kind: `strategy` (the offline strategy
agents and the compiler agent), `triton` (the Triton template library and its agent) and `llm`
(the LLM agents, which reach their endpoint through `kernelarc.llm`). Offline agents only write
source text (they never import torch or triton); the `openai` SDK is imported only when an
`llm=openai` client is made.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kernelarc.agents.context import AgentContext, DraftOrder, PeerSnapshot
from kernelarc.agents.llm import make_llm_agent
from kernelarc.agents.strategy import (
    CompilerAgent,
    FusionAgent,
    LibraryAgent,
    MemoryAgent,
    PipeliningAgent,
    PrecisionAgent,
    TilingAgent,
)
from kernelarc.agents.triton import TritonTemplateAgent
from kernelarc.config import TEAM_KINDS, AgentSpec, team_member
from kernelarc.errors import ConfigError
from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt, Proposal
from kernelarc.schema.coordination import ConclusionDraft

if TYPE_CHECKING:
    from kernelarc.config import LLMConfig


class Agent(Protocol):
    """A proposer of candidate solutions for one problem."""

    name: str
    """Unique within a team (`tiling`, `compiler`, `llm-memory`, `tiling-2`, ...)."""
    strategy: str
    """The strategy it owns (`tiling`, `memory`, ..., `compiler`, `triton_template`)."""

    def propose(self, ctx: AgentContext) -> Proposal | None:
        """The next candidate, or None when the agent has nothing new for this problem."""
        ...


@runtime_checkable
class ConcludingAgent(Protocol):
    """An agent that publishes findings to the shared memory (the optional `conclude` hook)."""

    def conclude(self, attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        """Findings from one of its own judged attempts (prose claims with evidence, no code);
        called only with shared memory on. Drafts the board rejects are logged and dropped."""
        ...


@runtime_checkable
class AnchoringAgent(Protocol):
    """An agent with an anchor proposal (the optional `is_anchor` hook): the reference as-is,
    which the campaign judges without waiting for earlier agents' proposals of its round
    (`campaign/proposal_order.py`). It needs no tracing, so it uses the timed slot while the
    Triton agents trace, instead of leaving it idle for up to ORDER_WAIT_S."""

    def is_anchor(self, proposal: Proposal) -> bool:
        """True for this agent's anchor proposal."""
        ...


@runtime_checkable
class LeadingAgent(Protocol):
    """An agent that can say, before proposing, that its first candidate is the likeliest
    winner on a problem (the optional `leads` hook): the campaign then gives it the first place
    in the team's slot order, after the anchors (`campaign/proposal_order.lead_first`)."""

    def leads(self, problem: Problem, device: str) -> bool:
        """True when this agent's candidates should be judged before its teammates'."""
        ...


@runtime_checkable
class ResumableAgent(Protocol):
    """An agent with state its context cannot give back (the optional `restore` hook).

    Offline agents need none: everything they search from (anchors, cursors, random draws) is
    derived from `AgentContext.attempts` and `seen_ids`, so a resumed one continues its search.
    """

    def restore(self, attempts: Sequence[Attempt]) -> None:
        """Take up a resumed campaign: `attempts` are this agent's recorded attempts, oldest
        first; called once, before its first `propose`."""
        ...


OfflineAgent = (
    CompilerAgent
    | TritonTemplateAgent
    | TilingAgent
    | MemoryAgent
    | FusionAgent
    | PipeliningAgent
    | PrecisionAgent
    | LibraryAgent
)
AGENT_KINDS: dict[str, type[OfflineAgent]] = {
    "tiling": TilingAgent,
    "memory": MemoryAgent,
    "fusion": FusionAgent,
    "pipelining": PipeliningAgent,
    "precision": PrecisionAgent,
    "library": LibraryAgent,
    "compiler": CompilerAgent,
    "triton_template": TritonTemplateAgent,
}
"""Offline kinds of `agents.team`; `llm` is the ninth kind (`kernelarc.agents.llm`)."""


def make_team(
    specs: list[AgentSpec | str], seed: int, llm: "LLMConfig | None" = None
) -> list[Agent]:
    """One agent per spec; unnamed agents of a repeated kind get numbered names (`tiling-2`).

    Args:
        specs: `agents.team`; a string is a short form (`compiler`, `llm:tiling`: see
            `kernelarc.config.team_member`).
        seed: the campaign seed (each agent derives its own order from it and its name).
        llm: the `llm` config group, for `kind: llm` members.

    Raises:
        ConfigError: the list is empty, a kind is unknown, a name repeats, an offline member
            names another strategy or a model, or an `llm` member has no strategy or cannot be
            built.
    """
    if not specs:
        msg = f"agents.team is empty; list one or more of {sorted(TEAM_KINDS)}"
        raise ConfigError(msg)
    team: list[Agent] = []
    counts: dict[str, int] = {}
    for index, item in enumerate(specs):
        spec = team_member(item, index)
        base = spec.name or (f"llm-{spec.strategy}" if spec.kind == "llm" else spec.kind)
        counts[base] = counts.get(base, 0) + 1
        name = base if counts[base] == 1 or spec.name else f"{base}-{counts[base]}"
        if any(agent.name == name for agent in team):
            msg = f"agents.team: two members are named {name!r}; give each a unique `name`"
            raise ConfigError(msg)
        team.append(_make_agent(spec, name, seed, llm))
    return team


def _make_agent(spec: AgentSpec, name: str, seed: int, llm: "LLMConfig | None") -> Agent:
    if spec.kind == "llm":
        return _make_llm_agent(AgentSpec(spec.kind, spec.strategy, spec.model, name), seed, llm)
    cls = AGENT_KINDS.get(spec.kind)
    if cls is None:
        valid = sorted([*AGENT_KINDS, "llm"])
        msg = f"unknown agent kind {spec.kind!r} in agents.team; valid kinds: {valid}"
        raise ConfigError(msg)
    if spec.strategy and spec.strategy != cls.strategy:
        msg = (
            f"agents.team member {name!r}: the offline kind {spec.kind!r} owns strategy "
            f"{cls.strategy!r}, not {spec.strategy!r}; use `kind: llm` for another strategy"
        )
        raise ConfigError(msg)
    if spec.model is not None:
        msg = f"agents.team member {name!r}: `model` is for `kind: llm` only (kind {spec.kind!r})"
        raise ConfigError(msg)
    return cls(name=name, seed=seed)


def _make_llm_agent(spec: AgentSpec, seed: int, llm: "LLMConfig | None") -> Agent:
    """`make_llm_agent(spec, llm, seed)`, after checking that an endpoint is configured."""
    if llm is None or llm.kind == "none":
        msg = (
            f"agents.team member {spec.name!r} is an LLM agent but llm=none; choose an endpoint "
            "with llm=openai (or llm=replay), or an offline team with agents=offline"
        )
        raise ConfigError(msg)
    return make_llm_agent(spec, llm, seed)


__all__ = [
    "AGENT_KINDS",
    "Agent",
    "AgentContext",
    "AnchoringAgent",
    "CompilerAgent",
    "ConcludingAgent",
    "DraftOrder",
    "FusionAgent",
    "LeadingAgent",
    "LibraryAgent",
    "MemoryAgent",
    "PeerSnapshot",
    "PipeliningAgent",
    "PrecisionAgent",
    "ResumableAgent",
    "TilingAgent",
    "TritonTemplateAgent",
    "make_team",
]
