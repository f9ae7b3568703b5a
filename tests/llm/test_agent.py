"""LLMAgent against a real local server: re-asks with the parse error, keeps every exchange with
the proposal, refuses repeats, retires after repeated failures, and hands on its conclusions."""

from types import SimpleNamespace

import pytest
from llm_records import failed, passed, proposal
from openai_server import ChatServer, add_kernel, config_for, kernel_reply, reply, status

from kernelarc.agents.context import AgentContext
from kernelarc.agents.llm import LLMAgent, make_llm_agent
from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm.client import OpenAIChatClient
from kernelarc.llm.exchange import UNUSABLE_REPLY
from kernelarc.problems.files import Problem
from kernelarc.schema import Proposal, proposal_id_for


def _agent(server: ChatServer, **overrides: object) -> LLMAgent:
    cfg = config_for(server, **overrides)
    client = OpenAIChatClient(cfg, backoff_base_s=0.01, sleep=lambda s: None)
    return LLMAgent(
        name="llm-memory",
        strategy="Memory Access",
        client=client,
        model=cfg.model,
        max_parse_retries=cfg.max_parse_retries,
    )


def _propose(agent: LLMAgent, ctx: AgentContext) -> Proposal:
    result = agent.propose(ctx)
    assert result is not None, agent.retired
    return result


def test_a_malformed_reply_is_re_asked_with_the_parse_error(
    chat_server: ChatServer, vector_add: Problem
) -> None:
    chat_server.push(reply("I think a Triton kernel would do."), reply(kernel_reply(add_kernel(1))))
    agent = _agent(chat_server)
    result = _propose(agent, AgentContext(problem=vector_add))
    assert chat_server.hits == 2
    reask = chat_server.bodies[1]["messages"]
    assert [m["role"] for m in reask] == ["system", "user", "assistant", "user"]
    assert reask[2]["content"] == "I think a Triton kernel would do."
    assert "Your last reply could not be used: found no ```json block" in reask[3]["content"]
    assert [e.error.startswith(UNUSABLE_REPLY) for e in result.llm] == [True, False]
    assert result.strategy == "memory" and result.model == "test-model"
    assert result.solution.sources[0].content == add_kernel(1)
    assert result.id == proposal_id_for(result.solution)


def test_endpoint_failures_before_a_proposal_travel_with_it(
    chat_server: ChatServer, vector_add: Problem
) -> None:
    chat_server.push(status(500), status(502), reply(kernel_reply(add_kernel(2))))
    result = _propose(_agent(chat_server, max_retries=1), AgentContext(problem=vector_add))
    assert chat_server.hits == 3
    assert [e.error[:8] for e in result.llm] == ["HTTP 500", "HTTP 502", ""]


def test_an_agent_retires_after_repeated_failed_rounds(
    chat_server: ChatServer, vector_add: Problem
) -> None:
    chat_server.responder = lambda body: status(500)
    agent = _agent(chat_server, max_retries=1)
    ctx = AgentContext(problem=vector_add)
    assert agent.propose(ctx) is None
    assert chat_server.hits == 3 * 2  # three rounds of (1 try + 1 retry)
    assert "3 proposal rounds in a row" in agent.retired
    assert agent.propose(ctx) is None and chat_server.hits == 6


def test_a_candidate_already_evaluated_is_refused(
    chat_server: ChatServer, vector_add: Problem
) -> None:
    # The same code with trailing spaces and blank lines: the same proposal id.
    repeat = kernel_reply(add_kernel(1).replace("\n", "  \n\n"))
    chat_server.push(reply(kernel_reply(add_kernel(1))), reply(repeat))
    chat_server.push(reply(kernel_reply(add_kernel(3))))
    agent = _agent(chat_server)
    first = _propose(agent, AgentContext(problem=vector_add))
    second = _propose(agent, AgentContext(problem=vector_add, seen_ids=frozenset({first.id})))
    assert chat_server.hits == 3
    assert f"that candidate ({first.id}) was already evaluated" in second.llm[0].error
    assert second.solution.sources[0].content == add_kernel(3)


def test_conclusions_are_handed_on_only_when_the_attempt_passed(
    chat_server: ChatServer, vector_add: Problem
) -> None:
    earlier = passed(vector_add, 0, proposal(vector_add, "llm-memory", add_kernel(0)), 1.2)
    claim = {"claim": "Plain torch.add is already at the copy bound.", "evidence": [0]}
    chat_server.push(reply(kernel_reply(add_kernel(5), conclusions=[claim])))
    chat_server.push(reply(kernel_reply(add_kernel(6), conclusions=[claim])))
    agent = _agent(chat_server)
    ctx = AgentContext(problem=vector_add, attempts=(earlier,))
    good = _propose(agent, ctx)
    (draft,) = agent.conclude(passed(vector_add, 1, good, 1.3), ctx)
    assert draft.claim == claim["claim"] and draft.evidence[0].proposal_id == earlier.proposal.id
    assert agent.conclude(passed(vector_add, 1, good, 1.3), ctx) == []  # handed on once
    bad = _propose(agent, ctx)
    assert agent.conclude(failed(vector_add, 2, bad, "boom"), ctx) == []


def test_make_llm_agent_reads_the_team_entry(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config_for(chat_server)
    spec = SimpleNamespace(kind="llm", strategy="pipelining", model=None, name="")
    agent = make_llm_agent(spec, cfg, seed=3)
    assert (agent.name, agent.strategy, agent.model) == ("llm-pipelining", "pipelining", cfg.model)
    spec = SimpleNamespace(kind="llm", strategy="cuBLASLt", model="big-model", name="lib")
    agent = make_llm_agent(spec, cfg, seed=3)
    assert (agent.name, agent.strategy, agent.model) == ("lib", "library", "big-model")
    with pytest.raises(ConfigError, match=r"unknown LLM agent strategy 'magic'.*'fusion'"):
        make_llm_agent(SimpleNamespace(kind="llm", strategy="magic", model=None, name=""), cfg, 0)
    with pytest.raises(ConfigError, match="but llm=none; use llm=openai"):
        make_llm_agent(spec, LLMConfig(kind="none"), 0)
    with pytest.raises(ConfigError, match=r"llm=replay needs llm\.replay_from=RUN_DIR"):
        make_llm_agent(spec, LLMConfig(kind="replay"), 0)
