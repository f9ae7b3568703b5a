"""`llm=replay`: answer LLM agents from the transcripts of a recorded campaign, with no endpoint.

Place in the flow: `make_llm_agent` builds a `ReplayClient` when `llm.kind` is `replay`; it reads
`<llm.replay_from>/attempts.jsonl`, where every proposal carries the exchanges made for it
(`Proposal.llm`). Each agent is served its own recorded exchanges in order, whatever the prompt
now says (measured numbers differ between runs, so prompts do too), and the agent parses them
as before: the same replies give the same candidates. A recorded transport failure is served
again as a failure, up to `llm.max_retries + 1` in a row as the live client would, so the agent
takes the same path. Replayed exchanges keep the recorded reply and token counts, carry the new
request's messages, and cost nothing. Replay with the same team and `llm.*` settings as the
recorded run (its `config.yaml`).
"""

import logging
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from kernelarc.errors import ConfigError, LLMError, TrackingError
from kernelarc.llm.exchange import Completion, is_transport_failure
from kernelarc.llm.usage import UsageLedger
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema.coordination import ChatMessage, LLMExchange

logger = logging.getLogger(__name__)


class ReplayExhausted(LLMError):
    """An agent asked for more exchanges than its recorded transcript holds."""


def load_transcripts(run_dir: Path) -> dict[str, list[LLMExchange]]:
    """Every agent's recorded exchanges, in the order the agent made them.

    An agent's proposals are evaluated one after another in its own thread, so its attempts'
    order in attempts.jsonl is the order of its proposals.

    Raises:
        ConfigError: the run dir has no readable attempts.jsonl, or no LLM exchanges in it.
    """
    path = run_dir / ATTEMPTS_FILE
    if not path.is_file():
        msg = (
            f"llm.replay_from={run_dir}: no {ATTEMPTS_FILE} there; point it at the run dir of an "
            "LLM campaign (outputs/<name>/<time>)"
        )
        raise ConfigError(msg)
    try:
        attempts = read_attempts(path)
    except TrackingError as exc:
        msg = f"llm.replay_from={run_dir}: {exc}"
        raise ConfigError(msg) from exc
    transcripts: dict[str, list[LLMExchange]] = {}
    for attempt in sorted(attempts, key=lambda a: a.index):
        if attempt.proposal.llm:
            transcripts.setdefault(attempt.proposal.agent, []).extend(attempt.proposal.llm)
    if not transcripts:
        msg = (
            f"llm.replay_from={run_dir}: {path.name} holds {len(attempts)} attempts but no LLM "
            "exchanges (Proposal.llm is empty everywhere); was it a campaign with LLM agents?"
        )
        raise ConfigError(msg)
    return transcripts


class ReplayClient:
    """Serves recorded exchanges per agent, in order; no network."""

    def __init__(
        self, run_dir: str | Path, *, max_retries: int, ledger: UsageLedger | None = None
    ) -> None:
        """Load the transcripts of `run_dir`.

        Raises:
            ConfigError: see `load_transcripts`.
        """
        self.run_dir = Path(run_dir)
        self.usage = ledger if ledger is not None else UsageLedger()
        self._max_tries = max_retries + 1
        self._lock = threading.Lock()
        transcripts = load_transcripts(self.run_dir)
        self._queues = {agent: deque(items) for agent, items in transcripts.items()}
        self._recorded = {agent: len(items) for agent, items in transcripts.items()}
        logger.info(
            "replaying LLM exchanges of %s: %s",
            self.run_dir,
            ", ".join(f"{a} {n}" for a, n in sorted(self._recorded.items())),
        )

    def skip(self, agent: str, exchanges: int) -> None:
        """Drop the first `exchanges` of `agent`'s transcript: a resumed replay goes on after
        what its recorded attempts already hold."""
        with self._lock:
            queue = self._queues.get(agent)
            for _ in range(min(exchanges, len(queue) if queue else 0)):
                assert queue is not None
                queue.popleft()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        agent: str,
        seed: int | None = None,
    ) -> Completion:
        """The agent's next recorded reply, preceded by the failures recorded before it.

        Raises:
            ReplayExhausted: the agent's transcript has nothing left.
        """
        with self._lock:
            queue = self._queues.get(agent)
            if not queue:
                msg = (
                    f"replay of {self.run_dir}: agent {agent!r} has no recorded exchange left "
                    f"(it made {self._recorded.get(agent, 0)} in the recorded run); the replay "
                    "asked for more than was recorded"
                )
                raise ReplayExhausted(msg)
            served: list[LLMExchange] = []
            while queue and len(served) < self._max_tries:
                recorded = queue.popleft()
                served.append(self._replayed(recorded, messages))
                if not is_transport_failure(recorded):
                    break
        for exchange in served:
            self.usage.record(agent, exchange, failed=is_transport_failure(exchange))
        return Completion(tuple(served))

    @staticmethod
    def _replayed(recorded: LLMExchange, messages: Sequence[ChatMessage]) -> LLMExchange:
        """The recorded answer to the request made now; the agent judges the reply again."""
        if list(messages) != recorded.messages:
            logger.debug("replayed request differs from the recorded one (numbers differ)")
        error = recorded.error if is_transport_failure(recorded) else ""
        return recorded.model_copy(
            update={"messages": list(messages), "error": error, "cost_usd": 0.0, "latency_s": 0.0}
        )
