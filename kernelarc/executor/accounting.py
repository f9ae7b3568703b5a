"""Throughput accounting shared by the executors: per-evaluation timings in, a report out.

Each evaluation is recorded with its pool, its stage (`screen`: a correctness screen; `timing`:
a candidate's timed evaluation; `guard`: the guard's re-timing and confirmation runs), its queue
wait and slot time, and the seconds per stage its runner's judge measured (`EvalResult.stage_s`:
C++ build, worker start, inputs, correctness, timing, reference timing). The report sums them
per stage, so a campaign shows where its time went (`ThroughputReport.stages`).
"""

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernelarc.schema import EvalResult
from kernelarc.schema.throughput import RUNNER_SUB_STAGES, ThroughputReport

#: Stage labels of executor evaluations.
EVAL_STAGES = ("screen", "timing", "guard")


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
    stage: str = ""
    """`screen`, `timing` or `guard` ("": not labelled)."""
    runner_stage_s: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage inside the runner (EvalResult.stage_s)."""
    build_cached: bool | None = None
    """C++ only: whether the build came from the host's build cache (None: nothing built)."""
    jit_cache_hit: bool = False
    """The runner started with the candidate's JIT caches from the host's cache."""
    gate_wait_s: float = 0.0
    """Slot held while waiting for the device: a screen behind a guard run, a guard run for
    the screens on its device to finish (`device_gate.DeviceGate`)."""
    beside_screens: int = 0
    """A candidate's timed run: screens that ran on its device meanwhile."""


def eval_timing(
    pool: str,
    stage: str,
    *,
    queue_wait_s: float,
    slot_s: float,
    result: EvalResult | None,
    retries: int = 0,
    gate_wait_s: float = 0.0,
    beside_screens: int = 0,
) -> EvalTiming:
    """The timing of one evaluation that ended with `result` (None: a SandboxError)."""
    return EvalTiming(
        pool=pool,
        queue_wait_s=queue_wait_s,
        slot_s=slot_s,
        sandbox_s=result.wall_s if result is not None else 0.0,
        retries=retries,
        failed=result is None,
        stage=stage,
        runner_stage_s=dict(result.stage_s) if result is not None else {},
        build_cached=result.build.cached if result is not None and result.build else None,
        jit_cache_hit=result is not None and result.jit_cache_hit,
        gate_wait_s=gate_wait_s,
        beside_screens=beside_screens,
    )


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

    def report(self, *, wall_s: float, candidates: int, propose_s: float = 0.0) -> ThroughputReport:
        """The report for `candidates` attempts over `wall_s` seconds (`propose_s`: the agents'
        time in `propose`, measured by the campaign loop)."""
        with self._lock:
            timings = list(self._timings)
            screened_out = self._screened_out
        timed = [t for t in timings if t.pool == "timed"]
        correctness = [t for t in timings if t.pool == "correctness"]
        minutes = wall_s / 60.0
        per_min = candidates / minutes if minutes > 0 else 0.0
        done = [t for t in timings if not t.failed]
        built = [t for t in timings if t.build_cached is not None]
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
            builds=sum(1 for t in built if not t.build_cached),
            build_cache_hits=sum(1 for t in built if t.build_cached),
            jit_cache_hits=sum(1 for t in timings if t.jit_cache_hit),
            timed_beside_screens=sum(1 for t in timed if t.beside_screens),
            stages=_stages(timings, propose_s),
        )


def _stages(timings: list[EvalTiming], propose_s: float) -> dict[str, float]:
    """Seconds per stage over the campaign: slot time and queue wait per evaluation stage,
    the runners' own stages (`runner_<name>`), and what the sandbox spent outside them."""
    stages: dict[str, float] = {"propose": propose_s}
    for name in EVAL_STAGES:
        mine = [t for t in timings if t.stage == name]
        stages[name] = sum(t.slot_s for t in mine)
        stages[f"{name}_queue_wait"] = sum(t.queue_wait_s for t in mine)
        stages[f"{name}_gate_wait"] = sum(t.gate_wait_s for t in mine)
    inside = 0.0
    for timing in timings:
        for name, seconds in timing.runner_stage_s.items():
            stages[f"runner_{name}"] = stages.get(f"runner_{name}", 0.0) + seconds
            if timing.stage:  # the same, per evaluation stage: what a timed run itself costs
                key = f"{timing.stage}_runner_{name}"
                stages[key] = stages.get(key, 0.0) + seconds
            if name not in RUNNER_SUB_STAGES:
                inside += seconds
    # Process start (or the wait for a warm spare), imports, result handling, the jail.
    stages["sandbox_other"] = max(0.0, sum(t.sandbox_s for t in timings) - inside)
    return {name: round(seconds, 3) for name, seconds in stages.items()}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _busy(timings: list[EvalTiming], wall_s: float, slots: int) -> float:
    if wall_s <= 0 or slots <= 0:
        return 0.0
    return round(min(1.0, sum(t.slot_s for t in timings) / (wall_s * slots)), 4)
