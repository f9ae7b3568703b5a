"""What both executors share: routing to the timed or correctness pool, the correctness screen of
a new candidate, and throughput accounting. Subclasses only run a request in a slot of a pool.

The screen is the codebase's "correctness-only work": the candidate's full correctness check
(same inputs, same rounds, same workloads as its timed evaluation) with timing cut to a single
iteration and no reference timing, run in the correctness pool, smallest workload first and
stopping at the first failure (`screen_plan.py`). A candidate that fails it is recorded with the
screen's traces and never queues for a timed slot; one that passes is then timed in the timed
pool, comparing only the last correctness round again (the screen compared every round on the
same inputs). A C++ candidate is built by its screen, so with the host's build cache its timed
evaluation finds it built. Docs: docs/scale-out.md ("Order, screens and the device gate").
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from kernelarc.executor.accounting import ThroughputMeter
from kernelarc.executor.contract import Admit, EvalKind, NotAdmitted
from kernelarc.executor.screen_plan import (
    SCREEN_NOTE,
    merge_screen_correctness,
    screening_request,
    timed_after_screen,
)
from kernelarc.executor.turn_order import GUARD_PRIORITY, Priority
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus
from kernelarc.schema.throughput import ThroughputReport

__all__ = [
    "SCREEN_NOTE",
    "NotAdmitted",
    "Pool",
    "PooledExecutor",
    "Turn",
    "check_admission",
    "passed",
    "screening_request",
]

Pool = str  # "timed" | "correctness"


def passed(result: EvalResult) -> bool:
    """True when every workload's trace PASSED."""
    return bool(result.traces) and all(
        t.evaluation is not None and t.evaluation.status == EvalStatus.PASSED for t in result.traces
    )


@dataclass(frozen=True)
class Turn:
    """How a candidate's evaluation takes its slots: its priority among the waiters, and the
    admission check it must pass once it holds one."""

    admit: Admit | None = None
    priority: Priority = GUARD_PRIORITY


def check_admission(admit: Admit | None, release: Callable[[], None]) -> None:
    """Ask `admit` with a slot held, before anything runs there; when it says no (NotAdmitted)
    or raises, `release()` gives the slot back first."""
    try:
        admitted = admit is None or admit()
    except BaseException:
        release()
        raise
    if not admitted:
        release()
        msg = "turned away at its slot"
        raise NotAdmitted(msg)


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
        self,
        request: EvalRequest,
        *,
        timeout_s: float,
        kind: EvalKind = "timed",
        stage: str = "guard",
    ) -> EvalResult:
        """Run in the `kind` pool (correctness work uses the timed pool when there is no
        correctness pool), accounted under `stage`; raises SandboxError."""
        pool = "correctness" if kind == "correctness" and self.meter.correctness_slots else "timed"
        return self._run(pool, request, timeout_s, stage)

    def evaluate_candidate(
        self,
        request: EvalRequest,
        *,
        timeout_s: float,
        admit: Admit | None = None,
        priority: Priority = GUARD_PRIORITY,
    ) -> EvalResult:
        """Screen (when there is a correctness pool and screening is on), then time; `admit` is
        asked at each slot (raises NotAdmitted); `priority` orders the waiters for a slot."""
        turn = Turn(admit, priority)
        if not self.screens:
            return self._run("timed", request, timeout_s, "timing", turn)
        screened = screening_request(request)
        screen = self._run("correctness", screened, timeout_s, "screen", turn)
        if not passed(screen):
            self.meter.count_screened_out()
            notes = [*screen.sandbox_notes, SCREEN_NOTE]
            return screen.model_copy(update={"sandbox_notes": notes})
        timed = self._run("timed", timed_after_screen(request), timeout_s, "timing", turn)
        return merge_screen_correctness(timed, screen)

    @abstractmethod
    def prepare(self, *, timeout_s: float, problem_dir: str | None) -> None:
        """Prepare every slot's sandbox for evaluations on `device` (`Sandbox.prepare`)."""

    def throughput(
        self, *, wall_s: float, candidates: int, propose_s: float = 0.0
    ) -> ThroughputReport:
        """The campaign's throughput so far (`propose_s`: the agents' time in `propose`)."""
        return self.meter.report(wall_s=wall_s, candidates=candidates, propose_s=propose_s)

    @abstractmethod
    def _run(
        self,
        pool: Pool,
        request: EvalRequest,
        timeout_s: float,
        stage: str,
        turn: Turn | None = None,
    ) -> EvalResult:
        """Run `request` in a slot of `pool` (waiters served by `turn.priority`), recording an
        EvalTiming under `stage` (`screen`, `timing` or `guard`); with the slot held,
        `check_admission(turn.admit, release)` first (a turned-away request records nothing
        and frees the slot); raises SandboxError or NotAdmitted."""

    @abstractmethod
    def close(self) -> None:
        """Release every slot."""
