"""LLM proposers: strategy-specialized agents that ask an OpenAI-compatible endpoint for kernels.

Place in the flow: `make_team` builds an `LLMAgent` for every `kind: llm` entry of `agents.team`
through `make_llm_agent(spec, cfg.llm, seed)`; the agent builds its prompt from the
`AgentContext`, asks its `LLMClient` (`OpenAIChatClient` for `llm=openai`, `ReplayClient` for
`llm=replay`), parses the reply into a Solution and returns a Proposal that carries every
exchange (`Proposal.llm`). The `openai` SDK is imported only when an `llm=openai` client is made.
"""

from typing import Protocol

from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm.agent import LLMAgent
from kernelarc.llm.exchange import Completion, LLMClient
from kernelarc.llm.strategies import STRATEGIES, resolve_strategy
from kernelarc.llm.usage import Usage, UsageLedger, log_team_usage, team_usage


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


def make_llm_client(cfg: LLMConfig, *, ledger: UsageLedger | None = None) -> LLMClient:
    """The client `llm.kind` selects: `openai` (any OpenAI-compatible endpoint) or `replay`.

    Raises:
        ConfigError: the kind is `none` or unknown, or its settings are incomplete.
    """
    if cfg.kind == "openai":
        from kernelarc.llm.client import OpenAIChatClient  # the openai SDK takes a second

        return OpenAIChatClient(cfg, ledger=ledger)
    if cfg.kind == "replay":
        from kernelarc.llm.replay import ReplayClient

        if not cfg.replay_from:
            msg = "llm=replay needs llm.replay_from=RUN_DIR (a recorded LLM campaign's run dir)"
            raise ConfigError(msg)
        return ReplayClient(cfg.replay_from, max_retries=cfg.max_retries, ledger=ledger)
    if cfg.kind == "none":
        msg = (
            "agents.team has an llm agent but llm=none; use llm=openai llm.base_url=... "
            "llm.model=... (or llm=replay llm.replay_from=RUN_DIR)"
        )
        raise ConfigError(msg)
    msg = f"unknown llm.kind {cfg.kind!r}; valid kinds: none, openai, replay"
    raise ConfigError(msg)


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


__all__ = [
    "STRATEGIES",
    "Completion",
    "LLMAgent",
    "LLMAgentSpec",
    "LLMClient",
    "Usage",
    "UsageLedger",
    "log_team_usage",
    "make_llm_agent",
    "make_llm_client",
    "resolve_strategy",
    "team_usage",
]
