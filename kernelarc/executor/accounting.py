"""Throughput accounting shared by the executors: per-evaluation timings in, a report out."""

import threading
from dataclasses import dataclass

from kernelarc.schema.throughput import ThroughputReport


@dataclass(frozen=True)
class EvalTiming:
    """Where one evaluation's time went."""

    pool: str
    """`timed` or `correctness`: the pool whose slot it held."""
    queue_wait_s: float
    """Submission to slot."""
    slot_s: float
    """Slot held (dispatch, sandbox, result back; retries included)."""
    sandbox_s: float
    """The sandbox's own wall time (EvalResult.wall_s; 0 when it failed)."""
    retries: int = 0
    """Infrastructure retries (a dead actor or node)."""
    failed: bool = False
    """It ended in a SandboxError."""


class ThroughputMeter:
    """Collects EvalTimings from every thread and summarizes them."""

    def __init__(self, executor: str, device: str, timed_slots: int, correctness_slots: int):
        """Name the executor, its device and its pool sizes."""
        self.executor = executor
        self.device = device
        self.timed_slots = timed_slots
        self.correctness_slots = correctness_slots
        self._lock = threading.Lock()
        self._timings: list[EvalTiming] = []
        self._screened_out = 0

    def record(self, timing: EvalTiming) -> None:
        """Add one evaluation."""
        with self._lock:
            self._timings.append(timing)

    def count_screened_out(self) -> None:
        """A candidate failed its correctness screen and was never timed."""
        with self._lock:
            self._screened_out += 1

    def report(self, *, wall_s: float, candidates: int) -> ThroughputReport:
        """The report for `candidates` attempts over `wall_s` seconds."""
        with self._lock:
            timings = list(self._timings)
            screened_out = self._screened_out
        timed = [t for t in timings if t.pool == "timed"]
        correctness = [t for t in timings if t.pool == "correctness"]
        minutes = wall_s / 60.0
        per_min = candidates / minutes if minutes > 0 else 0.0
        done = [t for t in timings if not t.failed]
        return ThroughputReport(
            executor=self.executor,
            device=self.device,
            timed_slots=self.timed_slots,
            correctness_slots=self.correctness_slots,
            wall_s=round(wall_s, 3),
            candidates=candidates,
            timed_evaluations=len(timed),
            correctness_evaluations=len(correctness),
            screened_out=screened_out,
            candidates_per_min=round(per_min, 4),
            candidates_per_min_per_gpu=round(per_min / max(1, self.timed_slots), 4),
            timed_busy_fraction=_busy(timed, wall_s, self.timed_slots),
            correctness_busy_fraction=_busy(correctness, wall_s, self.correctness_slots),
            queue_wait_s_mean=_mean([t.queue_wait_s for t in timed]),
            queue_wait_s_max=round(max((t.queue_wait_s for t in timed), default=0.0), 3),
            correctness_queue_wait_s_mean=_mean([t.queue_wait_s for t in correctness]),
            sandbox_s_mean=_mean([t.sandbox_s for t in done]),
            dispatch_overhead_s_mean=_mean([max(0.0, t.slot_s - t.sandbox_s) for t in done]),
            infra_retries=sum(t.retries for t in timings),
            infra_failures=sum(1 for t in timings if t.failed),
        )


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _busy(timings: list[EvalTiming], wall_s: float, slots: int) -> float:
    if wall_s <= 0 or slots <= 0:
        return 0.0
    return round(min(1.0, sum(t.slot_s for t in timings) / (wall_s * slots)), 4)
