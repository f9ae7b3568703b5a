"""The campaign loop: agents propose, the guard screens, the sandbox evaluates, the guard judges,
tracking records, coordination shares.

Two kinds of concurrency, bounded separately: every agent proposes in its own thread (at most
`budget.max_proposing` inside `propose`/`conclude` at once, default all), while evaluations are
bounded by the executor's timed slots (one per GPU; `budget.max_parallel` caps them); one candidate
budget is shared by the team, and so is the wall-clock budget `budget.time_s` (time_budget.py:
no proposal after the deadline, no candidate started at its slot that is not expected to finish
before it, however long it queued there). A blocked
proposal (static rules) never reaches a sandbox. A passing
candidate is judged under the guard lock, so the incumbent cannot change while the guard re-times
and confirms it (those extra evaluations take slots but not budget). An attempt is appended to
attempts.jsonl before anything else sees it. Each context is built by the `Coordinator` per the
`coordination.*` switches (shared conclusions, peer snapshots, drafting); after an attempt the
agent's `conclude` hook may publish conclusions to `conclusions.jsonl` (memory on). With `resume`
set, the loop first takes all of that back from the run dir (restore.py).
"""

import contextlib
import functools
import logging
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from kernelarc.agents import Agent, AgentContext, make_team
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.campaign.device import resolve_device
from kernelarc.campaign.proposal_order import ProposalOrder
from kernelarc.campaign.restore import check_resume_dir, resume_into, time_used_before
from kernelarc.campaign.time_budget import TimeBudget
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError
from kernelarc.executor import Admit, Executor, NotAdmitted, Priority, make_executor
from kernelarc.guard import (
    Challenge,
    Score,
    blocking,
    guard_settings,
    is_challenger,
    judge_attempt,
    roofline_for,
    roofline_message,
    run_challenge,
    scan_solution,
    score_traces,
)
from kernelarc.guard.ceilings import ResolvedCeiling, resolve_ceiling
from kernelarc.guard.challenge import evaluate_retrying
from kernelarc.guard.score import interval_fields
from kernelarc.guard.verdict import Judgement
from kernelarc.llm.usage import log_team_usage
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.problems.files import Problem
from kernelarc.rundir import ATTEMPTS_FILE, PROBLEM_DIR
from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.rundir.run_record import (
    CampaignRecord,
    campaign_roofline,
    write_campaign_record,
)
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalResult,
    EvalStatus,
    HangPolicy,
    Proposal,
    TimingConfig,
    Verdict,
    utc_now,
)
from kernelarc.schema.coordination import Conclusion, TeamMember
from kernelarc.schema.guard_record import GuardRecord, GuardSettings
from kernelarc.schema.throughput import ThroughputReport
from kernelarc.tracking import Tracker

logger = logging.getLogger(__name__)

#: An agent that keeps proposing already-evaluated candidates is stopped after this many in a row.
_MAX_DUPLICATES_IN_A_ROW = 25


@dataclass
class CampaignState:
    """Mutable campaign state, guarded by `lock`."""

    budget: int
    attempts: list[Attempt] = field(default_factory=list)
    seen_ids: set[str] = field(default_factory=set)
    reserved: int = 0
    best: Attempt | None = None
    failures: int = 0
    infra_failures_in_a_row: int = 0
    guard_evaluations: int = 0
    aborted: str = ""
    conclusions: int = 0
    """Conclusions published to the shared memory."""
    retracted: int = 0
    """Conclusions retracted since."""
    drafts: int = 0
    """Drafted proposals accepted into the budget."""
    roster: tuple[tuple[str, str], ...] = ()
    """(name, strategy) of every agent of the team, in team order."""
    stopped: bool = False
    """Set when the campaign is stopped from outside (Ctrl-C): no attempt is recorded after it,
    so an evaluation cut short by the shutdown is not mistaken for a result."""
    clock: TimeBudget = field(default_factory=lambda: TimeBudget(None))
    """The wall-clock budget (budget.time_s) and the time used."""
    propose_s: float = 0.0
    """Seconds the agents spent in `propose` (summed over agents)."""
    throughput: ThroughputReport | None = None
    """The executor's throughput so far (updated after each attempt, for the live view)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    guard_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a passing candidate is judged: the incumbent is stable meanwhile."""

    @property
    def best_speedup(self) -> float | None:
        """Speedup of the best attempt so far."""
        return self.best.speedup if self.best else None


