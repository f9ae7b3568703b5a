"""The judge's per-run state and the way a workload ends early (shared by `evaluate.py` and
`reference_side.py`)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelarc.runner.correctness import WorstErrors
from kernelarc.runner.hang_deadline import WorkloadClock
from kernelarc.runner.inputs import CustomFn
from kernelarc.runner.memory_limit import OomWatch
from kernelarc.runner.outcome import Outcome
from kernelarc.runner.phase_times import PhaseTimes
from kernelarc.runner.run_facts import RunFacts
from kernelarc.runner.worker_client import WorkerClient
from kernelarc.runner.zygote import Zygote
from kernelarc.schema import EvalRequest, EvalStatus

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
