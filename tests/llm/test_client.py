"""OpenAIChatClient against a real local OpenAI-compatible server: retries and backoff, Retry-After,
timeouts, the API key rule, the shared concurrency limit, and token/cost accounting."""

import socket
import threading

import pytest
from openai_server import KEY_ENV, ChatServer, config_for, reply, slow, status

from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm import UsageLedger, team_usage
from kernelarc.llm.client import PLACEHOLDER_API_KEY, OpenAIChatClient
from kernelarc.schema.coordination import ChatMessage

MESSAGES = [
    ChatMessage(role="system", content="You write kernels."),
    ChatMessage(role="user", content="Write one."),
]


class RecordingSleep:
    """Records the delays the client asks for, without waiting (the server's hits are the
    ground truth of how many requests were made)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _client(server: ChatServer, sleep: RecordingSleep | None = None, **overrides: object):
    return OpenAIChatClient(
        config_for(server, **overrides),
        backoff_base_s=0.01,
        backoff_max_s=0.04,
        sleep=sleep or RecordingSleep(),
    )


def test_transient_failures_are_retried_with_backoff_and_retry_after(
    chat_server: ChatServer,
) -> None:
    chat_server.push(status(429, retry_after="0.25"), status(500), status(503), reply("done"))
    sleep = RecordingSleep()
    completion = _client(chat_server, sleep).complete(MESSAGES, model="m", agent="a")
    assert chat_server.hits == 4
    assert completion.ok and completion.reply == "done"
    errors = [e.error for e in completion.exchanges]
    assert errors[0].startswith("HTTP 429") and errors[1].startswith("HTTP 500")
    assert errors[2].startswith("HTTP 503") and errors[3] == ""
    # Retry-After honoured exactly; then exponential backoff with jitter: retry k (from 0) waits
    # between 0.5 and 1 x min(base * 2^k, max) = 0.01 * 2^k here.
    assert sleep.delays[0] == pytest.approx(0.25)
    assert 0.01 <= sleep.delays[1] <= 0.02
    assert 0.02 <= sleep.delays[2] <= 0.04
    assert all(e.messages == MESSAGES for e in completion.exchanges)


def test_retries_stop_at_max_retries(chat_server: ChatServer) -> None:
    chat_server.push(*[status(500)] * 5)
    completion = _client(chat_server, max_retries=2).complete(MESSAGES, model="m", agent="a")
    assert chat_server.hits == 3
    assert not completion.ok and completion.error.startswith("HTTP 500")
    assert len(completion.exchanges) == 3


def test_client_errors_are_not_retried(chat_server: ChatServer) -> None:
    chat_server.push(status(400), reply("never asked for"))
    completion = _client(chat_server).complete(MESSAGES, model="m", agent="a")
    assert chat_server.hits == 1
    assert not completion.ok and completion.error.startswith("HTTP 400")


def test_a_reply_slower_than_the_timeout_is_retried(chat_server: ChatServer) -> None:
    chat_server.push(slow("too late", 2.0), reply("in time"))
    completion = _client(chat_server, timeout_s=0.4).complete(MESSAGES, model="m", agent="a")
    assert chat_server.hits == 2
    assert completion.exchanges[0].error.startswith("timeout")
    assert completion.reply == "in time"


def test_an_unreachable_endpoint_is_a_connection_error_after_retries() -> None:
    with socket.socket() as probe:  # a free port with nothing listening once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = LLMConfig(
        kind="openai", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=KEY_ENV, max_retries=2
    )
    sleep = RecordingSleep()
    completion = OpenAIChatClient(cfg, backoff_base_s=0.01, sleep=sleep).complete(
        MESSAGES, model="m", agent="a"
    )
    assert not completion.ok and completion.error.startswith("connection error")
    assert len(completion.exchanges) == 3 and len(sleep.delays) == 2


def test_the_key_comes_from_the_named_variable(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    chat_server.push(reply("ok"))
    _client(chat_server).complete(MESSAGES, model="m", agent="a")
    assert chat_server.auth_headers == ["Bearer sk-test-123"]


def test_a_local_endpoint_gets_a_placeholder_key_when_the_variable_is_unset(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    chat_server.push(reply("ok"))
    assert _client(chat_server).complete(MESSAGES, model="m", agent="a").ok
    assert chat_server.auth_headers == [f"Bearer {PLACEHOLDER_API_KEY}"]


def test_openai_without_its_key_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    cfg = LLMConfig(kind="openai", base_url=None, api_key_env=KEY_ENV)
    with pytest.raises(ConfigError, match=rf"\${KEY_ENV}, which is not set"):
        OpenAIChatClient(cfg)


def test_bad_numbers_are_config_errors(chat_server: ChatServer) -> None:
    with pytest.raises(ConfigError, match=r"llm.concurrency must be >= 1.*llm.max_retries"):
        OpenAIChatClient(config_for(chat_server, concurrency=0, max_retries=-1))


def test_requests_in_flight_never_exceed_the_shared_concurrency_limit(
    chat_server: ChatServer,
) -> None:
    chat_server.responder = lambda body: slow("held", 0.3)
    cfg = config_for(chat_server, concurrency=2)
    # Two clients of one endpoint (two agents) share the process-wide limit.
    clients = [OpenAIChatClient(cfg), OpenAIChatClient(cfg)]
    results = []

    def call(client: OpenAIChatClient, i: int) -> None:
        results.append(client.complete(MESSAGES, model="m", agent=f"agent-{i}").ok)

    threads = [threading.Thread(target=call, args=(clients[i % 2], i)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 6 and chat_server.hits == 6
    assert chat_server.max_in_flight == 2


def test_tokens_and_costs_add_up_per_agent_and_campaign(chat_server: ChatServer) -> None:
    chat_server.push(reply("first reply"), status(500), reply("a longer second reply"))
    chat_server.push(reply("third"))
    ledger = UsageLedger()
    cfg = config_for(chat_server, prompt_price_per_mtok=2.0, completion_price_per_mtok=10.0)
    client = OpenAIChatClient(cfg, ledger=ledger, backoff_base_s=0.01, sleep=RecordingSleep())
    first = client.complete(MESSAGES, model="m", agent="alpha")
    second = client.complete(MESSAGES, model="m", agent="alpha")
    third = client.complete(MESSAGES, model="m", agent="beta")
    served = chat_server.usage  # what the server reported, in order
    exchanges = [*first.exchanges, *second.exchanges, *third.exchanges]
    answered = [e for e in exchanges if not e.error]
    assert [(e.prompt_tokens, e.completion_tokens) for e in answered] == served
    for exchange in answered:
        expected = (exchange.prompt_tokens * 2.0 + exchange.completion_tokens * 10.0) / 1e6
        assert exchange.cost_usd == pytest.approx(expected)
    per_agent = ledger.by_agent()
    assert per_agent["alpha"].requests == 3 and per_agent["alpha"].failed_requests == 1
    assert per_agent["beta"].requests == 1
    assert per_agent["alpha"].prompt_tokens == served[0][0] + served[1][0]
    assert per_agent["alpha"].completion_tokens == served[0][1] + served[1][1]
    total = ledger.total()
    assert total.prompt_tokens == sum(p for p, _ in served)
    assert total.completion_tokens == sum(c for _, c in served)
    assert total.cost_usd == pytest.approx(sum(e.cost_usd for e in answered))

    # A team whose agents share one ledger is counted once.
    class Member:
        def __init__(self, usage: UsageLedger) -> None:
            self.usage = usage

    team_per_agent, team_total = team_usage([Member(ledger), Member(ledger), object()])
    assert team_per_agent == per_agent and team_total == total
