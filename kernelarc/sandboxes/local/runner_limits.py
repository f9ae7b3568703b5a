"""The rlimits a local runner starts with and the address-space limit its request gets.

Place in the flow: `LocalSandbox` keeps one `LimitSettings` (its options) and asks it for a new
runner's `ResourceLimits` (`process_limits.py`, applied before exec) and, per request, for the
CPU address-space limit the judge lowers itself to (`request_limits.py`, `memory_need.py`).
"""

import os
from dataclasses import dataclass

from kernelarc.sandboxes.local.process_limits import GIB, ResourceLimits
from kernelarc.sandboxes.memory_need import machine_memory_bytes
from kernelarc.sandboxes.request_limits import memory_limits
from kernelarc.schema import EvalRequest


@dataclass(frozen=True)
class LimitSettings:
    """A LocalSandbox's limit options (its constructor documents them)."""

    memory_limit_gb: float | None
    max_memory_gb: float | None
    cpu_time_limit_s: int | None
    max_open_files: int | None
    max_file_size_bytes: int | None
    max_processes: int | None

    def ceiling(self) -> tuple[int | None, str]:
        """The most a runner process may map, and what sets it."""
        if self.max_memory_gb is not None:
            return int(self.max_memory_gb * GIB), "the sandbox's max_memory_gb"
        return machine_memory_bytes(), "this machine's memory"

    def address_space(self, request: EvalRequest) -> int | None:
        """The request's address-space limit (CPU, with a memory limit), see memory_need.py.

        Raises:
            SandboxError: the reference alone does not fit under the ceiling.
        """
        if request.device != "cpu" or self.memory_limit_gb is None:
            return None
        ceiling, name = self.ceiling()
        base = int(self.memory_limit_gb * GIB)
        if ceiling is not None:
            ceiling = max(ceiling, base)
        return memory_limits(request, base, ceiling, name).per_process_bytes

    def runner_limits(self, device: str, timeout_s: float) -> ResourceLimits:
        """A new runner's rlimits. It starts with the address-space ceiling (a spare does not
        know its request yet) and lowers it to its request's `address_space_bytes` before it
        starts any worker; RLIMIT_CPU is `cpu_time_limit_s`, else timeout x cores + 30 s."""
        address_space = None
        if device == "cpu" and self.memory_limit_gb is not None:
            ceiling, _ = self.ceiling()
            base = int(self.memory_limit_gb * GIB)
            address_space = max(ceiling, base) if ceiling is not None else None
        cpu = self.cpu_time_limit_s
        if cpu is None:
            cpu = int(timeout_s * (os.cpu_count() or 1)) + 30
        return ResourceLimits(
            address_space_bytes=address_space,
            cpu_seconds=cpu,
            open_files=self.max_open_files,
            file_size_bytes=self.max_file_size_bytes,
            processes=self.max_processes,
        )
