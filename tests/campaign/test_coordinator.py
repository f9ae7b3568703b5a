"""The Coordinator builds each agent's context per switch and stamps provenance (no sandbox:
attempts are records as the loop would have written them)."""

from pathlib import Path

import pytest
from scripted import PROBLEM_DIR, ScriptedAgent

from kernelarc.agents.proposals import build_proposal
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.config import CoordinationConfig
from kernelarc.problems.files import load_problem
from kernelarc.schema import Attempt, Language, Verdict
from kernelarc.schema.coordination import ConclusionDraft, Evidence

PROBLEM = load_problem(PROBLEM_DIR)


def _attempt(index: int, agent: str, speedup: float | None) -> Attempt:
    proposal = build_proposal(
        problem=PROBLEM.name,
        agent=agent,
        strategy="scripted",
        language=Language.PYTORCH,
        source=f"def run(x, y):\n    return x + y  # {agent} {index}\n",
        tag=str(index),
        knobs={},
        rationale="",
    )
    return Attempt(
        index=index,
        problem=PROBLEM.name,
        proposal=proposal,
        status="PASSED" if speedup is not None else "RUNTIME_ERROR",
        traces=[],
        speedup=speedup,
        latency_ms=1.0 / speedup if speedup else None,
        verdict=Verdict.CORRECT if speedup is not None else Verdict.FAILED,
        started_at="t",
        finished_at="t",
    )


def _coordinator(tmp_path: Path, **switches: object) -> Coordinator:
    cfg = CoordinationConfig(**switches)  # type: ignore[arg-type]
    team = [ScriptedAgent("a", []), ScriptedAgent("b", [])]
    return Coordinator(cfg, PROBLEM, "cpu", team, tmp_path)


def _status_draft(attempt: Attempt) -> ConclusionDraft:
    return ConclusionDraft(
        claim=f"attempt {attempt.index} passes",
        evidence=[
            Evidence(attempt_index=attempt.index, proposal_id=attempt.proposal.id, metric="status")
        ],
    )


def test_conclusions_reach_every_agent_and_are_capped(tmp_path: Path) -> None:
    coord = _coordinator(tmp_path, max_conclusions=2)
    attempts = [_attempt(i, "a", 1.0 + i / 10) for i in range(3)]
    author = ScriptedAgent("a", [], conclude=lambda att, ctx: [_status_draft(att)])
    for attempt in attempts:
        coord.observe(attempt)
        coord.conclude(author, attempt, coord.context("a", attempts, frozenset(), None))
    ctx = coord.context("b", attempts, frozenset(), None)
    assert [c.id for c in ctx.conclusions] == ["c-2", "c-3"], "the most recent max_conclusions"
    assert [c.agent for c in ctx.conclusions] == ["a", "a"]
    stamped = coord.stamp(attempts[0].proposal, ctx)
    assert stamped.conclusions_seen == ["c-2", "c-3"] and stamped.id == attempts[0].proposal.id


def test_memory_off_has_no_board_and_never_concludes(tmp_path: Path) -> None:
    coord = _coordinator(tmp_path, memory=False)
    attempt = _attempt(0, "a", 1.0)
    author = ScriptedAgent("a", [], conclude=lambda att, ctx: [_status_draft(att)])
    coord.observe(attempt)
    assert coord.conclude(author, attempt, coord.context("a", [attempt], frozenset(), None)) == []
    assert author.concluded == [] and coord.board is None


@pytest.mark.parametrize(
    ("switches", "source"),
    [
        ({}, "global_best"),
        ({"peer_state": False}, "reference"),
        ({"draft_from": "reference"}, "reference"),
    ],
)
def test_draft_source_follows_the_switches(tmp_path: Path, switches: dict, source: str) -> None:
    coord = _coordinator(tmp_path, plateau_patience=2, **switches)
    best = _attempt(0, "b", 3.0)
    attempts = [best, _attempt(1, "a", None), _attempt(2, "a", None)]
    for attempt in attempts:
        coord.observe(attempt)
    ctx = coord.context("a", attempts, frozenset(), best)
    assert ctx.draft is not None and ctx.draft.source == source
    proposal = coord.stamp(_attempt(3, "a", 1.0).proposal, ctx)
    assert proposal.draft and proposal.draft_source == source
    assert proposal.parent_id == (best.proposal.id if source == "global_best" else None)
    coord.accepted(proposal)
    assert coord.context("a", attempts, frozenset(), best).draft is None, "reset after a draft"


def test_contexts_hold_copies_not_the_campaign_record(tmp_path: Path) -> None:
    coord = _coordinator(tmp_path)
    attempts = [_attempt(0, "a", 2.0), _attempt(1, "b", 1.5)]
    before = [a.model_dump_json() for a in attempts]
    ctx = coord.context("a", attempts, frozenset(), attempts[0])
    assert ctx.incumbent == attempts[0] and ctx.incumbent is not attempts[0]
    ctx.attempts[0].proposal.solution.sources.clear()
    ctx.peers[0].incumbent.proposal.knobs["stolen"] = 1  # type: ignore[union-attr]
    assert [a.model_dump_json() for a in attempts] == before