ProgressCallback = Callable[[Attempt, CampaignState], None]
StateCallback = Callable[[CampaignState], None]
IdleCallback = Callable[[str, str], None]
"""Called once per agent that proposes nothing at all, with its name and the reason."""


class CampaignStopped(Exception):
    """Raised in an agent's thread when the campaign was stopped (CampaignState.stopped)."""


@dataclass(frozen=True)
class CampaignSummary:
    """What a finished campaign reports."""

    run_dir: Path
    problem: str
    device: str
    attempts: int
    passed: int
    failures: int
    best: Attempt | None
    status: str
    guard_evaluations: int = 0
    """Extra sandbox evaluations the guard made (re-timing, confirmation); not in the budget."""
    conclusions: int = 0
    """Conclusions published to the shared memory."""
    retracted: int = 0
    """Of those, retracted by the end."""
    drafts: int = 0
    """Drafted proposals evaluated."""
    throughput: ThroughputReport | None = None
    """Candidates per minute, slot use, queue wait, overheads (also in campaign.json)."""
    stop_reason: str = ""
    """`candidates`, `time_budget`, `agents_done` or `aborted` (campaign.json)."""
    time_used_s: float = 0.0
    """Wall time used, earlier sessions of a resumed campaign included."""


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


@dataclass
class AssembledCampaign:
    """Everything a campaign runs with, built by `assemble_campaign` before any agent starts."""

    cfg: CampaignConfig
    run_dir: Path
    problem: Problem
    team: list[Agent]
    executor: Executor
    """Prepared (every slot's first runner started); closed by `run_assembled`."""
    device: str
    ceiling: ResolvedCeiling
    coordinator: Coordinator
    record: CampaignRecord
    """campaign.json as written at the start (a resume's, with its earlier sessions)."""
    log: AttemptLog
    state: CampaignState
    restored: int
    """Attempts restored from an earlier session (not this process's throughput)."""


def assemble_campaign(
    cfg: CampaignConfig, run_dir: Path, team: list[Agent] | None = None
) -> AssembledCampaign:
    """Build the campaign: problem, team, executor (prepared), the run dir's problem copy, the
    roofline ceilings, the coordinator, campaign.json and the attempt log, and, with
    `cfg.resume`, everything an earlier session left (restore.py). Nothing is evaluated.

    Raises:
        ConfigError: the problem, device or team cannot be set up, or the run dir to resume is
            not one; the executor is closed again when anything after it fails.
    """
    resuming = cfg.resume is not None
    if resuming:
        check_resume_dir(cfg, run_dir)
    # The time budget starts now: set-up counts (a resume goes on from the time it had used).
    clock = TimeBudget(cfg.budget.time_s, time_used_before(run_dir) if resuming else 0.0)
    problem = resolve_problem(cfg.problem, cfg.workloads)
    kinds = [""] * len(team) if team is not None else [spec.kind for spec in cfg.agents.team]
    team = team if team is not None else make_team(list(cfg.agents.team), cfg.seed, llm=cfg.llm)
    executor = make_executor(
        cfg.executor, cfg.sandbox, cfg.device, cfg.budget.max_parallel, resolve_device
    )
    try:
        return _assemble_with(cfg, run_dir, problem, team, kinds, executor, clock)
    except BaseException:
        executor.close()  # its warm sandboxes, Docker containers or Ray actors
        raise


