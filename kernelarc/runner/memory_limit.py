"""The judge's side of memory limits: set this evaluation's limit, and name it when it is hit.

Place in the flow: `__main__` calls `apply_address_space` after reading the request and before
forking the worker zygote, so the judge and every worker run under the limit the sandbox sized
from the problem (`EvalRequest.address_space_bytes`; a spare runner was started under the
sandbox's ceiling, as it did not know its request yet). `evaluate.py` asks `allocation_failure`
whether an error was an allocation the limit refused, and an `OomWatch` whether the kernel's
out-of-memory killer ended a worker: a limit hit is then reported as one, naming the limit,
instead of a bare "killed by SIGKILL". When the judge's own input generation or reference run
does not fit, the problem is too large for the sandbox: that is an infrastructure limit, never
the candidate's fault.
"""

import logging
import re
import resource
from pathlib import Path

from kernelarc.schema import EvalRequest

logger = logging.getLogger(__name__)

GIB = 1024**3
_ALLOCATION = re.compile(
    r"MemoryError|can't allocate memory|Cannot allocate memory|out of memory|"
    r"DefaultCPUAllocator|std::bad_alloc|ENOMEM",
    re.IGNORECASE,
)


def apply_address_space(request: EvalRequest) -> None:
    """Lower RLIMIT_AS (soft and hard) to the request's limit on CPU; never raises it."""
    wanted = request.address_space_bytes
    if request.device != "cpu" or wanted is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if value < wanted:
        logger.warning(
            "address-space limit %.3g GiB asked, %.3g GiB allowed", wanted / GIB, value / GIB
        )
    resource.setrlimit(resource.RLIMIT_AS, (value, value))


def limit_text(request: EvalRequest) -> str:
    """The memory limit of this evaluation, in words."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if request.device == "cpu" and hard != resource.RLIM_INFINITY:
        return (
            f"the sandbox's address-space limit of {hard / GIB:.3g} GiB per process "
            "(sandbox.memory_limit_gb plus the problem's data times the copies the protocol "
            "makes)"
        )
    return "the sandbox's memory (host RAM, or the container's memory limit)"


def allocation_failure(text: str) -> bool:
    """Whether an error text is a refused allocation."""
    return _ALLOCATION.search(text) is not None


#: How the log of a judge-side allocation failure starts (`judge_out_of_memory`).
INFRASTRUCTURE_LIMIT = "infrastructure limit: "


def judge_out_of_memory(request: EvalRequest, what: str, log: str) -> str:
    """The log of a judge-side allocation failure (`what`: "generating the inputs", ...)."""
    return (
        f"{INFRASTRUCTURE_LIMIT}{what} did not fit in {limit_text(request)}; this is the "
        "problem's size against the sandbox's memory, not the candidate (raise "
        f"sandbox.memory_limit_gb or use a machine with more memory)\n{log}"
    )


def worker_out_of_memory(request: EvalRequest) -> str:
    """What to add to a worker error that was a refused allocation."""
    return f"(the solution ran out of memory under {limit_text(request)})"


def _oom_counters() -> dict[str, int]:
    """oom_kill counts this process can read: its cgroup's memory.events and /proc/vmstat."""
    counts: dict[str, int] = {}
    files = [Path("/proc/vmstat")]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, _, path = line.partition("::")
            if hierarchy == "0":
                files.insert(0, Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.events")
    except OSError:
        pass
    for source in files:
        try:
            for line in source.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    counts[str(source)] = int(value)
        except (OSError, ValueError):
            continue
    return counts


class OomWatch:
    """The out-of-memory killer's counters at a point in time, to compare with later."""

    def __init__(self) -> None:
        self._before = _oom_counters()

    def reset(self) -> None:
        """Take the counters again (the start of a workload)."""
        self._before = _oom_counters()

    def killed_since(self) -> str:
        """'' when no counter rose since the last reset, else which one (for a log)."""
        now = _oom_counters()
        for source, count in now.items():
            before = self._before.get(source)
            if before is not None and count > before:
                return f"oom_kill in {source} rose from {before} to {count}"
        return ""


def worker_killed_note(request: EvalRequest, how: str, watch: OomWatch) -> str:
    """What to add to a worker death: the out-of-memory killer and the limit, when it ran."""
    if "SIGKILL" not in how:
        return ""
    evidence = watch.killed_since()
    if not evidence:
        return ""
    return (
        f"; the kernel's out-of-memory killer ran meanwhile ({evidence}), so memory ran out: "
        f"{limit_text(request)}"
    )
