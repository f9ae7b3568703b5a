"""Recording a judged candidate: the guard's verdict, the Attempt, attempts.jsonl, the shared state
(incumbent, failures, the infrastructure-abort counter), coordination, the tracker and the
callbacks, in that order.

Place in the flow: `candidate.py` calls `AttemptRecorder.record` under the state lock once a
candidate was blocked, failed, or passed and was measured by the guard; the agent threads
(`agent_worker.py`) report conclusions through `log_conclusions`. attempts.jsonl is written
first: it is the source of truth if anything after it fails.
"""

import logging
from typing import Literal

from kernelarc.campaign.coordinator import Coordinator
from kernelarc.campaign.state import CampaignState, CampaignStopped, ProgressCallback, StateCallback
from kernelarc.errors import KernelarcError
from kernelarc.guard import Score, judge_attempt, score_traces
from kernelarc.guard.score import interval_fields
from kernelarc.guard.verdict import Judgement
from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.schema import Attempt, EvalResult, EvalStatus, Proposal, Verdict, utc_now
from kernelarc.schema.coordination import Conclusion
from kernelarc.schema.guard_record import GuardRecord
from kernelarc.tracking import Tracker

logger = logging.getLogger(__name__)


class AttemptRecorder:
    """Turns a candidate's outcome into the campaign's next Attempt and tells everyone of it."""

    def __init__(
        self,
        problem: str,
        max_infra_failures: int,
        state: CampaignState,
        log: AttemptLog,
        tracker: Tracker,
        coordinator: Coordinator,
        on_attempt: ProgressCallback | None = None,
        on_progress: StateCallback | None = None,
    ) -> None:
        self.problem = problem
        self.max_infra_failures = max_infra_failures
        """budget.max_infra_failures: this many INFRA_ERRORs in a row abort the campaign."""
        self.state = state
        self.log = log
        self.tracker = tracker
        self.coordinator = coordinator
        self.on_attempt = on_attempt
        self.on_progress = on_progress

    def record(
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
            if state.infra_failures_in_a_row >= self.max_infra_failures:
                state.aborted = f"{state.infra_failures_in_a_row} infrastructure failures in a row"
        new_best = judgement.verdict == Verdict.NEW_BEST
        passed_score = score if score is not None and score.status == EvalStatus.PASSED else None
        attempt = Attempt(
            index=len(state.attempts),
            problem=self.problem,
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
        self.log_conclusions(retracted)
        if self.on_attempt is not None:
            self.on_attempt(attempt, state)
        if self.on_progress is not None:
            self.on_progress(state)
        return attempt

    def log_conclusions(self, conclusions: list[Conclusion]) -> None:
        """Report conclusions (published or retracted) to the tracker; it queues, never waits
        on its backend, so this may run under the state lock (`record`)."""
        for conclusion in conclusions:
            try:
                self.tracker.log_conclusion(conclusion)
            except KernelarcError:
                logger.exception("tracking failed for conclusion %s", conclusion.id)


def _judge(score: Score | None, record: GuardRecord, incumbent_speedup: float | None) -> Judgement:
    """The guard's verdict; no score means blocked before evaluation or a sandbox failure."""
    if score is None:
        status: EvalStatus | Literal["INFRA_ERROR"] = "INFRA_ERROR"
        return judge_attempt(status, None, (), record, incumbent_speedup)
    return judge_attempt(score.status, score.speedup, score.latencies_ms, record, incumbent_speedup)
