"""The offline strategy agents: which problems they serve, which knobs they move, how conclusions
and drafts steer them, and what they conclude."""

from pathlib import Path

import pytest
from agent_checks import case_for, check_entry, run_checker, smallest_workload

from kernelarc.agents import AgentContext, DraftOrder, make_team
from kernelarc.agents.strategies import (
    FusionAgent,
    LibraryAgent,
    MemoryAgent,
    PipeliningAgent,
    PrecisionAgent,
    TilingAgent,
)
from kernelarc.agents.triton_knobs import knob_owner
from kernelarc.coordination import ConclusionBoard
from kernelarc.guard import blocking, scan_solution
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.problems.files import Problem
from kernelarc.schema import Attempt, Proposal, Verdict, utc_now
from kernelarc.schema.coordination import Conclusion, ConclusionScope, Evidence

RMSNORM = resolve_problem("rmsnorm")
GEMM = resolve_problem("gemm_bias_gelu")
SETTING_KEYS = ("space", "template")


def _judged(
    proposal: Proposal, index: int, speedup: float | None, status: str = "PASSED"
) -> Attempt:
    return Attempt(
        index=index,
        problem=proposal.solution.definition,
        proposal=proposal,
        status=status,
        traces=[],
        speedup=speedup,
        latency_ms=1.0 / speedup if speedup else None,
        verdict=Verdict.CORRECT if speedup else Verdict.FAILED,
        started_at="t",
        finished_at="t",
    )


def _cuda(**fields: object) -> AgentContext:
    """A CUDA context on rmsnorm (the GPU knob grids; nothing runs here)."""
    return AgentContext(problem=RMSNORM, device="cuda", **fields)  # type: ignore[arg-type]


def _setting(proposal: Proposal) -> dict[str, object]:
    return {k: v for k, v in proposal.knobs.items() if k not in SETTING_KEYS}


def _conclusion(cid: str, claim: str) -> Conclusion:
    return Conclusion(
        id=cid,
        agent="peer",
        strategy="peer",
        claim=claim,
        scope=ConclusionScope(problem="rmsnorm"),
        evidence=[Evidence(attempt_index=0, proposal_id="p-0", metric="status")],
        confidence=0.5,
        published_at=utc_now(),
    )


@pytest.mark.parametrize(
    ("problem", "device", "serving"),
    [
        (RMSNORM, "cpu", {"tiling", "memory", "fusion", "pipelining", "compiler"}),
        (GEMM, "cpu", {"tiling", "fusion", "precision", "library", "compiler"}),
        (GEMM, "cuda", {"tiling", "fusion", "pipelining", "precision", "library", "compiler"}),
    ],
)
def test_which_strategies_serve_a_problem(problem: Problem, device: str, serving: set[str]) -> None:
    # Each agent alone (no dedupe against teammates): does it have anything to propose?
    found = set()
    for agent in make_team(
        ["tiling", "memory", "fusion", "pipelining", "precision", "library", "compiler"], seed=0
    ):
        proposal = agent.propose(AgentContext(problem=problem, device=device))
        if proposal is not None:
            found.add(agent.strategy)
            assert not blocking(scan_solution(proposal.solution)), proposal.id
    # Pipelining on the CPU grid has one warps value; memory on gemm has one GROUP_M value: the
    # default setting is still proposed when the agent is alone.
    assert serving <= found
    assert ("precision" in found) == ("library" in found) == (problem is GEMM)


def test_knob_ownership_by_name() -> None:
    owners = {
        name: knob_owner(name)
        for name in (
            "BLOCK_T",
            "BLOCK_M",
            "BLOCK_HEADS",
            "BLOCK_H",
            "BLOCK_V",
            "GROUP_M",
            "NUM_WARPS",
            "NUM_STAGES",
            "FUSE_RESIDUAL",
            "ACC_DTYPE",
        )
    }
    assert owners == {
        "BLOCK_T": "tiling",
        "BLOCK_M": "tiling",
        "BLOCK_HEADS": "tiling",
        "BLOCK_H": "memory",
        "BLOCK_V": "memory",
        "GROUP_M": "memory",
        "NUM_WARPS": "pipelining",
        "NUM_STAGES": "pipelining",
        "FUSE_RESIDUAL": "fusion",
        "ACC_DTYPE": "precision",
    }


@pytest.mark.parametrize(
    ("cls", "owned"),
    [
        (TilingAgent, {"BLOCK_T"}),
        (MemoryAgent, {"BLOCK_H"}),
        (PipeliningAgent, {"NUM_WARPS"}),
        (FusionAgent, {"BLOCK_T", "BLOCK_H", "NUM_WARPS"}),
    ],
)
def test_a_strategy_moves_only_its_knobs_around_its_incumbent(cls: type, owned: set[str]) -> None:
    agent = cls(seed=3)
    first = agent.propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert first is not None and first.parent_id is None and first.strategy == agent.strategy
    history = (_judged(first, 0, 1.5),)
    seen = {first.id}
    for index in range(1, 3):  # NUM_WARPS has two other values
        ctx = AgentContext(
            problem=RMSNORM, device="cuda", attempts=history, seen_ids=frozenset(seen)
        )
        proposal = agent.propose(ctx)
        assert proposal is not None
        assert proposal.parent_id == first.id, "coordinate moves around the incumbent"
        changed = {k for k, v in _setting(proposal).items() if _setting(first)[k] != v}
        assert len(changed) == 1 and changed <= owned, changed
        seen.add(proposal.id)
        history = (*history, _judged(proposal, index, 1.0))


