"""The executor's contract: the `Executor` protocol the campaign calls, what an evaluation is
(`EvalKind`), and how a candidate is turned away at its slot (`Admit`, `NotAdmitted`).

Place in the flow: the implementations (`local_executor.py`, `ray_executor.py`, their shared
`pooled.py`) and the campaign import these names; `kernelarc.executor` re-exports them with the
`make_executor` factory, which imports the implementations lazily. Keeping the contract out of
the package's `__init__` means no implementation imports the module that imports it.
"""

from collections.abc import Callable
from typing import Literal, Protocol

from kernelarc.executor.turn_order import Priority
from kernelarc.schema import EvalRequest, EvalResult
from kernelarc.schema.throughput import ThroughputReport

EXECUTOR_KINDS = ("local", "ray")

EvalKind = Literal["timed", "correctness"]
"""`timed`: an evaluation whose latencies count (a slot of its own GPU); `correctness`: a screen
whose latencies are thrown away (the correctness pool, or the timed pool when there is none)."""


Admit = Callable[[], bool]
"""Asked once a candidate's evaluation holds a slot, before it starts there: False turns it away
(`NotAdmitted`). The campaign's wall-clock budget decides here, not when the candidate was
proposed: a candidate queued behind others for a timed slot may no longer fit when its turn
comes."""


class NotAdmitted(Exception):
    """A candidate's evaluation was turned away by its `admit` callable when it reached a slot;
    nothing ran, and the slot is free again. Not a SandboxError: never retried."""


class Executor(Protocol):
    """Runs sandbox evaluations in bounded pools; thread-safe (every agent thread calls it)."""

    @property
    def device(self) -> str:
        """`cpu` or `cuda`: where the evaluations run."""
        ...

    def evaluate(
        self,
        request: EvalRequest,
        *,
        timeout_s: float,
        kind: EvalKind = "timed",
        stage: str = "guard",
    ) -> EvalResult:
        """Run one request in a slot of the `kind` pool, accounted under `stage` (the loop's
        only direct calls are the guard's); raises SandboxError (infrastructure)."""
        ...

    def evaluate_candidate(
        self,
        request: EvalRequest,
        *,
        timeout_s: float,
        admit: Admit | None = None,
        priority: Priority = (),
    ) -> EvalResult:
        """A new candidate's first evaluation: screened in the correctness pool when there is one
        (a failure is final, and never waits for a timed slot), then timed. `admit` is asked at
        each slot the candidate reaches (screen, then timing); raises NotAdmitted when it says
        no, SandboxError on an infrastructure failure. Waiters for a slot are served by
        `priority` (lower first, then arrival: `turn_order.py`); `evaluate` (the guard's runs)
        comes before every candidate."""
        ...

    def prepare(self, *, timeout_s: float, problem_dir: str | None) -> None:
        """Have every sandbox start its spare runner (and container) for evaluations on
        `device` with `timeout_s` and `problem_dir` now, before the first candidate; returns
        without waiting for them (`Sandbox.prepare`)."""
        ...

    def throughput(
        self, *, wall_s: float, candidates: int, propose_s: float = 0.0
    ) -> ThroughputReport:
        """The campaign's throughput so far (`candidates` = attempts recorded, `propose_s` =
        the agents' time in `propose`)."""
        ...

    def close(self) -> None:
        """Release sandboxes, actors and (if this executor started it) the Ray instance."""
        ...
