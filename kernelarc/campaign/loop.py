"""The campaign loop: agents propose, the guard screens, the sandbox evaluates, the guard judges,
tracking records, coordination shares.

Two kinds of concurrency, bounded separately: every agent proposes in its own thread
(agent_worker.py; at most `budget.max_proposing` inside `propose`/`conclude` at once, default
all), while evaluations are bounded by the executor's timed slots (one per GPU;
`budget.max_parallel` caps them); one candidate budget is shared by the team, and so is the
wall-clock budget `budget.time_s` (time_budget.py: no proposal after the deadline, no candidate
started at its slot that is not expected to finish before it, however long it queued there).
A candidate's path (static rules, evaluation, the guard's judgement) is candidate.py; recording
it (attempts.jsonl before anything else sees it, the shared state, the tracker) is recorder.py.
Each context is built by the `Coordinator` per the `coordination.*` switches (shared
conclusions, peer snapshots, drafting); after an attempt the agent's `conclude` hook may publish
conclusions to `conclusions.jsonl` (memory on). With `resume` set, assembling the campaign
(assemble.py) first takes all of that back from the run dir (restore.py). What goes around a
campaign (run dir, config.yaml, tracker start and finish, MLflow sync) is lifecycle.py.
"""

import logging
import threading
import time
from pathlib import Path

from kernelarc.agents import Agent
from kernelarc.campaign.agent_worker import AgentWorker
from kernelarc.campaign.assemble import AssembledCampaign, assemble_campaign
from kernelarc.campaign.candidate import CandidateEvaluation
from kernelarc.campaign.proposal_order import lead_first
from kernelarc.campaign.recorder import AttemptRecorder
from kernelarc.campaign.state import (
    CampaignState,
    CampaignSummary,
    IdleCallback,
    ProgressCallback,
    StateCallback,
)
from kernelarc.config import CampaignConfig
from kernelarc.llm.usage import log_team_usage
from kernelarc.rundir.run_record import CampaignRecord, write_campaign_record
from kernelarc.schema import Attempt, EvalStatus, utc_now
from kernelarc.schema.throughput import ThroughputReport
from kernelarc.tracking import Tracker

logger = logging.getLogger(__name__)


def run_campaign(
    cfg: CampaignConfig,
    run_dir: Path,
    tracker: Tracker,
    on_attempt: ProgressCallback | None = None,
    team: list[Agent] | None = None,
    on_progress: StateCallback | None = None,
    on_idle: IdleCallback | None = None,
) -> CampaignSummary:
    """Run one campaign into `run_dir` and return its summary.

    `team` replaces the team built from `cfg.agents.team` (scripted agents in tests).
    `on_attempt` is called once per recorded attempt; `on_progress` whenever the state changes
    (after each attempt, and after conclusions are published), so a live view that renders the
    state shows the counts the summary reports; `on_idle(agent, reason)` hears of each agent that
    does not apply to the problem.

    A KeyboardInterrupt (Ctrl-C) while the agents run sets `state.stopped`, so nothing more is
    recorded, closes the executor (which ends the evaluations in flight) and propagates;
    campaign.json then still says RUNNING: the caller marks it (cli/campaign.py).

    With `cfg.resume` set, `run_dir` is that killed campaign's run dir and the campaign goes on
    from its attempts.jsonl (restore.py): the budget they spent, the incumbent, the conclusions
    board, the plateau counters and each agent's own history; the tracker must already have
    been re-attached (`MlflowTracker.resume_campaign`).

    Raises:
        ConfigError: the problem, device or team cannot be set up, or the run dir to resume is
            not one (nothing is evaluated then).
    """
    campaign = assemble_campaign(cfg, run_dir, team)
    throughput = run_assembled(campaign, tracker, on_attempt, on_progress, on_idle)
    return finish_campaign(campaign, throughput)


JOIN_POLL_S = 0.5
"""How often the main thread wakes while the agents run, to raise a pending Ctrl-C."""


