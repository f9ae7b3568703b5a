"""What one workload's evaluation ended in, and how it becomes a schema Trace.

Imports only `kernelarc.schema` (no torch), so the entry point can still build RUNTIME_ERROR
traces when torch itself fails to import.
"""

import traceback
from dataclasses import dataclass

from kernelarc.schema import (
    Correctness,
    Environment,
    EvalRequest,
    EvalStatus,
    Evaluation,
    Performance,
    Trace,
    Workload,
    utc_now,
)

LOG_CAP_BYTES = 64 * 1024
UNKNOWN_ENVIRONMENT = Environment(hardware="unknown")


@dataclass(frozen=True)
class Outcome:
    """The verdict of one workload; correctness/performance only where the status allows them."""

    status: EvalStatus
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None


def cap_log(text: str, limit: int = LOG_CAP_BYTES) -> str:
    """Keep the tail of a log within `limit` bytes (the end of a traceback says the most)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return f"[... {len(data) - limit} bytes cut ...]\n{tail}"


def exception_log(prefix: str) -> str:
    """`prefix` plus the current exception's traceback (call inside an `except` block)."""
    return f"{prefix}\n{traceback.format_exc()}"


def make_trace(
    request: EvalRequest, workload: Workload, environment: Environment, outcome: Outcome
) -> Trace:
    """The trace of one workload, naming the request's definition and solution."""
    evaluation = Evaluation(
        status=outcome.status,
        environment=environment,
        timestamp=utc_now(),
        log=cap_log(outcome.log),
        correctness=outcome.correctness,
        performance=outcome.performance,
    )
    return Trace(
        definition=request.definition.name,
        workload=workload,
        solution=request.solution.name,
        evaluation=evaluation,
    )


def as_reward_hack(trace: Trace, log: str) -> Trace:
    """A PASSED trace turned REWARD_HACK with `log` (its timing dropped); any other unchanged."""
    evaluation = trace.evaluation
    if evaluation is None or evaluation.status != EvalStatus.PASSED:
        return trace
    hacked = evaluation.model_copy(
        update={"status": EvalStatus.REWARD_HACK, "log": cap_log(log), "performance": None}
    )
    return trace.model_copy(update={"evaluation": hacked})
