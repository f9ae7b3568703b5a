"""Each coordination switch changes what agents see or do, in real CPU campaigns (scripted agents,
real LocalSandbox evaluations of the tiny vector_add problem, tracking off)."""

import json
import threading
from pathlib import Path

import pytest
from scripted import ScriptedAgent, adder, campaign_config

from kernelarc.agents import Agent, AgentContext
from kernelarc.campaign import run_campaign
from kernelarc.config import CoordinationConfig
from kernelarc.coordination import read_conclusion_events
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.schema.coordination import ConclusionDraft, Evidence
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow


def _switches(**on: bool) -> CoordinationConfig:
    base = {"memory": False, "guard": False, "peer_state": False, "drafting": False}
    return CoordinationConfig(**(base | on))


def _passes(attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
    """A sound finding, a hostile one and one with an inflated number: only the first passes."""
    cite = Evidence(attempt_index=attempt.index, proposal_id=attempt.proposal.id, metric="status")
    inflated = Evidence(
        attempt_index=attempt.index,
        proposal_id=attempt.proposal.id,
        value=(attempt.speedup or 1.0) * 10,
    )
    return [
        ConclusionDraft(claim=f"plain addition passes (attempt {attempt.index})", evidence=[cite]),
        ConclusionDraft(claim="use `def run(x, y): return torch.add(x, y)`", evidence=[cite]),
        ConclusionDraft(claim="addition is ten times faster", evidence=[inflated]),
    ]


def _run(tmp_path: Path, cfg, team: list[Agent], **kwargs):  # type: ignore[no-untyped-def]
    summary = run_campaign(cfg, tmp_path, NullTracker(), team=team, **kwargs)
    assert summary.status == "FINISHED"
    return summary, read_attempts(tmp_path / "attempts.jsonl")


WRONG = "import torch\n\n\ndef run(x, y):\n    return x - y\n"


def test_with_every_switch_off_no_agent_sees_or_publishes_anything(tmp_path: Path) -> None:
    # Each mechanism would act here if it were on: both agents conclude, `late` is built after
    # `early`'s attempt is recorded, and `late` is flat (a wrong answer) before its second call.
    recorded = threading.Event()
    early = ScriptedAgent("early", [adder("e")], conclude=_passes)
    late = ScriptedAgent("late", [WRONG, adder("l")], conclude=_passes, gate=recorded)
    switches = _switches()
    switches.plateau_patience = 1
    _, attempts = _run(
        tmp_path,
        campaign_config(3, switches),
        [early, late],
        on_attempt=lambda a, s: recorded.set(),
    )
    assert len(attempts) == 3
    contexts = early.contexts + late.contexts
    assert all(ctx.conclusions == () for ctx in contexts), "memory off: no conclusion shown"
    assert early.concluded == late.concluded == [], "memory off: conclude is never called"
    assert all(ctx.peers == () for ctx in contexts), "peer state off: no peer in any context"
    assert all(ctx.draft is None for ctx in contexts), "drafting off: no draft order"
    assert not any(a.proposal.draft or a.proposal.conclusions_seen for a in attempts)
    assert not (tmp_path / "conclusions.jsonl").exists()
    record = json.loads((tmp_path / "campaign.json").read_text())
    assert record["coordination"] | {"plateau_patience": 4} == {
        "memory": False,
        "guard": False,
        "peer_state": False,
        "drafting": False,
        "plateau_patience": 4,
        "plateau_min_gain": 0.02,
        "draft_from": "global_best",
        "max_conclusions": 20,
    }


def test_shared_memory_on(tmp_path: Path) -> None:
    agent = ScriptedAgent("solo", [adder("a"), adder("b")], conclude=_passes)
    cfg = campaign_config(2, _switches(memory=True), max_parallel=1)
    summary, attempts = _run(tmp_path, cfg, [agent])
    assert [index for index, _ in agent.concluded] == [0, 1]
    assert agent.contexts[0].conclusions == ()
    assert [c.id for c in agent.contexts[1].conclusions] == ["c-1"]
    assert [c.id for c in agent.concluded[1][1].conclusions] == ["c-1"]
    assert [a.proposal.conclusions_seen for a in attempts] == [[], ["c-1"]]
    events = read_conclusion_events(tmp_path / "conclusions.jsonl")
    assert [e.kind for e in events] == ["published", "rejected", "rejected"] * 2
    assert "code in the claim" in events[1].reason and "does not match" in events[2].reason
    record = json.loads((tmp_path / "campaign.json").read_text())
    assert record["coordination"]["memory"] is True
    assert summary.conclusions == record["conclusions"] == 2


def test_peer_state_on(tmp_path: Path) -> None:
    # `late` waits until `early`'s attempt is recorded, so its second context is built after it.
    recorded = threading.Event()
    early = ScriptedAgent("early", [adder("e")])
    late = ScriptedAgent("late", [adder("l1"), adder("l2")], gate=recorded)
    cfg = campaign_config(3, _switches(peer_state=True))
    _, attempts = _run(tmp_path, cfg, [early, late], on_attempt=lambda a, s: recorded.set())
    assert all([p.agent for p in ctx.peers] == ["late"] for ctx in early.contexts)
    assert all([p.agent for p in ctx.peers] == ["early"] for ctx in late.contexts)
    (peer,) = late.contexts[1].peers
    mine = next(a for a in attempts if a.proposal.agent == "early")
    assert peer.incumbent == mine and peer.attempts == 1
    assert peer.incumbent is not None
    assert peer.incumbent.proposal.solution.sources[0].content == adder("e")


def test_drafting_on_fires_after_patience_flat_attempts_not_before(tmp_path: Path) -> None:
    agent = ScriptedAgent("solo", [WRONG, WRONG.replace("x - y", "y - x"), adder("a")])
    switches = _switches(drafting=True)
    switches.plateau_patience = 2
    _, attempts = _run(tmp_path, campaign_config(3, switches, max_parallel=1), [agent])
    assert [a.status for a in attempts][:2] == [EvalStatus.INCORRECT_NUMERICAL] * 2
    # Two flat attempts: the third proposal is a draft, and no earlier one.
    assert [ctx.draft is not None for ctx in agent.contexts] == [False, False, True]
    assert [a.proposal.draft for a in attempts] == [False, False, True]
    assert attempts[2].proposal.draft_source == "reference"  # no global best yet
    assert agent.contexts[2].draft is not None and "2 attempts" in agent.contexts[2].draft.reason


def test_a_rerun_failure_retracts_the_conclusion_citing_it(tmp_path: Path) -> None:
    marker = tmp_path / "incumbent-goes-wrong"
    # The incumbent is slow and correct until the marker exists (a stand-in for a kernel that is
    # only right sometimes); the guard re-runs it while judging the faster challenger.
    flaky = adder("flaky", sleep_s=0.25, fail_if=marker)

    def conclude(attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        if attempt.index != 0 or attempt.speedup is None:
            return []
        cite = Evidence(attempt_index=0, proposal_id=attempt.proposal.id, value=attempt.speedup)
        return [ConclusionDraft(claim="the sleeping adder passes", evidence=[cite])]

    def on_attempt(attempt: Attempt, state: object) -> None:
        if attempt.index == 0:
            marker.write_text("")

    agent = ScriptedAgent("solo", [flaky, adder("fast")], conclude=conclude)
    cfg = campaign_config(2, _switches(memory=True, guard=True), guard=True, max_parallel=1)
    summary, attempts = _run(tmp_path, cfg, [agent], on_attempt=on_attempt)
    assert attempts[0].verdict == Verdict.NEW_BEST and attempts[0].confirmed
    assert attempts[1].guard is not None
    incumbent_runs = [s for s in attempts[1].guard.samples if s.role == "incumbent"]
    assert incumbent_runs and incumbent_runs[0].status == EvalStatus.INCORRECT_NUMERICAL
    assert [c.id for c in agent.contexts[1].conclusions] == ["c-1"]
    # The context built after attempt 1 was judged no longer shows the conclusion.
    assert agent.concluded[1][1].conclusions == (), "a retracted conclusion is no longer shown"
    events = read_conclusion_events(tmp_path / "conclusions.jsonl")
    assert [e.kind for e in events] == ["published", "retracted"]
    assert "INCORRECT_NUMERICAL" in events[1].reason
    assert summary.retracted == 1


def test_a_campaign_survives_failing_agents_and_candidates(tmp_path: Path) -> None:
    def broken_conclude(attempt: Attempt, ctx: AgentContext) -> list[ConclusionDraft]:
        raise ValueError("conclude bug")

    crash = "import torch\n\n\ndef run(x, y):\n    raise RuntimeError('boom')\n"
    team: list[Agent] = [
        ScriptedAgent("crashes", [adder("x"), adder("y")], fail_on_call=2),
        ScriptedAgent("bad_conclude", [crash, adder("z")], conclude=broken_conclude),
    ]
    cfg = campaign_config(
        4, CoordinationConfig(memory=True, guard=False, peer_state=True, drafting=True)
    )
    summary, attempts = _run(tmp_path, cfg, team)
    assert summary.attempts == len(attempts) == 3  # `crashes` retired after its first
    assert sorted(str(a.status) for a in attempts) == ["PASSED", "PASSED", "RUNTIME_ERROR"]


def test_the_live_view_sees_the_conclusion_counts_the_summary_reports(tmp_path: Path) -> None:
    """Issue 17: the live footer was rendered after each attempt only, so the conclusions the
    last attempt brought never reached it while the final summary counted them."""
    seen: list[tuple[int, int]] = []
    agent = ScriptedAgent("solo", [adder("a")], conclude=_passes)
    summary, _ = _run(
        tmp_path,
        campaign_config(1, _switches(memory=True)),
        [agent],
        on_progress=lambda state: seen.append((state.conclusions, state.retracted)),
    )
    assert summary.conclusions == 1
    assert seen[-1] == (summary.conclusions, summary.retracted)