def run_assembled(
    campaign: AssembledCampaign,
    tracker: Tracker,
    on_attempt: ProgressCallback | None = None,
    on_progress: StateCallback | None = None,
    on_idle: IdleCallback | None = None,
) -> ThroughputReport:
    """Run the team, one thread per agent, until every agent stops; close the executor (also
    when interrupted) and return this process's throughput. The callbacks: `run_campaign`."""
    c = campaign
    for agent in c.team:
        tracker.start_agent(agent.name, agent.strategy)
    started = time.monotonic()

    def progress(attempt: Attempt, state: CampaignState) -> None:
        # Under the state lock: the live view's throughput, and the time used so far on disk
        # (a kill loses at most the time since the last attempt).
        state.throughput = c.executor.throughput(
            wall_s=time.monotonic() - started,
            candidates=len(state.attempts) - c.restored,
            propose_s=state.propose_s,
        )
        used = {"time_used_s": round(state.clock.used_s(), 3)}
        write_campaign_record(c.run_dir, c.record.model_copy(update=used))
        if on_attempt is not None:
            on_attempt(attempt, state)

    recorder = AttemptRecorder(
        c.problem.name,
        c.cfg.budget.max_infra_failures,
        c.state,
        c.log,
        tracker,
        c.coordinator,
        on_attempt=progress,
        on_progress=on_progress,
    )
    evaluation = CandidateEvaluation(
        c.cfg, c.problem, c.device, c.executor, c.state, recorder, c.ceiling
    )
    worker = AgentWorker(
        c.state,
        c.coordinator,
        evaluation,
        recorder,
        lead_first(c.team, c.problem, c.device),
        max_proposing=c.cfg.budget.max_proposing,
        on_progress=on_progress,
        on_idle=on_idle,
    )
    threads = [
        threading.Thread(target=worker.run, args=(agent,), name=f"agent-{agent.name}", daemon=True)
        for agent in c.team
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            # A timed join returns to Python every JOIN_POLL_S: a Ctrl-C that the kernel handed
            # to an agent thread is only raised here, and a main thread blocked in an untimed
            # join would not see it until that agent stopped.
            while thread.is_alive():
                thread.join(JOIN_POLL_S)
        wall_s = time.monotonic() - started
    except BaseException:
        with c.state.lock:
            c.state.stopped = True  # before the executor closes: a cut-short run is no attempt
        raise
    finally:
        # Warm sandboxes (the Docker pool) and Ray actors hold resources until closed.
        c.executor.close()
    # Of this process only (a resumed campaign's earlier attempts took another wall clock).
    return c.executor.throughput(
        wall_s=wall_s, candidates=len(c.state.attempts) - c.restored, propose_s=c.state.propose_s
    )


def finish_campaign(campaign: AssembledCampaign, throughput: ThroughputReport) -> CampaignSummary:
    """Write the final campaign.json and return the summary (every agent has stopped)."""
    return _finish(campaign.run_dir, campaign.record, campaign.state, campaign.team, throughput)


def _finish(
    run_dir: Path,
    record: CampaignRecord,
    state: CampaignState,
    team: list[Agent],
    throughput: ThroughputReport,
) -> CampaignSummary:
    """Write the final campaign.json and return the summary (every agent has stopped)."""
    usage = log_team_usage(team)
    status = "FAILED" if state.aborted else "FINISHED"
    stop_reason = _stop_reason(state)
    time_used_s = round(state.clock.used_s(), 3)
    write_campaign_record(
        run_dir,
        record.model_copy(
            update={
                "finished_at": utc_now(),
                "status": status,
                "best_proposal_id": state.best.proposal.id if state.best else None,
                "best_speedup": state.best_speedup,
                "abort_reason": state.aborted,
                "conclusions": state.conclusions,
                "llm_tokens": usage.prompt_tokens + usage.completion_tokens,
                "llm_cost_usd": round(usage.cost_usd, 6),
                "throughput": throughput,
                "stop_reason": stop_reason,
                "time_used_s": time_used_s,
            }
        ),
    )
    budget = state.clock.time_s
    logger.info(
        "campaign stopped (%s) after %d attempts, %.1f s used%s",
        stop_reason,
        len(state.attempts),
        time_used_s,
        f" of {budget:g} s" if budget else "",
    )
    return CampaignSummary(
        run_dir=run_dir,
        problem=record.problem,
        device=record.device,
        attempts=len(state.attempts),
        passed=sum(1 for a in state.attempts if a.status == EvalStatus.PASSED),
        failures=state.failures,
        best=state.best,
        status=status,
        guard_evaluations=state.guard_evaluations,
        conclusions=state.conclusions,
        retracted=state.retracted,
        drafts=state.drafts,
        throughput=throughput,
        stop_reason=stop_reason,
        time_used_s=time_used_s,
    )


def _stop_reason(state: CampaignState) -> str:
    """Why the agents stopped (after they all have)."""
    if state.aborted:
        return "aborted"
    if state.clock.stopped:
        return "time_budget"
    if state.reserved >= state.budget:
        return "candidates"
    return "agents_done"