def _assemble_with(
    cfg: CampaignConfig,
    run_dir: Path,
    problem: Problem,
    team: list[Agent],
    kinds: list[str],
    executor: Executor,
    clock: TimeBudget,
) -> AssembledCampaign:
    resuming = cfg.resume is not None
    device = executor.device
    run_dir.mkdir(parents=True, exist_ok=True)
    problem_copy = run_dir / PROBLEM_DIR
    if not (resuming and (problem_copy / "definition.json").is_file()):
        _copy_problem(problem, problem_copy, cfg.workloads)
    # Ceilings before any candidate runs: measured on an idle GPU (cached per model/driver).
    ceiling = resolve_ceiling(cfg.guard.roofline, device, cfg.sandbox.gpu)
    if ceiling.note:
        logger.warning("roofline ceilings: %s", ceiling.note)
    # Every slot's first runner starts now, not on its first candidate's path: the same device,
    # timeout and problem dir every evaluation below uses (`_request`, `_evaluate`).
    executor.prepare(timeout_s=cfg.eval.timeout_s, problem_dir=str(problem.path.resolve()))
    coordinator = Coordinator(cfg.coordination, problem, device, team, run_dir)
    record = CampaignRecord(
        name=cfg.name,
        problem=problem.name,
        problem_dir=str(problem_copy),
        source_problem_dir=str(problem.path.resolve()),
        workloads=cfg.workloads,
        device=device,
        seed=cfg.seed,
        started_at=utc_now(),
        coordination=coordinator.settings(cfg.guard.enabled and cfg.coordination.guard),
        team=[
            TeamMember(
                name=agent.name,
                strategy=agent.strategy,
                kind=kind,
                model=getattr(agent, "model", None),
            )
            for agent, kind in zip(team, kinds, strict=True)
        ],
        roofline=campaign_roofline(problem.definition, list(problem.workloads), ceiling),
        time_budget_s=cfg.budget.time_s,
        time_used_s=round(clock.used_before_s, 3),
        deadline_at=clock.deadline_at(),
    )
    # The log first: it cuts a truncated last line (a kill mid-write) before it is read back.
    log = AttemptLog(run_dir / ATTEMPTS_FILE)
    state = CampaignState(budget=cfg.budget.candidates, roster=coordinator.roster, clock=clock)
    restored = 0
    if resuming:
        record, restored = resume_into(run_dir, record, state, coordinator, team)
    write_campaign_record(run_dir, record)
    return AssembledCampaign(
        cfg=cfg,
        run_dir=run_dir,
        problem=problem,
        team=team,
        executor=executor,
        device=device,
        ceiling=ceiling,
        coordinator=coordinator,
        record=record,
        log=log,
        state=state,
        restored=restored,
    )


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

    worker = _AgentWorker(
        c.cfg,
        c.problem,
        c.device,
        c.executor,
        c.state,
        c.log,
        tracker,
        progress,
        c.coordinator,
        c.ceiling,
    )
    worker.on_progress = on_progress
    worker.on_idle = on_idle
    worker.team_order.update({agent.name: i for i, agent in enumerate(c.team)})
    threads = [
        threading.Thread(target=worker.run, args=(agent,), name=f"agent-{agent.name}", daemon=True)
        for agent in c.team
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
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


def _copy_problem(problem: Problem, dest: Path, workloads: str) -> Path:
    """Keep the exact problem files with the run, so export and eval never depend on the source."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem.path / "definition.json", dest / "definition.json")
    shutil.copyfile(problem.path / workloads, dest / "workload.jsonl")
    return dest


class _AgentWorker:
    """Runs one agent's propose -> evaluate -> record loop; shared state under a lock."""

    def __init__(
        self,
        cfg: CampaignConfig,
        problem: Problem,
        device: str,
        executor: Executor,
        state: CampaignState,
        log: AttemptLog,
        tracker: Tracker,
        on_attempt: ProgressCallback | None,
        coordinator: Coordinator,
        ceiling: ResolvedCeiling | None = None,
    ) -> None:
        self.cfg = cfg
        self.ceiling = ceiling
        self.problem = problem
        self.device = device
        self.executor = executor
        self.state = state
        self.log = log
        self.tracker = tracker
        self.on_attempt = on_attempt
        self.on_progress: StateCallback | None = None
        self.on_idle: IdleCallback | None = None
        self.team_order: dict[str, int] = {}
        """Each agent's place in the team: the second key of its candidates' slot priority."""
        self._order = ProposalOrder(self.team_order)
        self.coordinator = coordinator
        # Proposal concurrency, separate from the evaluation slots above.
        limit = cfg.budget.max_proposing
        self.proposing: AbstractContextManager[object] = (
            threading.BoundedSemaphore(limit) if limit is not None else contextlib.nullcontext()
        )
        warmup, iterations = cfg.eval.timing_for(device)
        self.timing = TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=cfg.eval.budget_for(device)
        )
        # coordination.guard=false (the ablation arm) turns the guard off whatever guard.* says.
        guard_cfg = replace(cfg.guard, enabled=cfg.guard.enabled and cfg.coordination.guard)
        self.settings: GuardSettings = guard_settings(guard_cfg, device)

    def run(self, agent: Agent) -> None:
        """Propose, evaluate, record and conclude until the budget is spent or the agent stops."""
        try:
            self._run(agent)
        except CampaignStopped:
            return
        except Exception:
            if self.state.stopped:  # the shutdown broke an evaluation: not this agent's fault
                return
            raise

    def _run(self, agent: Agent) -> None:
        duplicates = 0
        proposed = 0
        taken = 0  # this agent's candidates that took a budget slot so far
        while True:
            with self.state.lock:
                if self.state.aborted or self.state.reserved >= self.state.budget:
                    return
                if self.state.clock.expired():
                    logger.info("agent %s stops: the time budget is spent", agent.name)
                    return
                ctx = self._context(agent.name)
            proposing_since = time.monotonic()
            self._order.started(agent.name, taken)
            try:
                with self.proposing:
                    proposal = agent.propose(ctx)
            except Exception:  # an agent bug must not end the campaign (isolation boundary)
                logger.exception("agent %s failed to propose; retiring it", agent.name)
                return
            finally:
                self._order.finished(agent.name)
                with self.state.lock:
                    self.state.propose_s += time.monotonic() - proposing_since
            if proposal is None:
                logger.info("agent %s has nothing new to propose", agent.name)
                self._report_idle(agent, proposed)
                return
            proposed += 1
            proposal = self.coordinator.stamp(proposal, ctx)
            with self.state.lock:
                if proposal.id in self.state.seen_ids:
                    duplicates += 1
                    if duplicates >= _MAX_DUPLICATES_IN_A_ROW:
                        logger.warning("agent %s only repeats itself; stopping it", agent.name)
                        return
                    continue
                if self.state.reserved >= self.state.budget:
                    return
                if not self.state.clock.fits():
                    logger.info(
                        "agent %s stops: %s is not expected to finish before the deadline "
                        "(%.1f s left, a candidate takes %.1f s)",
                        agent.name,
                        proposal.id,
                        self.state.clock.left_s() or 0.0,
                        self.state.clock.expected_s(),
                    )
                    return
                duplicates = 0
                self.state.seen_ids.add(proposal.id)
                ordinal = self.state.reserved
                self.state.reserved += 1
                self.coordinator.accepted(proposal)
                self.state.drafts += int(proposal.draft)
            candidate_since = time.monotonic()
            # Breadth-first in team order at the slots (turn_order.py): every agent's n-th
            # candidate before any agent's (n+1)-th.
            priority = (taken, self.team_order.get(agent.name, len(self.team_order)))
            self._order.wait_for_earlier(agent.name, taken)
            taken += 1
            try:
                attempt = self._screen_evaluate_and_record(proposal, ordinal, priority)
            except NotAdmitted:
                with self.state.lock:
                    self._withdraw(proposal)
                    left = self.state.clock.left_s() or 0.0
                logger.info(
                    "agent %s stops: %s reached its slot %.1f s before the deadline, less than "
                    "a candidate takes; dropped unrecorded",
                    agent.name,
                    proposal.id,
                    left,
                )
                return
            with self.state.lock:
                self.state.clock.finished(time.monotonic() - candidate_since)
            self._conclude(agent, attempt)

    def _withdraw(self, proposal: Proposal) -> None:
        """Give back the budget slot of a proposal the time budget turned away at its slot (under
        the state lock): it was never evaluated, so a resume may propose it again."""
        self.state.reserved -= 1
        self.state.seen_ids.discard(proposal.id)
        self.state.drafts -= int(proposal.draft)

    def _admit(self, admitted: list[str]) -> bool:
        """Whether a candidate that now holds a slot may start there: not past the deadline, and
        expected to finish before it (`TimeBudget.fits`). Queued candidates are judged at their
        turn, not when they were proposed. The first admission's time goes to `admitted` (the
        attempt's `started_at`)."""
        with self.state.lock:
            if self.state.clock.expired() or not self.state.clock.fits():
                return False
        if not admitted:
            admitted.append(utc_now())
        return True

    def _report_idle(self, agent: Agent, proposed: int) -> None:
        """Tell `on_idle` why an agent that never proposed does not apply (if it says)."""
        reason_of = getattr(agent, "idle_reason", None)
        if proposed or self.on_idle is None or not callable(reason_of):
            return
        reason = reason_of()
        if isinstance(reason, str) and reason:
            self.on_idle(agent.name, reason)

    def _context(self, agent: str) -> AgentContext:
        """The agent's context (under the state lock)."""
        return self.coordinator.context(
            agent, self.state.attempts, frozenset(self.state.seen_ids), self.state.best
        )

    def _conclude(self, agent: Agent, attempt: Attempt) -> None:
        """The agent's conclusions on its attempt (shared memory on only)."""
        if self.coordinator.board is None:
            return
        with self.state.lock:
            ctx = self._context(agent.name)
        with self.proposing:
            published = self.coordinator.conclude(agent, attempt, ctx)
        if not published:
            return
        with self.state.lock:
            self.state.conclusions += len(published)
            if self.on_progress is not None:
                self.on_progress(self.state)
        self._log_conclusions(published)

    def _log_conclusions(self, conclusions: list[Conclusion]) -> None:
        """Report conclusions (published or retracted) to the tracker; it queues, never waits
        on its backend, so this may run under the state lock (`_record`)."""
        for conclusion in conclusions:
            try:
                self.tracker.log_conclusion(conclusion)
            except KernelarcError:
                logger.exception("tracking failed for conclusion %s", conclusion.id)

    def _request(self, proposal: Proposal) -> EvalRequest:
        return EvalRequest(
            definition=self.problem.definition,
            workloads=list(self.problem.workloads),
            solution=proposal.solution,
            device="cuda" if self.device == "cuda" else "cpu",
            seed=self.cfg.eval.seed,
            correctness_rounds=self.cfg.eval.correctness_rounds,
            timing=self.timing,
            problem_dir=str(self.problem.path.resolve()),
            hang=self._hang(),
        )

    def _hang(self) -> HangPolicy:
        """The per-workload deadline of a silent candidate (eval.hang_*)."""
        default = HangPolicy.for_device(self.device)
        factor = self.cfg.eval.hang_factor
        return HangPolicy(
            reference_factor=default.reference_factor if factor is None else factor,
            allowance_s=self.cfg.eval.hang_allowance_s,
        )

    def _evaluate_candidate(
        self, request: EvalRequest, admit: Admit, priority: Priority
    ) -> EvalResult:
        """A candidate's own evaluation (screen, then timed), admitted at each slot by `admit`,
        waiting there by `priority`; raises SandboxError or NotAdmitted."""
        return self.executor.evaluate_candidate(
            request, timeout_s=self.cfg.eval.timeout_s, admit=admit, priority=priority
        )

    def _evaluate(self, request: EvalRequest) -> EvalResult:
        """One timed evaluation in a slot of its own (the guard's re-timing and confirmation come
        here too); raises SandboxError."""
        return self.executor.evaluate(
            request, timeout_s=self.cfg.eval.timeout_s, kind="timed", stage="guard"
        )

    def _screen_evaluate_and_record(
        self, proposal: Proposal, ordinal: int, priority: Priority = ()
    ) -> Attempt:
        started = utc_now()
        t0 = time.monotonic()
        findings = scan_solution(proposal.solution)
        record = GuardRecord(settings=self.settings, findings=findings)
        if blocking(findings) and self.settings.block_static:
            logger.warning(
                "proposal %s blocked by static rules %s",
                proposal.id,
                sorted({f.rule for f in blocking(findings)}),
            )
            with self.state.lock:
                return self._record(proposal, None, record, "", started, 0.0)
        request = self._request(proposal)
        # Screened for correctness first where the executor has a correctness pool; a sandbox
        # failure (not the candidate's) is retried before the attempt is INFRA_ERROR.
        admitted: list[str] = []

        def evaluate(request: EvalRequest) -> EvalResult:
            admit = functools.partial(self._admit, admitted)
            return self._evaluate_candidate(request, admit, priority)

        done = evaluate_retrying(evaluate, request, self.cfg.guard.infra_retries)
        started = admitted[0] if admitted else started
        result = done.result
        error = done.error if result is None else ""
        if result is None:
            logger.error("sandbox failed on %s: %s", proposal.id, error)
        wall = time.monotonic() - t0
        if result is None or not self.settings.enabled:
            with self.state.lock:
                return self._record(proposal, result, record, error, started, wall)
        score = score_traces(result.traces)
        if score.status != EvalStatus.PASSED:
            with self.state.lock:
                return self._record(proposal, result, record, error, started, wall)
        # A passing candidate: judged under the guard lock so the incumbent stays put.
        with self.state.guard_lock:
            with self.state.lock:
                incumbent = self.state.best
            record = self._measure(proposal, request, result, score, record, incumbent, ordinal)
            with self.state.lock:
                return self._record(proposal, result, record, error, started, wall)

    def _measure(
        self,
        proposal: Proposal,
        request: EvalRequest,
        result: EvalResult,
        score: Score,
        record: GuardRecord,
        incumbent: Attempt | None,
        ordinal: int,
    ) -> GuardRecord:
        """Roofline bounds, then re-timing and confirmation for a challenger."""
        hardware = next(
            (t.evaluation.environment.hardware for t in result.traces if t.evaluation), ""
        )
        device_key, bounds = roofline_for(
            self.cfg.guard,
            self.problem.definition,
            list(self.problem.workloads),
            self.device,
            hardware,
            self.ceiling,
        )
        record = record.model_copy(
            update={
                "roofline": bounds,
                "device": device_key,
                "incumbent_id": incumbent.proposal.id if incumbent else None,
                "incumbent_index": incumbent.index if incumbent else None,
            }
        )
        incumbent_speedup = incumbent.speedup if incumbent else None
        if not is_challenger(score.speedup, incumbent_speedup):
            return record
        if roofline_message(score.latencies_ms, record):
            return record
        challenge = Challenge(
            proposal=proposal,
            incumbent=incumbent,
            request=request,
            confirm_seed=self.cfg.eval.seed + 1 + ordinal,
        )
        return run_challenge(challenge, record, self._evaluate)

    def _record(
        self,
        proposal: Proposal,
        result: EvalResult | None,
        record: GuardRecord,
        error: str,
        started: str,
        wall: float,
    ) -> Attempt:
        """Judge, append to attempts.jsonl, update state and coordination, then report (under
        the state lock)."""
        state = self.state
        if state.stopped:
            raise CampaignStopped
        score: Score | None = score_traces(result.traces) if result is not None else None
        incumbent_speedup = state.best_speedup
        judgement = _judge(score, record, incumbent_speedup)
        if result is not None:
            state.infra_failures_in_a_row = 0
        elif judgement.status == "INFRA_ERROR":
            state.infra_failures_in_a_row += 1
            if state.infra_failures_in_a_row >= self.cfg.budget.max_infra_failures:
                state.aborted = f"{state.infra_failures_in_a_row} infrastructure failures in a row"
        new_best = judgement.verdict == Verdict.NEW_BEST
        passed_score = score if score is not None and score.status == EvalStatus.PASSED else None
        attempt = Attempt(
            index=len(state.attempts),
            problem=self.problem.name,
            proposal=proposal,
            status=judgement.status,
            traces=result.traces if result is not None else [],
            speedup=passed_score.speedup if passed_score else None,
            latency_ms=passed_score.latency_ms if passed_score else None,
            **interval_fields(passed_score.interval if passed_score else None),
            verdict=judgement.verdict,
            best_speedup_after=(
                passed_score.speedup if new_best and passed_score else state.best_speedup
            ),
            started_at=started,
            finished_at=utc_now(),
            wall_s=round(wall, 3),
            stderr_tail=result.stderr_tail if result is not None else "",
            error=error,
            confirmed=judgement.confirmed,
            guard=record.model_copy(update={"reason": judgement.reason}),
        )
        # attempts.jsonl first: it is the source of truth if anything after this fails.
        self.log.append(attempt)
        state.attempts.append(attempt)
        state.guard_evaluations += record.extra_evaluations
        if record.extra_evaluations:
            logger.info(
                "attempt %d (%s): %s after %d guard evaluations: %s",
                attempt.index,
                proposal.id,
                judgement.verdict,
                record.extra_evaluations,
                judgement.reason,
            )
        if new_best:
            state.best = attempt
        if attempt.status != EvalStatus.PASSED:
            state.failures += 1
        retracted = self.coordinator.observe(attempt)
        state.retracted += len(retracted)
        try:
            # Under the state lock: the tracker only queues the attempt (its writer thread talks
            # to MLflow), so a slow tracking server does not stall the agents.
            self.tracker.log_attempt(attempt)
        except KernelarcError:
            logger.exception("tracking failed for attempt %d; attempts.jsonl has it", attempt.index)
        self._log_conclusions(retracted)
        if self.on_attempt is not None:
            self.on_attempt(attempt, state)
        if self.on_progress is not None:
            self.on_progress(state)
        return attempt


def _judge(score: Score | None, record: GuardRecord, incumbent_speedup: float | None) -> Judgement:
    """The guard's verdict; no score means blocked before evaluation or a sandbox failure."""
    if score is None:
        status: EvalStatus | Literal["INFRA_ERROR"] = "INFRA_ERROR"
        return judge_attempt(status, None, (), record, incumbent_speedup)
    return judge_attempt(score.status, score.speedup, score.latencies_ms, record, incumbent_speedup)
