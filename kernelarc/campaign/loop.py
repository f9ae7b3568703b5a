"""The campaign loop: agents propose, the guard screens, the sandbox evaluates, the guard judges,
tracking records.

Each agent runs in its own thread; evaluations are bounded by `budget.max_parallel` slots and by
one shared candidate budget. A blocked proposal (static rules) never reaches a sandbox. A passing
candidate is judged under the guard lock, so the incumbent cannot change while the guard re-times
and confirms it (those extra evaluations take slots but not budget). An attempt is appended to
attempts.jsonl before anything else sees it.
"""

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kernelarc.agents import Agent, AgentContext, make_team
from kernelarc.campaign.device import resolve_device
from kernelarc.campaign.run_record import (
    CampaignRecord,
    campaign_roofline,
    write_campaign_record,
)
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError, SandboxError
from kernelarc.execution import Sandbox, make_sandbox
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
from kernelarc.guard.verdict import Judgement
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.problems.files import Problem
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalResult,
    EvalStatus,
    Proposal,
    TimingConfig,
    Verdict,
    utc_now,
)
from kernelarc.schema.guard_record import GuardRecord, GuardSettings
from kernelarc.tracking import Tracker
from kernelarc.tracking.attempts_log import AttemptLog

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
    lock: threading.Lock = field(default_factory=threading.Lock)
    guard_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a passing candidate is judged: the incumbent is stable meanwhile."""

    @property
    def best_speedup(self) -> float | None:
        """Speedup of the best attempt so far."""
        return self.best.speedup if self.best else None


ProgressCallback = Callable[[Attempt, CampaignState], None]


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


def run_campaign(
    cfg: CampaignConfig,
    run_dir: Path,
    tracker: Tracker,
    on_attempt: ProgressCallback | None = None,
    team: list[Agent] | None = None,
) -> CampaignSummary:
    """Run one campaign into `run_dir` and return its summary.

    `team` replaces the team built from `cfg.agents.team` (scripted agents in tests).

    Raises:
        ConfigError: the problem, device or team cannot be set up (nothing is evaluated then).
    """
    problem = resolve_problem(cfg.problem, cfg.workloads)
    device = resolve_device(cfg.device)
    team = team if team is not None else make_team(list(cfg.agents.team), cfg.seed)
    sandbox = make_sandbox(cfg.sandbox.kind, **cfg.sandbox.options())
    run_dir.mkdir(parents=True, exist_ok=True)
    problem_copy = _copy_problem(problem, run_dir / "problem", cfg.workloads)
    # Ceilings before any candidate runs: measured on an idle GPU (cached per model/driver).
    ceiling = resolve_ceiling(cfg.guard.roofline, device, cfg.sandbox.gpu)
    if ceiling.note:
        logger.warning("roofline ceilings: %s", ceiling.note)
    record = CampaignRecord(
        name=cfg.name,
        problem=problem.name,
        problem_dir=str(problem_copy),
        source_problem_dir=str(problem.path.resolve()),
        workloads=cfg.workloads,
        device=device,
        seed=cfg.seed,
        started_at=utc_now(),
        roofline=campaign_roofline(problem.definition, list(problem.workloads), ceiling),
    )
    write_campaign_record(run_dir, record)
    log = AttemptLog(run_dir / "attempts.jsonl")
    state = CampaignState(budget=cfg.budget.candidates)
    # Timed evaluations must never share a GPU: one slot per device on CUDA. On the CPU the
    # timings are only labelled smoke signals, so evaluations may overlap.
    parallel = 1 if device == "cuda" else cfg.budget.max_parallel
    if parallel < cfg.budget.max_parallel:
        logger.info("device cuda: evaluations run one at a time so timings do not interfere")
    slots = threading.BoundedSemaphore(parallel)
    for agent in team:
        tracker.start_agent(agent.name, agent.strategy)
    worker = _AgentWorker(
        cfg, problem, device, sandbox, state, slots, log, tracker, on_attempt, ceiling
    )
    threads = [
        threading.Thread(target=worker.run, args=(agent,), name=f"agent-{agent.name}", daemon=True)
        for agent in team
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        # Warm sandboxes (the Docker pool) hold containers until closed.
        close = getattr(sandbox, "close", None)
        if callable(close):
            close()
    status = "FAILED" if state.aborted else "FINISHED"
    passed = sum(1 for a in state.attempts if a.status == EvalStatus.PASSED)
    write_campaign_record(
        run_dir,
        record.model_copy(
            update={
                "finished_at": utc_now(),
                "status": status,
                "best_proposal_id": state.best.proposal.id if state.best else None,
                "best_speedup": state.best_speedup,
                "abort_reason": state.aborted,
            }
        ),
    )
    return CampaignSummary(
        run_dir=run_dir,
        problem=problem.name,
        device=device,
        attempts=len(state.attempts),
        passed=passed,
        failures=state.failures,
        best=state.best,
        status=status,
        guard_evaluations=state.guard_evaluations,
    )


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
        sandbox: Sandbox,
        state: CampaignState,
        slots: threading.BoundedSemaphore,
        log: AttemptLog,
        tracker: Tracker,
        on_attempt: ProgressCallback | None,
        ceiling: ResolvedCeiling | None = None,
    ) -> None:
        self.cfg = cfg
        self.ceiling = ceiling
        self.problem = problem
        self.device = device
        self.sandbox = sandbox
        self.state = state
        self.slots = slots
        self.log = log
        self.tracker = tracker
        self.on_attempt = on_attempt
        warmup, iterations = cfg.eval.timing_for(device)
        self.timing = TimingConfig(warmup=warmup, iterations=iterations)
        self.settings: GuardSettings = guard_settings(cfg.guard, device)

    def run(self, agent: Agent) -> None:
        duplicates = 0
        while True:
            with self.state.lock:
                if self.state.aborted or self.state.reserved >= self.state.budget:
                    return
                own = tuple(a for a in self.state.attempts if a.proposal.agent == agent.name)
                ctx = AgentContext(
                    problem=self.problem,
                    device="cuda" if self.device == "cuda" else "cpu",
                    attempts=own,
                    seen_ids=frozenset(self.state.seen_ids),
                )
            try:
                proposal = agent.propose(ctx)
            except Exception:  # an agent bug must not end the campaign (isolation boundary)
                logger.exception("agent %s failed to propose; retiring it", agent.name)
                return
            if proposal is None:
                logger.info("agent %s has nothing new to propose", agent.name)
                return
            with self.state.lock:
                if proposal.id in self.state.seen_ids:
                    duplicates += 1
                    if duplicates >= _MAX_DUPLICATES_IN_A_ROW:
                        logger.warning("agent %s only repeats itself; stopping it", agent.name)
                        return
                    continue
                if self.state.reserved >= self.state.budget:
                    return
                duplicates = 0
                self.state.seen_ids.add(proposal.id)
                ordinal = self.state.reserved
                self.state.reserved += 1
            self._screen_evaluate_and_record(proposal, ordinal)

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
        )

    def _evaluate(self, request: EvalRequest) -> EvalResult:
        """One sandboxed evaluation in an evaluation slot; raises SandboxError."""
        with self.slots:
            return self.sandbox.evaluate(request, timeout_s=self.cfg.eval.timeout_s)

    def _screen_evaluate_and_record(self, proposal: Proposal, ordinal: int) -> None:
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
                self._record(proposal, None, record, "", started, 0.0)
            return
        request = self._request(proposal)
        result: EvalResult | None
        try:
            result = self._evaluate(request)
        except SandboxError as exc:
            logger.error("sandbox failed on %s: %s", proposal.id, exc)
            result, error = None, f"{type(exc).__name__}: {exc}"
        else:
            error = ""
        wall = time.monotonic() - t0
        if result is None or not self.settings.enabled:
            with self.state.lock:
                self._record(proposal, result, record, error, started, wall)
            return
        score = score_traces(result.traces)
        if score.status != EvalStatus.PASSED:
            with self.state.lock:
                self._record(proposal, result, record, error, started, wall)
            return
        # A passing candidate: judged under the guard lock so the incumbent stays put.
        with self.state.guard_lock:
            with self.state.lock:
                incumbent = self.state.best
            record = self._measure(proposal, request, result, score, record, incumbent, ordinal)
            with self.state.lock:
                self._record(proposal, result, record, error, started, wall)

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
    ) -> None:
        state = self.state
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
        try:
            self.tracker.log_attempt(attempt)
        except KernelarcError:
            logger.exception("tracking failed for attempt %d; attempts.jsonl has it", attempt.index)
        if self.on_attempt is not None:
            self.on_attempt(attempt, state)


def _judge(score: Score | None, record: GuardRecord, incumbent_speedup: float | None) -> Judgement:
    """The guard's verdict; no score means blocked before evaluation or a sandbox failure."""
    if score is None:
        status: EvalStatus | Literal["INFRA_ERROR"] = "INFRA_ERROR"
        return judge_attempt(status, None, (), record, incumbent_speedup)
    return judge_attempt(score.status, score.speedup, score.latencies_ms, record, incumbent_speedup)
