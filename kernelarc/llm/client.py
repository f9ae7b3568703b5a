"""The chat client of LLM agents: the `openai` SDK against any OpenAI-compatible endpoint.

Place in the flow: `LLMAgent.propose` calls `OpenAIChatClient.complete(messages, ...)`, which
sends one chat completion request and retries it on 429, 5xx, 408, timeouts and connection
errors with exponential backoff and jitter (a `Retry-After` header is honoured), up to
`llm.max_retries` times. The SDK's own retries are off (`max_retries=0`), so every request is
visible here and recorded as an `LLMExchange`. A process-wide semaphore per endpoint bounds the
requests in flight (`llm.concurrency`); backoff sleeps happen outside it.

API key: read from the environment variable named by `llm.api_key_env`. When it is unset and
`llm.base_url` is set (a local vLLM, SGLang or Ollama server, which ignore keys), a placeholder is
sent; when it is unset and base_url is not (OpenAI's own API), that is a ConfigError.
"""

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import openai

from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm.exchange import Completion
from kernelarc.llm.usage import UsageLedger, exchange_cost
from kernelarc.schema.coordination import ChatMessage, LLMExchange

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when `llm.base_url` is null."""
PLACEHOLDER_API_KEY = "kernelarc-no-key"
"""Sent to a configured base_url when the key variable is unset (local servers ignore keys)."""
RETRY_AFTER_CAP_S = 60.0
"""A longer Retry-After is cut to this (and logged): a campaign must not stall for an hour."""
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_ERROR_CHARS = 600

_GATES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_GATES_LOCK = threading.Lock()


def concurrency_gate(base_url: str | None, concurrency: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of an endpoint: every client of it shares one limit."""
    key = (base_url or OPENAI_BASE_URL, concurrency)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = threading.BoundedSemaphore(concurrency)
        return gate


def resolve_api_key(cfg: LLMConfig) -> str:
    """The API key from `$<llm.api_key_env>` (see the module docstring for the unset case).

    Raises:
        ConfigError: the variable is unset and no base_url is configured.
    """
    key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    if key:
        return key
    if cfg.base_url:
        logger.info(
            "$%s is not set; sending a placeholder API key to %s (local endpoints ignore it)",
            cfg.api_key_env,
            cfg.base_url,
        )
        return PLACEHOLDER_API_KEY
    msg = (
        f"llm.api_key_env names ${cfg.api_key_env}, which is not set: export "
        f"{cfg.api_key_env or 'OPENAI_API_KEY'}=<your key>, or point llm.base_url at a local "
        "OpenAI-compatible server (vLLM, SGLang, Ollama)"
    )
    raise ConfigError(msg)


def check_llm_config(cfg: LLMConfig) -> None:
    """Validate the numbers an LLM client depends on.

    Raises:
        ConfigError: a value is out of range; the message names the field.
    """
    problems = []
    if cfg.concurrency < 1:
        problems.append(f"llm.concurrency must be >= 1 (got {cfg.concurrency})")
    if cfg.max_retries < 0:
        problems.append(f"llm.max_retries must be >= 0 (got {cfg.max_retries})")
    if cfg.max_parse_retries < 0:
        problems.append(f"llm.max_parse_retries must be >= 0 (got {cfg.max_parse_retries})")
    if cfg.timeout_s <= 0:
        problems.append(f"llm.timeout_s must be > 0 (got {cfg.timeout_s})")
    if cfg.max_tokens < 1:
        problems.append(f"llm.max_tokens must be >= 1 (got {cfg.max_tokens})")
    if min(cfg.prompt_price_per_mtok, cfg.completion_price_per_mtok) < 0:
        problems.append("llm.*_price_per_mtok must be >= 0")
    if problems:
        raise ConfigError("; ".join(problems))


