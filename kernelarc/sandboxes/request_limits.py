"""What a sandbox adds to a request before its runner reads it: the limits the judge must know.

Place in the flow: both sandboxes' `RunnerHost.request_for` (`local/sandbox.py`,
`docker/sandbox.py`) pass every request through `runner_request` just before the lifecycle
writes it for the runner (`runner_lifecycle.py`). The overall timeout goes in so
that the judge ends a hung workload, and reports it, before the sandbox kills the runner; on the
CPU the address-space limit goes in, sized by `memory_limits` from the problem's data
(`memory_need.py`), and the runner lowers its own limit to it before it starts a worker.
"""

from dataclasses import dataclass

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.memory_need import GIB, MemoryNeed, memory_need
from kernelarc.schema import EvalRequest


@dataclass(frozen=True)
class MemoryLimits:
    """A request's memory limits in one sandbox."""

    need: MemoryNeed
    """The problem's data per process."""
    per_process_bytes: int
    """The judge's and each worker's limit: the base plus the larger data need, at most the
    ceiling."""
    container_bytes: int
    """What judge and one worker hold together (a container's memory limit), at most the
    ceiling."""


def memory_limits(
    request: EvalRequest, base_bytes: int, ceiling_bytes: int | None, ceiling_name: str
) -> MemoryLimits:
    """The limits for `request`: `base_bytes` (sandbox.memory_limit_gb: Python, torch, the
    candidate's scratch) plus the data the protocol holds, capped by `ceiling_bytes` (what the
    sandbox may use at all, described by `ceiling_name`).

    Raises:
        SandboxError: the reference alone does not fit under the ceiling (the problem is too
            large for this machine or sandbox: an infrastructure limit, not the candidate).
    """
    need = memory_need(request)
    per_process = base_bytes + max(need.judge_bytes, need.worker_bytes)
    container = base_bytes + need.judge_bytes + need.worker_bytes
    if ceiling_bytes is not None:
        if need.reference_bytes > ceiling_bytes:
            msg = (
                f"infrastructure limit: problem {request.definition.name!r} does not fit this "
                f"sandbox: its {need.describe()} need at least "
                f"{need.reference_bytes / GIB:.3g} GiB for the reference alone (its inputs, "
                f"their copies and its outputs), more than {ceiling_name} "
                f"({ceiling_bytes / GIB:.3g} GiB); no candidate was run"
            )
            raise SandboxError(msg)
        per_process = min(per_process, ceiling_bytes)
        container = min(container, ceiling_bytes)
    return MemoryLimits(need, per_process, container)


def runner_request(
    request: EvalRequest, timeout_s: float, address_space_bytes: int | None = None
) -> EvalRequest:
    """`request` as the runner gets it: `overall_timeout_s` at most the sandbox's `timeout_s`,
    and (CPU) the address-space limit for this evaluation."""
    update: dict[str, object] = {}
    overall = request.overall_timeout_s
    if overall is None or overall > timeout_s:
        update["overall_timeout_s"] = timeout_s
    if address_space_bytes is not None and request.device == "cpu":
        update["address_space_bytes"] = address_space_bytes
    return request.model_copy(update=update) if update else request
