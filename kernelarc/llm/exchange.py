"""What one chat completion call returns: every HTTP exchange it made, retries included.

Place in the flow: `OpenAIChatClient.complete` and `ReplayClient.complete` return a `Completion`;
the LLM agent keeps its exchanges on the proposal (`Proposal.llm`), so attempts.jsonl holds the
whole transcript and `llm=replay` can serve it again.

An exchange's `error` is either a transport failure (HTTP status, timeout, connection; `reply` is
"") or, when the agent could not use the reply, a text starting with `UNUSABLE_REPLY`. Replay tells
the two apart by that prefix: transport failures are served again as failures, unusable replies
are served again as replies (the agent finds them unusable again).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kernelarc.llm.usage import UsageLedger
from kernelarc.schema.coordination import ChatMessage, LLMExchange

UNUSABLE_REPLY = "unusable reply: "
"""Prefix of `LLMExchange.error` when the endpoint answered but the agent could not use it."""


def is_transport_failure(exchange: LLMExchange) -> bool:
    """True when the endpoint gave no reply (HTTP error, timeout, connection failure)."""
    return bool(exchange.error) and not exchange.error.startswith(UNUSABLE_REPLY)


@dataclass(frozen=True)
class Completion:
    """The outcome of one `complete` call: its exchanges in order, the last one decisive."""

    exchanges: tuple[LLMExchange, ...]
    """Every request made (failed retries first); never empty."""

    @property
    def ok(self) -> bool:
        """True when the last exchange returned a reply."""
        return bool(self.exchanges) and not is_transport_failure(self.exchanges[-1])

    @property
    def reply(self) -> str:
        """The reply text ("" when not ok)."""
        return self.exchanges[-1].reply if self.ok else ""

    @property
    def error(self) -> str:
        """The last failure's text ("" when ok)."""
        return "" if self.ok or not self.exchanges else self.exchanges[-1].error


class LLMClient(Protocol):
    """Something that answers chat requests: `OpenAIChatClient` or `ReplayClient`."""

    usage: UsageLedger
    """Where its requests are counted."""

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        agent: str,
        seed: int | None = None,
    ) -> Completion:
        """Answer `messages` for `agent`; failures are exchanges with `error` set."""
        ...