class OpenAIChatClient:
    """Chat completions with bounded retries, a shared concurrency limit and usage accounting."""

    def __init__(
        self,
        cfg: LLMConfig,
        *,
        ledger: UsageLedger | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """A client for `cfg.base_url` (OpenAI's API when None).

        `sleep` waits between retries (tests pass one that records the delays it is asked for).

        Raises:
            ConfigError: a config value is invalid or the API key is missing (see module doc).
        """
        check_llm_config(cfg)
        self.cfg = cfg
        self.usage = ledger if ledger is not None else UsageLedger()
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._jitter = random.Random()
        self._gate = concurrency_gate(cfg.base_url, cfg.concurrency)
        self._sdk = openai.OpenAI(
            base_url=cfg.base_url,
            api_key=resolve_api_key(cfg),
            max_retries=0,
            timeout=cfg.timeout_s,
        )

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        agent: str,
        seed: int | None = None,
    ) -> Completion:
        """Send `messages`, retrying transient failures; every request is one exchange."""
        exchanges: list[LLMExchange] = []
        for attempt in range(self.cfg.max_retries + 1):
            exchange, retryable, retry_after = self._request(messages, model, seed)
            self.usage.record(agent, exchange, failed=bool(exchange.error))
            exchanges.append(exchange)
            if not exchange.error:
                break
            if not retryable or attempt == self.cfg.max_retries:
                logger.warning(
                    "agent %s: LLM request failed after %d tries: %s",
                    agent,
                    attempt + 1,
                    exchange.error,
                )
                break
            delay = self._delay(attempt, retry_after)
            logger.info(
                "agent %s: LLM request failed (%s); retry %d/%d in %.2fs",
                agent,
                exchange.error[:200],
                attempt + 1,
                self.cfg.max_retries,
                delay,
            )
            self._sleep(delay)
        return Completion(tuple(exchanges))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Retry-After if the server sent one, else exponential backoff with jitter."""
        if retry_after is not None:
            if retry_after > RETRY_AFTER_CAP_S:
                logger.warning(
                    "server asked to retry after %.0fs; waiting %.0fs",
                    retry_after,
                    RETRY_AFTER_CAP_S,
                )
            return min(max(retry_after, 0.0), RETRY_AFTER_CAP_S)
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2.0**attempt)
        return ceiling * self._jitter.uniform(0.5, 1.0)

    def _request(
        self, messages: Sequence[ChatMessage], model: str, seed: int | None
    ) -> tuple[LLMExchange, bool, float | None]:
        """One request: (exchange, retryable on failure, server's Retry-After in seconds)."""
        kwargs: dict[str, Any] = {"temperature": self.cfg.temperature}
        # OpenAI's own API takes max_completion_tokens (newer models reject max_tokens); vLLM,
        # SGLang and Ollama all understand max_tokens.
        cap = "max_tokens" if self.cfg.base_url else "max_completion_tokens"
        kwargs[cap] = self.cfg.max_tokens
        if seed is not None:
            kwargs["seed"] = seed
        base = LLMExchange(model=model, messages=list(messages))
        retry_after: float | None = None
        with self._gate:
            start = time.monotonic()  # after the wait for a slot: latency is the endpoint's
            try:
                response = self._sdk.chat.completions.create(
                    model=model,
                    messages=[{"role": m.role, "content": m.content} for m in messages],  # type: ignore[misc]
                    **kwargs,
                )
            except openai.APIStatusError as exc:
                error = f"HTTP {exc.status_code}: {_short(_status_message(exc))}"
                if exc.status_code == 401:
                    error += f" (is ${self.cfg.api_key_env} the right key for this endpoint?)"
                retryable = exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500
                retry_after = _retry_after(exc.response.headers)
            except openai.APITimeoutError:
                error = f"timeout: no reply within llm.timeout_s={self.cfg.timeout_s}s"
                retryable = True
            except openai.APIConnectionError as exc:
                error = f"connection error: {_short(str(exc.__cause__ or exc))}"
                retryable = True
            except openai.APIError as exc:  # an unparsable body and the like: do not hammer it
                error, retryable = f"{type(exc).__name__}: {_short(str(exc))}", False
            else:
                error, retryable = "", False
        latency = _since(start)
        if error:
            return (
                base.model_copy(update={"error": error, "latency_s": latency}),
                retryable,
                retry_after,
            )
        if not response.choices:
            error = "the endpoint answered with no choices"
            return base.model_copy(update={"error": error, "latency_s": latency}), True, None
        usage = response.usage
        prompt_tokens = usage.prompt_tokens if usage else 0
        completion_tokens = usage.completion_tokens if usage else 0
        exchange = base.model_copy(
            update={
                "reply": response.choices[0].message.content or "",
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost_usd": exchange_cost(prompt_tokens, completion_tokens, self.cfg),
                "latency_s": latency,
            }
        )
        return exchange, False, None


def _retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), if present."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def _status_message(exc: openai.APIStatusError) -> str:
    """The server's own error message when its body has one (`{"error": {"message": ...}}`)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return exc.message


def _since(start: float) -> float:
    return round(time.monotonic() - start, 4)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."
