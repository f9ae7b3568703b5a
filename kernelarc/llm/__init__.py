"""The LLM endpoint: clients that answer chat requests, and what their requests cost.

Place in the flow: an LLM agent (`kernelarc.agents.llm`) gets its `LLMClient` from
`make_llm_client(cfg.llm)`: `OpenAIChatClient` (`client.py`, any OpenAI-compatible endpoint) for
`llm=openai`, `ReplayClient` (`replay.py`, the transcripts of a recorded campaign) for
`llm=replay`. Each `complete` call returns a `Completion` (`exchange.py`) holding every HTTP
exchange it made, counted in a `UsageLedger` (`usage.py`). Nothing here builds prompts or reads
replies, and nothing imports `kernelarc.agents`: the agents sit above their endpoint. The `openai`
SDK is imported only when an `llm=openai` client is made.
"""

from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm.exchange import Completion, LLMClient
from kernelarc.llm.usage import Usage, UsageLedger, log_team_usage, team_usage


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


__all__ = [
    "Completion",
    "LLMClient",
    "Usage",
    "UsageLedger",
    "log_team_usage",
    "make_llm_client",
    "team_usage",
]
