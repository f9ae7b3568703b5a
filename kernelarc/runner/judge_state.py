"""The judge's per-run state and the way a workload ends early (shared by `evaluate.py` and
`reference_side.py`)."""

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelarc.runner.correctness import WorstErrors
from kernelarc.runner.hang_deadline import WorkloadClock
from kernelarc.runner.inputs import CustomFn
from kernelarc.runner.memory_limit import OomWatch
from kernelarc.runner.outcome import Outcome
from kernelarc.runner.phase_times import PhaseTimes
from kernelarc.runner.resident_cache import seed_key
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.sched_state import SchedWatch
from kernelarc.runner.worker_client import WorkerClient
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest, EvalStatus

if TYPE_CHECKING:
    from kernelarc.runner.resident_cache import ProblemCache

Fn = Callable[..., Any]


class Stop(Exception):
    """Ends a workload early with an outcome."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.status)
        self.outcome = outcome


def stop(status: EvalStatus, log: str, worst: WorstErrors | None = None) -> Stop:
    """A Stop with the outcome (and the worst errors so far, if given)."""
    correctness = worst.result() if worst is not None else None
    return Stop(Outcome(status, log, correctness=correctness))


@dataclass
class Judge:
    """What the judge knows across the workloads of one request."""

    request: EvalRequest
    reference: Fn
    custom: CustomFn | None
    zygote: Zygote
    facts: RunFacts = field(default_factory=RunFacts)
    """Seconds per stage, the build step, skipped workloads, JIT caches (signed result)."""
    worker: WorkerClient | None = None
    fatal: Outcome | None = None
    """Set when every later workload must end the same way (import failed, patched at import)."""
    phase: str = "start"
    share_cuda: bool = True
    """Pass CUDA values to workers by IPC; off for the rest of the run after a failure."""
    sharing_proven: bool = False
    """A call with shared values completed in this run (a later worker death is the worker's)."""
    sharing_note: str = ""
    clock: WorkloadClock | None = None
    """The per-workload deadline (set by `evaluate_request`)."""
    times: PhaseTimes = field(default_factory=PhaseTimes)
    """Where the current workload's time goes (logged at its end)."""
    oom: OomWatch = field(default_factory=OomWatch)
    """The out-of-memory killer's counters at the workload's start."""
    cache: "ProblemCache | None" = None
    """What a resident judge keeps across requests (`resident_cache.py`); None: nothing."""
    prestarted: WorkerClient | None = None
    """A worker forked ahead (its CUDA context made), waiting for its `setup`."""
    sched: SchedWatch | None = None
    """The judge's own processes and their scheduling before any candidate ran
    (`sched_state.py`): checked at the end of every workload."""
    draw_key: str | None = None
    """Where the RNG stream stands, as a hash of its seed and every draw since (the cache's
    key of the next draw); None when unknown."""
    last_draw: tuple[str, list[Any]] | None = None
    """The key and inputs of the last draw (the reference cache's key for those inputs)."""

    @functools.cached_property
    def request_json(self) -> bytes:
        """The request as a worker's `setup` gets it."""
        return self.request.model_dump_json().encode("utf-8")

    def reseeded(self, seed: int) -> None:
        """The request's RNG stream was seeded: its key starts again."""
        self.draw_key = seed_key("request", seed)

    def take_prestarted(self, share_cuda: bool) -> WorkerClient | None:
        """The pre-started worker, if any is alive (then the caller's), with `share_cuda`."""
        worker, self.prestarted = self.prestarted, None
        if worker is None:
            return None
        worker.share_cuda = share_cuda
        return worker

    def discard_worker(self) -> str:
        """Kill and reap the current worker; how it ended."""
        worker, self.worker = self.worker, None
        if worker is not None and worker.sharing_note:
            self.share_cuda, self.sharing_note = False, worker.sharing_note
        return worker.stop() if worker is not None else "was not running"


@dataclass
class Tally:
    """Per-workload judge-side measurements."""

    worst: WorstErrors = field(default_factory=WorstErrors)
    base_threads: tuple[int, int] | None = None
    warm: list[tuple[float, float]] = field(default_factory=list)
    """(observed s, judge transfer s) of verified calls after the first."""
