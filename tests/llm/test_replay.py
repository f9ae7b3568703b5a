"""`llm=replay`: an agent served from a recorded attempts.jsonl, with no endpoint, proposes the
same candidates along the same path; a missing or empty transcript is a clear error."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from llm_records import failed, passed, proposal
from openai_server import ChatServer, add_kernel, config_for, kernel_reply, reply, status

from kernelarc.agents.context import AgentContext
from kernelarc.agents.llm import make_llm_agent
from kernelarc.config import LLMConfig
from kernelarc.errors import ConfigError
from kernelarc.llm.exchange import UNUSABLE_REPLY, is_transport_failure
from kernelarc.problems.files import Problem
from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.schema import Attempt, Proposal

SPEC = SimpleNamespace(kind="llm", strategy="fusion", model=None, name="llm-fusion")


def _judge(problem: Problem, index: int, prop: Proposal) -> Attempt:
    """Attempt 1 fails, the others pass: the prompts of later rounds depend on it."""
    return failed(problem, index, prop, "boom") if index == 1 else passed(problem, index, prop, 1.1)


def _campaign(agent: object, problem: Problem, rounds: int) -> list[Proposal]:
    """Propose, judge and feed back, as the loop does (no sandbox: the verdicts are made up)."""
    attempts: list[Attempt] = []
    proposals = []
    for index in range(rounds):
        ctx = AgentContext(problem=problem, attempts=tuple(attempts))
        made = agent.propose(ctx)  # type: ignore[attr-defined]
        assert made is not None, agent.retired  # type: ignore[attr-defined]
        proposals.append(made)
        attempts.append(_judge(problem, index, made))
    return proposals


def test_replay_reproduces_the_recorded_proposals_without_an_endpoint(
    vector_add: Problem, tmp_path: Path
) -> None:
    with ChatServer() as server:
        server.push(status(429, retry_after="0"), reply(kernel_reply(add_kernel(1))))
        server.push(reply("no idea"), reply(kernel_reply(add_kernel(2), rationale="second")))
        server.push(status(500), status(500), reply(kernel_reply(add_kernel(3))))
        cfg = config_for(server, max_retries=1, prompt_price_per_mtok=1.0)
        live = make_llm_agent(SPEC, cfg, seed=0)
        recorded = _campaign(live, vector_add, 3)
        hits = server.hits
    assert hits == 7
    log = AttemptLog(tmp_path / "attempts.jsonl")
    for index, made in enumerate(recorded):
        log.append(_judge(vector_add, index, made))

    replay_cfg = LLMConfig(kind="replay", replay_from=str(tmp_path), max_retries=1)
    replayer = make_llm_agent(SPEC, replay_cfg, seed=0)
    replayed = _campaign(replayer, vector_add, 3)
    assert [p.id for p in replayed] == [p.id for p in recorded]
    assert [p.rationale for p in replayed] == [p.rationale for p in recorded]
    for old, new in zip(recorded, replayed, strict=True):
        assert [e.reply for e in new.llm] == [e.reply for e in old.llm]
        assert [e.error for e in new.llm] == [e.error for e in old.llm]
        assert all(e.cost_usd == 0.0 for e in new.llm)
    assert recorded[1].llm[0].error.startswith(UNUSABLE_REPLY)
    assert [is_transport_failure(e) for e in recorded[2].llm] == [True, True, False]
    assert replayer.usage.total().requests == hits

    # The transcript is spent: the agent retires with the reason instead of inventing replies.
    ctx = AgentContext(problem=vector_add)
    assert replayer.propose(ctx) is None
    assert "has no recorded exchange left (it made 7 in the recorded run)" in replayer.retired


def test_a_run_dir_without_attempts_is_a_config_error(tmp_path: Path) -> None:
    cfg = LLMConfig(kind="replay", replay_from=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"no attempts\.jsonl there"):
        make_llm_agent(SPEC, cfg, seed=0)


def test_a_run_without_llm_exchanges_is_a_config_error(vector_add: Problem, tmp_path: Path) -> None:
    AttemptLog(tmp_path / "attempts.jsonl").append(
        passed(vector_add, 0, proposal(vector_add, "compiler", add_kernel(0)), 1.0)
    )
    cfg = LLMConfig(kind="replay", replay_from=str(tmp_path))
    with pytest.raises(ConfigError, match="holds 1 attempts but no LLM exchanges"):
        make_llm_agent(SPEC, cfg, seed=0)
