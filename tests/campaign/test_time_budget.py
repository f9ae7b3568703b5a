"""The wall-clock budget (`budget.time_s`): a campaign stops on time, and a resume continues with
what is left. Real LocalSandbox evaluations of the vector_add sample with a scripted team whose
candidates are slow enough that the candidate budget alone would take minutes; the asserts are on
what the campaign recorded (stop reason, deadline, time used, when each attempt started), never
on how long anything took. Two agents share one timed slot, so a candidate proposed in time
waits for the other's evaluation: it is admitted (its `started_at`) only when it gets the slot,
and turned away unrecorded when the deadline has passed by then."""

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from scripted import ScriptedAgent, adder, campaign_config

from kernelarc.campaign import run_campaign
from kernelarc.config import BudgetConfig, CampaignConfig, CoordinationConfig
from kernelarc.errors import ConfigError
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import read_campaign_record
from kernelarc.schema import Attempt
from kernelarc.tracking.null_tracker import NullTracker

pytestmark = pytest.mark.slow

CANDIDATES = 40
#: Per session (the first run, then the resume). The asserts need, per session, one candidate
#: admitted (the first is, at once) and the budget, not the candidates, to end it (40 per agent
#: take minutes). Every second here is waited twice, plus one candidate's overrun per session.
TIME_S = 12.0
SLEEP_S = 0.5  # per call: a candidate takes seconds, 40 of them minutes


AGENTS = 2  # in parallel, for one timed slot: one candidate always waits for the other's


def _team(first: int) -> list[ScriptedAgent]:
    return [
        ScriptedAgent(
            f"slow{k}",
            [adder(f"t{k}_{i}", sleep_s=SLEEP_S) for i in range(first, first + CANDIDATES)],
        )
        for k in range(AGENTS)
    ]


def _config(time_s: float, resume: Path | None = None) -> CampaignConfig:
    cfg = campaign_config(CANDIDATES, CoordinationConfig(memory=False), max_parallel=AGENTS)
    budget = BudgetConfig(candidates=CANDIDATES, max_parallel=AGENTS, time_s=time_s)
    return replace(cfg, budget=budget, resume=str(resume) if resume else None)


def _started(attempt: Attempt) -> datetime:
    return datetime.fromisoformat(attempt.started_at)


def test_a_campaign_stops_on_time_and_resumes_with_what_is_left(tmp_path: Path) -> None:
    summary = run_campaign(_config(TIME_S), tmp_path, NullTracker(), team=_team(0))
    record = read_campaign_record(tmp_path)
    attempts = read_attempts(tmp_path / "attempts.jsonl")
    assert summary.stop_reason == record.stop_reason == "time_budget"
    assert record.time_budget_s == TIME_S and record.deadline_at is not None
    assert 0 < len(attempts) < CANDIDATES
    deadline = datetime.fromisoformat(record.deadline_at)
    assert all(_started(a) <= deadline for a in attempts)  # none started after the deadline
    used = record.time_used_s
    assert used == summary.time_used_s > 0

    # A resume with a larger total continues with what is left, and keeps counting.
    more = used + TIME_S
    run_campaign(_config(more, tmp_path), tmp_path, NullTracker(), team=_team(100))
    resumed = read_campaign_record(tmp_path)
    after = read_attempts(tmp_path / "attempts.jsonl")
    assert resumed.stop_reason == "time_budget" and len(resumed.resumed_at) == 1
    assert resumed.time_budget_s == more and resumed.time_used_s > used
    assert len(attempts) < len(after) < CANDIDATES + len(attempts)
    assert resumed.deadline_at is not None
    new_deadline = datetime.fromisoformat(resumed.deadline_at)
    assert all(_started(a) <= new_deadline for a in after[len(attempts) :])
    assert new_deadline > deadline

    # With nothing left, a resume evaluates nothing.
    spent = resumed.time_used_s
    final = run_campaign(_config(spent, tmp_path), tmp_path, NullTracker(), team=_team(200))
    assert final.stop_reason == "time_budget"
    assert len(read_attempts(tmp_path / "attempts.jsonl")) == len(after)


def test_without_a_time_budget_the_candidates_decide(tmp_path: Path) -> None:
    cfg = campaign_config(2, CoordinationConfig(memory=False))
    summary = run_campaign(
        cfg, tmp_path, NullTracker(), team=[ScriptedAgent("a", [adder("a")] * 1)]
    )
    assert summary.stop_reason == "agents_done"
    record = read_campaign_record(tmp_path)
    assert record.time_budget_s is None and record.deadline_at is None
    summary = run_campaign(
        replace(cfg, resume=str(tmp_path)),
        tmp_path,
        NullTracker(),
        team=[ScriptedAgent("a", [adder("b"), adder("c")])],
    )
    assert summary.stop_reason == "candidates"


def test_a_time_budget_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"budget\.time_s must be > 0"):
        BudgetConfig(time_s=0)
