"""Executors: where a campaign's evaluations run and how many run at once.

The campaign loop hands every sandbox evaluation to an Executor. `LocalExecutor` runs sandboxes
on this machine: one timed slot per GPU (one on the CPU), so timed evaluations never share a
GPU, plus a correctness pool where new candidates are screened beside timing.
`ray_executor.RayExecutor` (imported only when asked for) runs the same sandboxes inside Ray
actors, one per GPU of a machine or a cluster, and turns a dead actor or node into a bounded
infrastructure retry of that evaluation. Both account for throughput (`ThroughputReport`).
"""

from collections.abc import Callable
from typing import Literal, Protocol

from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.errors import ConfigError
from kernelarc.executor.turn_order import Priority
from kernelarc.schema import EvalRequest, EvalResult
from kernelarc.schema.throughput import ThroughputReport

__all__ = [
    "EXECUTOR_KINDS",
    "Admit",
    "EvalKind",
    "Executor",
    "NotAdmitted",
    "Priority",
    "make_executor",
]

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


def make_executor(
    cfg: ExecutorConfig,
    sandbox: SandboxConfig,
    requested_device: str,
    max_timed: int | None,
    resolve_device: Callable[[str], str],
) -> Executor:
    """Build the executor `cfg.kind` for a campaign.

    Args:
        cfg: the executor config group.
        sandbox: the sandbox config (each slot or actor owns one sandbox of this kind).
        requested_device: `auto`, `cpu` or `cuda` (the campaign's `device`).
        max_timed: at most this many timed slots (`budget.max_parallel`); None = no cap.
        resolve_device: maps `auto` to this machine's device and refuses `cuda` without a GPU
            (a remote Ray cluster is asked for its GPUs instead).

    Raises:
        ConfigError: bad GPU lists, Ray missing, or a cluster too small for the actors.
        SandboxError: a sandbox (Docker engine) or the Ray cluster cannot be reached.
    """
    if cfg.kind == "ray":
        try:
            from kernelarc.executor.ray_executor import RayExecutor  # ray: imported only here
        except ModuleNotFoundError as exc:
            if exc.name != "ray":
                raise
            msg = (
                "executor=ray needs Ray, which is not installed: pip install 'kernelarc[ray]' "
                "(or use executor=local)"
            )
            raise ConfigError(msg) from exc
        return RayExecutor(cfg, sandbox, requested_device, max_timed)
    from kernelarc.executor.local_executor import LocalExecutor

    return LocalExecutor(cfg, sandbox, resolve_device(requested_device), max_timed)
