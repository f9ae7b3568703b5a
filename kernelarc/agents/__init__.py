"""Offline proposers: the `Agent` protocol, its context and the team factory.

Place in the flow: the campaign loop calls `make_team(cfg.agents.team, cfg.seed)` once, then asks
each agent `propose(ctx)` for candidates until it returns None or the budget is spent. Agents
only write source text (they never import torch or triton); candidates run in the sandbox.
"""

from typing import Protocol

from kernelarc.agents.compiler_agent import CompilerAgent
from kernelarc.agents.context import AgentContext
from kernelarc.agents.triton_agent import TritonTemplateAgent
from kernelarc.errors import ConfigError
from kernelarc.schema import Proposal


class Agent(Protocol):
    """A proposer of candidate solutions for one problem."""

    name: str
    """Unique within a team (`compiler`, `triton_template`, `triton_template-2`, ...)."""
    strategy: str
    """The strategy it owns (`compiler`, `triton_template`)."""

    def propose(self, ctx: AgentContext) -> Proposal | None:
        """The next candidate, or None when the agent has nothing new for this problem."""
        ...


AGENT_KINDS: dict[str, type[CompilerAgent] | type[TritonTemplateAgent]] = {
    "compiler": CompilerAgent,
    "triton_template": TritonTemplateAgent,
}


def make_team(names: list[str], seed: int) -> list[Agent]:
    """One agent per kind in `names`; a repeated kind gets a numbered name (`compiler-2`).

    Raises:
        ConfigError: a kind is unknown or the list is empty.
    """
    if not names:
        msg = f"agents.team is empty; list one or more of {sorted(AGENT_KINDS)}"
        raise ConfigError(msg)
    team: list[Agent] = []
    counts: dict[str, int] = {}
    for kind in names:
        cls = AGENT_KINDS.get(kind)
        if cls is None:
            msg = f"unknown agent kind {kind!r} in agents.team; valid kinds: {sorted(AGENT_KINDS)}"
            raise ConfigError(msg)
        counts[kind] = counts.get(kind, 0) + 1
        name = kind if counts[kind] == 1 else f"{kind}-{counts[kind]}"
        team.append(cls(name=name, seed=seed))
    return team


__all__ = [
    "AGENT_KINDS",
    "Agent",
    "AgentContext",
    "CompilerAgent",
    "TritonTemplateAgent",
    "make_team",
]
