"""One candidate's path from an accepted proposal to a recorded attempt: the static rules, the
sandbox evaluation (screen, then timed, admitted at its slot only while the time budget allows
it), and for a passing candidate the guard's measurement (roofline bounds, re-timing against the
incumbent, confirmation), then `AttemptRecorder.record`.

Place in the flow: an agent thread (`agent_worker.py`) calls `screen_evaluate_and_record` for each
proposal that took a budget slot. A blocked proposal (static rules) never reaches a sandbox. A
passing candidate is judged under the guard lock, so the incumbent cannot change while the guard
re-times and confirms it (those extra evaluations take slots but not budget).
"""

import functools
import logging
import time
from dataclasses import replace

from kernelarc.campaign.recorder import AttemptRecorder
from kernelarc.campaign.state import CampaignState
from kernelarc.config import CampaignConfig
from kernelarc.executor import Admit, Executor, Priority
from kernelarc.guard import (
    Challenge,
    Score,
    blocking,
    guard_settings,
    is_challenger,
    roofline_for,
    roofline_message,
    run_challenge,
    scan_solution,
    score_traces,
)
from kernelarc.guard.ceilings import ResolvedCeiling
from kernelarc.guard.challenge import evaluate_retrying
from kernelarc.problems.files import Problem
from kernelarc.schema import (
    Attempt,
    EvalRequest,
    EvalResult,
    EvalStatus,
    HangPolicy,
    Proposal,
    TimingConfig,
    utc_now,
)
from kernelarc.schema.guard_record import GuardRecord, GuardSettings

logger = logging.getLogger(__name__)


class CandidateEvaluation:
    """Evaluates and records candidates of one campaign (shared by its agent threads)."""

    def __init__(
        self,
        cfg: CampaignConfig,
        problem: Problem,
        device: str,
        executor: Executor,
        state: CampaignState,
        recorder: AttemptRecorder,
        ceiling: ResolvedCeiling | None = None,
    ) -> None:
        self.cfg = cfg
        self.problem = problem
        self.device = device
        self.executor = executor
        self.state = state
        self.recorder = recorder
        self.ceiling = ceiling
        warmup, iterations = cfg.eval.timing_for(device)
        self.timing = TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=cfg.eval.budget_for(device)
        )
        # coordination.guard=false (the ablation arm) turns the guard off whatever guard.* says.
        guard_cfg = replace(cfg.guard, enabled=cfg.guard.enabled and cfg.coordination.guard)
        self.settings: GuardSettings = guard_settings(guard_cfg, device)

    def screen_evaluate_and_record(
        self, proposal: Proposal, ordinal: int, priority: Priority = ()
    ) -> Attempt:
        """Static rules, evaluation, the guard for a passing candidate, then the record; raises
        NotAdmitted when the time budget turned the candidate away at its slot (unrecorded) and
        CampaignStopped when the campaign was stopped meanwhile."""
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
                return self.recorder.record(proposal, None, record, "", started, 0.0)
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
                return self.recorder.record(proposal, result, record, error, started, wall)
        score = score_traces(result.traces)
        if score.status != EvalStatus.PASSED:
            with self.state.lock:
                return self.recorder.record(proposal, result, record, error, started, wall)
        # A passing candidate: judged under the guard lock so the incumbent stays put.
        with self.state.guard_lock:
            with self.state.lock:
                incumbent = self.state.best
            record = self._measure(proposal, request, result, score, record, incumbent, ordinal)
            with self.state.lock:
                return self.recorder.record(proposal, result, record, error, started, wall)

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
