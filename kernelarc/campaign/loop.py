"""The campaign loop: agents propose, the sandbox evaluates, the judge decides, tracking records.

Each agent runs in its own thread; evaluations are bounded by `budget.max_parallel` slots and by
one shared candidate budget. An attempt is appended to attempts.jsonl before anything else sees it.
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
from kernelarc.campaign.judge import judge, score_traces
from kernelarc.campaign.run_record import CampaignRecord, write_campaign_record
from kernelarc.config import CampaignConfig
from kernelarc.errors import KernelarcError, SandboxError
from kernelarc.execution import Sandbox, make_sandbox
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
    aborted: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

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


def run_campaign(
    cfg: CampaignConfig,
    run_dir: Path,
    tracker: Tracker,
    on_attempt: ProgressCallback | None = None,
) -> CampaignSummary:
    """Run one campaign into `run_dir` and return its summary.

    Raises:
        ConfigError: the problem, device or team cannot be set up (nothing is evaluated then).
    """
    problem = resolve_problem(cfg.problem, cfg.workloads)
    device = resolve_device(cfg.device)
    team = make_team(list(cfg.agents.team), cfg.seed)
    sandbox = make_sandbox(
        cfg.sandbox.kind,
        gpu=cfg.sandbox.gpu,
        memory_limit_gb=cfg.sandbox.memory_limit_gb,
        network=cfg.sandbox.network,
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    problem_copy = _copy_problem(problem, run_dir / "problem", cfg.workloads)
    record = CampaignRecord(
        name=cfg.name,
        problem=problem.name,
        problem_dir=str(problem_copy),
        source_problem_dir=str(problem.path.resolve()),
        workloads=cfg.workloads,
        device=device,
        seed=cfg.seed,
        started_at=utc_now(),
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
    worker = _AgentWorker(cfg, problem, device, sandbox, state, slots, log, tracker, on_attempt)
    threads = [
        threading.Thread(target=worker.run, args=(agent,), name=f"agent-{agent.name}", daemon=True)
        for agent in team
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
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
    ) -> None:
        self.cfg = cfg
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
                self.state.reserved += 1
            self._evaluate_and_record(proposal)

    def _evaluate_and_record(self, proposal: Proposal) -> None:
        started = utc_now()
        t0 = time.monotonic()
        request = EvalRequest(
            definition=self.problem.definition,
            workloads=list(self.problem.workloads),
            solution=proposal.solution,
            device="cuda" if self.device == "cuda" else "cpu",
            seed=self.cfg.eval.seed,
            correctness_rounds=self.cfg.eval.correctness_rounds,
            timing=self.timing,
            problem_dir=str(self.problem.path.resolve()),
        )
        result: EvalResult | None
        with self.slots:
            try:
                result = self.sandbox.evaluate(request, timeout_s=self.cfg.eval.timeout_s)
            except SandboxError as exc:
                logger.error("sandbox failed on %s: %s", proposal.id, exc)
                result, error = None, f"{type(exc).__name__}: {exc}"
            else:
                error = ""
        with self.state.lock:
            self._record(proposal, result, error, started, time.monotonic() - t0)

    def _record(
        self, proposal: Proposal, result: EvalResult | None, error: str, started: str, wall: float
    ) -> None:
        state = self.state
        if result is not None:
            score = score_traces(result.traces)
            verdict = judge(score, state.best_speedup)
            traces, stderr_tail = result.traces, result.stderr_tail
            status: EvalStatus | Literal["INFRA_ERROR"] = score.status
            state.infra_failures_in_a_row = 0
        else:
            score, verdict, traces, stderr_tail = None, Verdict.INFRA_ERROR, [], ""
            status = "INFRA_ERROR"
            state.infra_failures_in_a_row += 1
            if state.infra_failures_in_a_row >= self.cfg.budget.max_infra_failures:
                state.aborted = f"{state.infra_failures_in_a_row} infrastructure failures in a row"
        attempt = Attempt(
            index=len(state.attempts),
            problem=self.problem.name,
            proposal=proposal,
            status=status,
            traces=traces,
            speedup=score.speedup if score else None,
            latency_ms=score.latency_ms if score else None,
            verdict=verdict,
            best_speedup_after=(
                score.speedup if verdict == Verdict.NEW_BEST and score else state.best_speedup
            ),
            started_at=started,
            finished_at=utc_now(),
            wall_s=round(wall, 3),
            stderr_tail=stderr_tail,
            error=error,
        )
        # attempts.jsonl first: it is the source of truth if anything after this fails.
        self.log.append(attempt)
        state.attempts.append(attempt)
        if verdict == Verdict.NEW_BEST:
            state.best = attempt
        if attempt.status != EvalStatus.PASSED:
            state.failures += 1
        try:
            self.tracker.log_attempt(attempt)
        except KernelarcError:
            logger.exception("tracking failed for attempt %d; attempts.jsonl has it", attempt.index)
        if self.on_attempt is not None:
            self.on_attempt(attempt, state)
