"""The prompt shows what the context holds and nothing else: conclusions only with shared memory
on, peer code only with peer state on, the draft order when drafting fired; it is bounded."""

import pytest
from llm_records import failed, passed, proposal
from openai_server import add_kernel

from kernelarc.agents.context import AgentContext, DraftOrder, PeerSnapshot
from kernelarc.agents.llm import STRATEGIES
from kernelarc.agents.llm.prompt_builder import (
    MAX_PROMPT_CHARS,
    build_messages,
    reask_message,
    system_prompt,
    user_prompt,
)
from kernelarc.problems.files import Problem
from kernelarc.schema.coordination import Conclusion, ConclusionScope, Evidence
from kernelarc.schema.guard_record import StaticFinding

PEER_CODE = "# PEER-INCUMBENT-MARKER\n"
CLAIM = "Vectorized 128-bit loads doubled the bandwidth on the large workload."


def _history(problem: Problem) -> AgentContext:
    own_best = passed(problem, 0, proposal(problem, "llm-memory", add_kernel(0)), 1.25)
    broken = failed(
        problem,
        2,
        proposal(problem, "llm-memory", "import torch\n# BROKEN-MARKER\ndef run(x, y): ...\n"),
        "Traceback ...\nRuntimeError: shape mismatch " + "x" * 20_000,
        findings=[StaticFinding(rule="KA-S033", severity="flag", path="kernel.py", message="time")],
        reason="challenger not accepted: CI overlaps 1",
    )
    return AgentContext(problem=problem, device="cuda", attempts=(own_best, broken), gpu="")


def _conclusion() -> Conclusion:
    return Conclusion(
        id="c-7",
        agent="llm-tiling",
        strategy="tiling",
        claim=CLAIM,
        scope=ConclusionScope(problem="vector_add_f32"),
        evidence=[Evidence(attempt_index=4, proposal_id="p-abc", value=1.8, baseline=1.2)],
        confidence=0.8,
        published_at="2026-01-01T00:00:00",
    )


def _peer(problem: Problem) -> PeerSnapshot:
    best = passed(problem, 4, proposal(problem, "llm-tiling", PEER_CODE + add_kernel(4)), 1.8)
    return PeerSnapshot(
        agent="llm-tiling",
        strategy="tiling",
        incumbent=best,
        best_speedup=1.8,
        attempts=5,
        recent_speedups=(1.1, None, 1.8),
    )


def test_own_history_statuses_errors_and_guard_findings_are_shown(vector_add: Problem) -> None:
    prompt = user_prompt(_history(vector_add))
    assert "## Your incumbent" in prompt and "speedup 1.250x" in prompt
    assert "Attempt 2 (" in prompt and "RUNTIME_ERROR" in prompt
    assert "RuntimeError: shape mismatch" in prompt and "characters cut ...]" in prompt
    assert "guard flag KA-S033" in prompt and "challenger not accepted" in prompt
    assert "BROKEN-MARKER" in prompt  # the last, failed attempt's code, to fix it
    assert "CUDA GPU: NVIDIA H200" in prompt  # taken from the traces when ctx.gpu is empty
    assert "vector_add_f32" in prompt and "def run(x, y):" in prompt  # definition and reference
    assert "`add-n1000`: N=1000" in prompt


def test_memory_off_means_no_conclusions_and_on_shows_them(vector_add: Problem) -> None:
    ctx = _history(vector_add)
    assert "Shared conclusions" not in user_prompt(ctx) and CLAIM not in user_prompt(ctx)
    shown = user_prompt(AgentContext(**{**ctx.__dict__, "conclusions": (_conclusion(),)}))
    assert "## Shared conclusions" in shown and "[c-7] llm-tiling (tiling" in shown
    assert CLAIM in shown and "attempt 4 speedup 1.8 vs 1.2" in shown


def test_peer_state_off_means_no_peer_code_and_on_shows_snapshots(vector_add: Problem) -> None:
    ctx = _history(vector_add)
    assert "PEER-INCUMBENT-MARKER" not in user_prompt(ctx) and "Your peers" not in user_prompt(ctx)
    shown = user_prompt(AgentContext(**{**ctx.__dict__, "peers": (_peer(vector_add),)}))
    assert "PEER-INCUMBENT-MARKER" in shown
    assert "llm-tiling (tiling): best speedup 1.800x, 5 attempts, recent [1.10x, fail, 1.80x]" in (
        shown
    )


def test_draft_orders_change_the_task(vector_add: Problem) -> None:
    ctx = _history(vector_add)
    base = _peer(vector_add).incumbent
    from_best = DraftOrder(source="global_best", base=base, reason="no gain beyond 2% in 4")
    shown = user_prompt(AgentContext(**{**ctx.__dict__, "draft": from_best}))
    assert "## Draft base" in shown and "PEER-INCUMBENT-MARKER" in shown
    assert "Start a fresh line: take the team's best kernel" in shown
    from_reference = DraftOrder(source="reference", base=None, reason="stalled")
    shown = user_prompt(AgentContext(**{**ctx.__dict__, "draft": from_reference}))
    assert "from the reference implementation alone" in shown and "## Draft base" not in shown
    assert "Draft" not in user_prompt(ctx) and "fresh line" not in user_prompt(ctx)


def test_a_first_request_on_cpu(vector_add: Problem) -> None:
    prompt = user_prompt(AgentContext(problem=vector_add, device="cpu"))
    assert "Write a first correct candidate" in prompt
    assert "Use `pytorch` or `triton`" in prompt and "Your recent attempts" not in prompt


def test_the_prompt_stays_under_its_bound_whatever_the_peers_hold(vector_add: Problem) -> None:
    ctx = _history(vector_add)
    huge = [
        PeerSnapshot(
            agent=f"peer-{i}",
            strategy="fusion",
            incumbent=passed(
                vector_add, 10 + i, proposal(vector_add, f"peer-{i}", "y = 1\n" * 5000), 1.1
            ),
            best_speedup=1.1,
            attempts=1,
        )
        for i in range(20)
    ]
    prompt = user_prompt(AgentContext(**{**ctx.__dict__, "peers": tuple(huge)}))
    assert len(prompt) <= MAX_PROMPT_CHARS
    assert "## Your incumbent" in prompt and "RUNTIME_ERROR" in prompt  # own history kept


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_has_its_own_system_prompt(strategy: str) -> None:
    text = system_prompt("llm-x", strategy)
    assert f"Your strategy is **{STRATEGIES[strategy]}**" in text
    assert "```json" in text and "path=kernel.py" in text and "$" not in text


def test_messages_and_reask(vector_add: Problem) -> None:
    messages = build_messages(AgentContext(problem=vector_add), agent="llm-x", strategy="fusion")
    assert [m.role for m in messages] == ["system", "user"]
    assert "found no ```json block" in reask_message("found no ```json block").content
