"""End to end on the CPU: a campaign whose LLM agent talks to a real local OpenAI-compatible
server survives 429, 500, a malformed reply and a reply slower than the timeout, records every
exchange in attempts.jsonl, and `llm=replay` re-runs it with no endpoint to the same candidates."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from openai_server import ChatServer, add_kernel, config_for, kernel_reply, reply, slow, status

from kernelarc.agents import Agent
from kernelarc.agents.llm import make_llm_agent
from kernelarc.campaign import run_campaign
from kernelarc.config import (
    BudgetConfig,
    CampaignConfig,
    EvalConfig,
    ExecutorConfig,
    GuardConfig,
    LLMConfig,
    TrackingConfig,
)
from kernelarc.llm.exchange import UNUSABLE_REPLY
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema import Attempt, EvalStatus
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow

PROBLEM = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"
SPEC = SimpleNamespace(kind="llm", strategy="fusion", model=None, name="llm-fusion")


def _campaign(run_dir: Path, llm: LLMConfig) -> list[Attempt]:
    cfg = CampaignConfig(
        name="llm-e2e",
        problem=str(PROBLEM),
        device="cpu",
        budget=BudgetConfig(candidates=2, max_parallel=1),
        eval=EvalConfig(correctness_rounds=2),
        tracking=TrackingConfig(kind="none"),
        # Acceptance rules are not under test here; the guard's re-timing would only add time.
        guard=GuardConfig(enabled=False, confirm=False),
        # Nor is the executor's screen: timed slot only, one sandbox run per candidate.
        executor=ExecutorConfig(correctness_slots=0),
        llm=llm,
    )
    team: list[Agent] = [make_llm_agent(SPEC, llm, cfg.seed)]
    summary = run_campaign(cfg, run_dir, NullTracker(), team=team)
    assert summary.status == "FINISHED"
    return read_attempts(run_dir / "attempts.jsonl")


def test_an_llm_campaign_survives_endpoint_failures_and_replays(tmp_path: Path) -> None:
    with ChatServer() as server:
        # Round 1: 429, 500, a malformed reply (re-asked), a reply slower than the timeout, then
        # a wrong kernel. Round 2: a correct kernel.
        server.push(status(429, retry_after="0"), status(500), reply("Sure! Use torch.add."))
        server.push(slow("too late", 3.0), reply(kernel_reply(add_kernel(1, wrong=True))))
        server.push(reply(kernel_reply(add_kernel(2))))
        llm = config_for(server, timeout_s=1.0, max_retries=2, max_parse_retries=1)
        attempts = _campaign(tmp_path / "live", llm)
        bodies = list(server.bodies)

    assert [a.status for a in attempts] == [EvalStatus.INCORRECT_NUMERICAL, EvalStatus.PASSED]
    transcripts = [a.proposal.llm for a in attempts]
    errors = [e.error for e in transcripts[0]]
    assert [e[:8] for e in errors[:2]] == ["HTTP 429", "HTTP 500"]
    assert errors[2].startswith(UNUSABLE_REPLY + "found no ```json block")
    assert errors[3].startswith("timeout") and errors[4] == ""
    assert [e.error for e in transcripts[1]] == [""]
    assert sum(len(t) for t in transcripts) == len(bodies) == 6
    assert all(a.proposal.model == "test-model" for a in attempts)
    # The second round's prompt reports the failed first attempt, its status and its code.
    second_prompt = bodies[5]["messages"][1]["content"]
    assert "INCORRECT_NUMERICAL" in second_prompt and "torch.sub(x, y)" in second_prompt

    # Replay with no endpoint (the server is gone): the same candidates, in the same order.
    replay = LLMConfig(
        kind="replay", replay_from=str(tmp_path / "live"), max_retries=2, max_parse_retries=1
    )
    replayed = _campaign(tmp_path / "replay", replay)
    assert [a.proposal.id for a in replayed] == [a.proposal.id for a in attempts]
    assert [a.status for a in replayed] == [a.status for a in attempts]
    assert [[e.reply for e in a.proposal.llm] for a in replayed] == [
        [e.reply for e in t] for t in transcripts
    ]
