"""LLM proposers: strategy-specialized agents that ask an OpenAI-compatible endpoint for kernels.

Place in the flow: `make_team` builds an `LLMAgent` for every `kind: llm` entry of `agents.team`
through `make_llm_agent(spec, cfg.llm, seed)`; the agent builds its prompt from the
`AgentContext` (`prompt_builder`, templates in `prompts/`), asks the `LLMClient` that
`kernelarc.llm.make_llm_client` makes (`OpenAIChatClient` for `llm=openai`, `ReplayClient` for
`llm=replay`), parses the reply into a Solution (`reply_parser`) and returns a Proposal that
carries every exchange (`Proposal.llm`). The endpoint side (`kernelarc.llm`) knows nothing of
agents; this package is the only one that imports it from `kernelarc.agents`.
"""

from typing import Protocol

from kernelarc.agents.llm.agent import LLMAgent
from kernelarc.agents.llm.strategy_names import STRATEGIES, resolve_strategy
from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm import make_llm_client
from kernelarc.llm.usage import UsageLedger


class LLMAgentSpec(Protocol):
    """What `make_llm_agent` reads from a team entry (`AgentSpec` of `agents.team`)."""

    kind: str
    """`llm`."""
    strategy: str
    """One of STRATEGIES (or an alias resolve_strategy accepts)."""
    model: str | None
    """Model for this agent; None = llm.model."""
    name: str
    """Agent name; "" = `llm-<strategy>`."""


def make_llm_agent(
    spec: LLMAgentSpec,
    llm_config: LLMConfig,
    seed: int,
    *,
    ledger: UsageLedger | None = None,
) -> LLMAgent:
    """An `LLMAgent` for one team entry; pass one `ledger` to several agents to share totals.

    Raises:
        ConfigError: unknown strategy, no model, or an unusable `llm` config.
    """
    strategy = resolve_strategy(spec.strategy)
    name = spec.name or f"llm-{strategy}"
    model = spec.model or llm_config.model
    if not model:
        msg = f"agent {name}: no model; set llm.model or the agent's model in agents.team"
        raise ConfigError(msg)
    return LLMAgent(
        name=name,
        strategy=strategy,
        client=make_llm_client(llm_config, ledger=ledger),
        model=model,
        max_parse_retries=llm_config.max_parse_retries,
        seed=seed,
    )


__all__ = ["STRATEGIES", "LLMAgent", "LLMAgentSpec", "make_llm_agent", "resolve_strategy"]
