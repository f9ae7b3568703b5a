"""Executors: where a campaign's evaluations run and how many run at once.

The campaign loop hands every sandbox evaluation to an Executor. `LocalExecutor` runs sandboxes
on this machine: one timed slot per GPU (one on the CPU), so timed evaluations never share a
GPU, plus a correctness pool where new candidates are screened beside timing.
`ray_executor.RayExecutor` (imported only when asked for) runs the same sandboxes inside Ray
actors, one per GPU of a machine or a cluster, and turns a dead actor or node into a bounded
infrastructure retry of that evaluation. Both account for throughput (`ThroughputReport`).
"""

from collections.abc import Callable

from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.errors import ConfigError
from kernelarc.executor.contract import (
    EXECUTOR_KINDS,
    Admit,
    EvalKind,
    Executor,
    NotAdmitted,
)
from kernelarc.executor.turn_order import Priority

__all__ = [
    "EXECUTOR_KINDS",
    "Admit",
    "EvalKind",
    "Executor",
    "NotAdmitted",
    "Priority",
    "make_executor",
]


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