def test_same_setting_from_two_strategies_is_one_proposal() -> None:
    ctx = AgentContext(problem=RMSNORM, device="cpu")
    tiling, memory = TilingAgent(seed=0).propose(ctx), MemoryAgent(seed=5).propose(ctx)
    assert tiling is not None and memory is not None
    assert tiling.id == memory.id and tiling.agent != memory.agent


def test_conclusions_steer_the_start_and_the_order_of_moves() -> None:
    plain = MemoryAgent(seed=0).propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert plain is not None and plain.knobs["BLOCK_H"] == 2048
    advice = (
        _conclusion("c-1", "BLOCK_H 4096 over 2048: +30% on rmsnorm (attempts 4 vs 2)"),
        _conclusion("c-2", "NUM_WARPS 4 fails (COMPILE_ERROR) on rmsnorm (attempt 6)"),
    )
    steered = MemoryAgent(seed=0).propose(
        AgentContext(problem=RMSNORM, device="cuda", conclusions=advice)
    )
    assert steered is not None and steered.knobs["BLOCK_H"] == 4096
    # Pipelining: the failing value is tried last.
    agent = PipeliningAgent(seed=0)
    start = agent.propose(AgentContext(problem=RMSNORM, device="cuda", conclusions=advice))
    assert start is not None and start.knobs["NUM_WARPS"] != 4
    history = (_judged(start, 0, 1.0),)
    order = []
    for _ in range(2):
        ctx = AgentContext(
            problem=RMSNORM,
            device="cuda",
            attempts=history,
            conclusions=advice,
            seen_ids=frozenset(a.proposal.id for a in history),
        )
        move = agent.propose(ctx)
        assert move is not None
        order.append(move.knobs["NUM_WARPS"])
        history = (*history, _judged(move, len(history), 0.5))
    assert order[-1] == 4, order


def test_a_draft_starts_from_the_global_best_setting() -> None:
    tiling = TilingAgent(seed=9)
    default = tiling.propose(_cuda())
    assert default is not None
    moved = tiling.propose(_cuda(seen_ids=frozenset({default.id})))
    assert moved is not None and moved.knobs["BLOCK_T"] != default.knobs["BLOCK_T"]
    best = _judged(moved, 7, 2.0)  # a peer's attempt away from the default is the global best
    agent = PipeliningAgent(seed=0)
    own = _judged(agent.propose(_cuda()) or default, 0, 1.0)
    seen = frozenset({own.proposal.id, best.proposal.id})
    draft = DraftOrder(source="global_best", base=best, reason="flat")
    proposal = agent.propose(_cuda(attempts=(own,), draft=draft, seen_ids=seen))
    assert proposal is not None and proposal.parent_id == best.proposal.id
    changed = {k for k, v in _setting(proposal).items() if _setting(moved)[k] != v}
    assert changed == {"NUM_WARPS"}, "one owned knob away from the global best"
    fresh = DraftOrder(source="reference", base=None, reason="flat")
    line = agent.propose(_cuda(attempts=(own,), draft=fresh, seen_ids=seen))
    assert line is not None and line.parent_id is None, "a fresh line from the reference"


def test_conclude_publishes_findings_the_board_accepts(tmp_path: Path) -> None:
    agent = TilingAgent(seed=1)
    first = agent.propose(AgentContext(problem=RMSNORM, device="cuda"))
    assert first is not None
    parent = _judged(first, 0, 1.0)
    board = ConclusionBoard("rmsnorm", "rmsnorm", tmp_path / "c.jsonl")
    board.observe(parent)
    results = []
    for index, (speedup, status) in enumerate(
        [(1.3, "PASSED"), (1.01, "PASSED"), (None, "COMPILE_ERROR")], start=1
    ):
        ctx = AgentContext(
            problem=RMSNORM,
            device="cuda",
            attempts=(parent,),
            seen_ids=frozenset([*results, first.id]),
        )
        proposal = agent.propose(ctx)
        assert proposal is not None
        results.append(proposal.id)
        attempt = _judged(proposal, index, speedup, status)
        board.observe(attempt)
        drafts = agent.conclude(attempt, ctx)
        published = [board.publish(agent.name, agent.strategy, d) for d in drafts]
        if index == 1:
            (conclusion,) = published
            assert conclusion.claim.startswith("BLOCK_T ") and "over" in conclusion.claim
            assert "+30% on rmsnorm (attempts 1 vs 0)" in conclusion.claim
        elif index == 2:
            assert published == [], "a 1% change is noise: no conclusion"
        else:
            (conclusion,) = published
            assert "fails (COMPILE_ERROR) on rmsnorm (attempt 3)" in conclusion.claim


def test_library_and_precision_variants_are_correct_on_cpu(tmp_path: Path) -> None:
    checks = []
    cases = [case_for(GEMM, smallest_workload(GEMM))]
    for cls in (LibraryAgent, PrecisionAgent):
        agent, seen = cls(seed=0), set()
        while (
            proposal := agent.propose(
                AgentContext(problem=GEMM, device="cpu", seen_ids=frozenset(seen))
            )
        ) is not None:
            seen.add(proposal.id)
            label = f"{cls.strategy}/{proposal.rationale}"
            checks.append(check_entry(label, GEMM, proposal, cases))
    labels = [c["label"] for c in checks]
    assert any("addmm_activation" in label for label in labels)
    assert any("compute_dtype=bfloat16" in label for label in labels)
    results = run_checker(checks, "cpu", tmp_path, interpret=False)
    assert all(r["ok"] for r in results.values()), results
