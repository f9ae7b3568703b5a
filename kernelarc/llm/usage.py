"""Token and cost accounting of LLM requests, per agent and per campaign.

Place in the flow: every exchange a client makes is recorded in a `UsageLedger` (thread-safe; one
per agent unless a ledger is shared); `team_usage` sums the ledgers of a team, and
`log_team_usage` writes the per-agent and campaign totals to the log at the end of a campaign.
Costs come from the configured per-million-token prices (`llm.prompt_price_per_mtok`,
`llm.completion_price_per_mtok`); replayed exchanges cost nothing.
"""

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kernelarc.config import LLMConfig
from kernelarc.schema.coordination import LLMExchange

logger = logging.getLogger(__name__)


def exchange_cost(prompt_tokens: int, completion_tokens: int, cfg: LLMConfig) -> float:
    """USD cost of one request at the configured prices."""
    return (
        prompt_tokens * cfg.prompt_price_per_mtok
        + completion_tokens * cfg.completion_price_per_mtok
    ) / 1e6


@dataclass(frozen=True)
class Usage:
    """Totals over a set of requests."""

    requests: int = 0
    """Requests sent (retries included)."""
    failed_requests: int = 0
    """Requests that got no reply (HTTP error, timeout, connection failure)."""
    prompt_tokens: int = 0
    """Prompt tokens the endpoint reported."""
    completion_tokens: int = 0
    """Completion tokens the endpoint reported."""
    cost_usd: float = 0.0
    """Cost at the configured prices."""

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            requests=self.requests + other.requests,
            failed_requests=self.failed_requests + other.failed_requests,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    @classmethod
    def of(cls, exchange: LLMExchange, *, failed: bool) -> "Usage":
        """The usage of one exchange."""
        return cls(
            requests=1,
            failed_requests=int(failed),
            prompt_tokens=exchange.prompt_tokens,
            completion_tokens=exchange.completion_tokens,
            cost_usd=exchange.cost_usd,
        )

    def describe(self) -> str:
        """One line for the log."""
        return (
            f"{self.requests} requests ({self.failed_requests} failed), "
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, "
            f"${self.cost_usd:.4f}"
        )


class UsageLedger:
    """Thread-safe running totals per agent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_agent: dict[str, Usage] = {}

    def record(self, agent: str, exchange: LLMExchange, *, failed: bool) -> None:
        """Add one exchange made on behalf of `agent`."""
        with self._lock:
            self._by_agent[agent] = self._by_agent.get(agent, Usage()) + Usage.of(
                exchange, failed=failed
            )

    def by_agent(self) -> dict[str, Usage]:
        """A copy of the per-agent totals."""
        with self._lock:
            return dict(self._by_agent)

    def total(self) -> Usage:
        """The sum over every agent."""
        return sum(self.by_agent().values(), Usage())


def team_usage(team: Iterable[object]) -> tuple[dict[str, Usage], Usage]:
    """Per-agent and campaign totals over the ledgers of a team's LLM agents (others are skipped).

    A ledger shared by several agents is counted once.
    """
    ledgers: dict[int, UsageLedger] = {}
    for agent in team:
        ledger = getattr(agent, "usage", None)
        if isinstance(ledger, UsageLedger):
            ledgers[id(ledger)] = ledger
    per_agent: dict[str, Usage] = {}
    for ledger in ledgers.values():
        for name, usage in ledger.by_agent().items():
            per_agent[name] = per_agent.get(name, Usage()) + usage
    return per_agent, sum(per_agent.values(), Usage())


def log_team_usage(team: Iterable[object]) -> Usage:
    """Log each LLM agent's usage and the campaign total; return the total."""
    per_agent, total = team_usage(team)
    for name, usage in sorted(per_agent.items()):
        logger.info("LLM usage of agent %s: %s", name, usage.describe())
    if per_agent:
        logger.info("LLM usage of the campaign: %s", total.describe())
    return total
