"""What both executors share: routing to the timed or correctness pool, the correctness screen of
a new candidate, and throughput accounting. Subclasses only run a request in a slot of a pool.

The screen is the codebase's "correctness-only work": the candidate's full correctness check
(same inputs, same rounds, same workloads as its timed evaluation) with timing cut to a single
iteration and no reference timing, run in the correctness pool. A candidate that fails it is
recorded with the screen's traces and never queues for a timed slot; one that passes is then
evaluated in the timed pool exactly as without a screen. Docs: docs/architecture.md.
"""

from abc import ABC, abstractmethod

from kernelarc.executor import EvalKind
from kernelarc.executor.accounting import ThroughputMeter
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, TimingConfig
from kernelarc.schema.throughput import ThroughputReport

SCREEN_NOTE = (
    "correctness screen failed: these traces are the screen's (timing cut to one iteration); "
    "the candidate was not timed"
)

Pool = str  # "timed" | "correctness"


def screening_request(request: EvalRequest) -> EvalRequest:
    """The correctness screen of `request`: everything the same but timing (one iteration, no
    warm-up, no L2 flush, no reference timing), so its verdict on correctness is the same."""
    return request.model_copy(
        update={
            "timing": TimingConfig(warmup=0, iterations=1, flush_l2=False, time_reference=False)
        }
    )


def passed(result: EvalResult) -> bool:
    """True when every workload's trace PASSED."""
    return bool(result.traces) and all(
        t.evaluation is not None and t.evaluation.status == EvalStatus.PASSED for t in result.traces
    )


class PooledExecutor(ABC):
    """An executor with a timed pool and an optional correctness pool."""

    def __init__(
        self, name: str, device: str, timed_slots: int, correctness_slots: int, screen: bool
    ) -> None:
        """`screen` takes effect only when there is a correctness pool (else it only costs)."""
        self._device = device
        self.meter = ThroughputMeter(name, device, timed_slots, correctness_slots)
        self.screens = screen and correctness_slots > 0

    @property
    def device(self) -> str:
        """`cpu` or `cuda`."""
        return self._device

    def evaluate(
        self, request: EvalRequest, *, timeout_s: float, kind: EvalKind = "timed"
    ) -> EvalResult:
        """Run in the `kind` pool (correctness work uses the timed pool when there is no
        correctness pool); raises SandboxError."""
        pool = "correctness" if kind == "correctness" and self.meter.correctness_slots else "timed"
        return self._run(pool, request, timeout_s)

    def evaluate_candidate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Screen (when there is a correctness pool and screening is on), then time."""
        if self.screens:
            screen = self._run("correctness", screening_request(request), timeout_s)
            if not passed(screen):
                self.meter.count_screened_out()
                notes = [*screen.sandbox_notes, SCREEN_NOTE]
                return screen.model_copy(update={"sandbox_notes": notes})
        return self._run("timed", request, timeout_s)

    @abstractmethod
    def prepare(self, *, timeout_s: float, problem_dir: str | None) -> None:
        """Prepare every slot's sandbox for evaluations on `device` (`Sandbox.prepare`)."""

    def throughput(self, *, wall_s: float, candidates: int) -> ThroughputReport:
        """The campaign's throughput so far."""
        return self.meter.report(wall_s=wall_s, candidates=candidates)

    @abstractmethod
    def _run(self, pool: Pool, request: EvalRequest, timeout_s: float) -> EvalResult:
        """Run `request` in a slot of `pool`, recording an EvalTiming; raises SandboxError."""

    @abstractmethod
    def close(self) -> None:
        """Release every slot."""
