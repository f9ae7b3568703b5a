"""The CPU scheduling of the judge's own processes, and whether a candidate changed it.

Why: the judge, its worker zygote and a worker forked ahead run under the candidate's uid, and
Linux lets a process change the nice value, scheduling policy and CPU affinity of any process of
its uid. A candidate (or a process it left behind) that pushes the judge to nice 19,
`SCHED_IDLE` or one busy core delays the judge's launches while it times the reference, and so
inflates its own speedup; one that does the same to the zygote or to the worker forked ahead
slows every later candidate of a resident judge. None of these can be undone without privileges
the jail does not have, so the judge reads its processes' state before any candidate code runs
(`snapshot`) and compares it (`changes`) where a verdict is decided: at the end of every
workload (`evaluate.py`, REWARD_HACK) and, in a resident judge, once the candidate's processes
are gone (`resident.py`: the request's passes become REWARD_HACK and the judge retires).

What is read, per process (its main thread, the one that times): the nice value, the
scheduling policy, the CPU affinity, and whether it is stopped (a stopped zygote or worker
forked ahead would hang the next candidate's start, and that candidate would be blamed). A
process that is gone is left to the code that talks to it (a dead worker forked ahead is
replaced; a dead zygote is the judge's failure).
"""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SchedState:
    """One process's CPU scheduling."""

    nice: int
    policy: int
    affinity: frozenset[int]
    stopped: bool = False


def read_state(pid: int) -> SchedState | None:
    """`pid`'s scheduling now (0: this process); None when it is gone or cannot be read."""
    pid = pid or os.getpid()  # the main thread, whichever thread asks
    try:
        return SchedState(
            nice=os.getpriority(os.PRIO_PROCESS, pid),
            policy=os.sched_getscheduler(pid),
            affinity=frozenset(os.sched_getaffinity(pid)),
            stopped=is_stopped(pid),
        )
    except OSError:
        return None


def is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (by a signal) or traced, from /proc/PID/stat's state field."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return bool(fields) and fields[0] in (b"T", b"t")


_POLICY_NAMES = {
    getattr(os, name): name
    for name in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")
    if hasattr(os, name)
}


def _policy(policy: int) -> str:
    return _POLICY_NAMES.get(policy, str(policy))


def _cores(cores: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cores)) or "none"


def describe_changes(before: SchedState, after: SchedState) -> list[str]:
    """What differs between two readings of one process, in words (empty: nothing)."""
    found = []
    if after.nice != before.nice:
        found.append(f"nice {before.nice} -> {after.nice}")
    if after.policy != before.policy:
        found.append(f"policy {_policy(before.policy)} -> {_policy(after.policy)}")
    if after.affinity != before.affinity:
        found.append(f"CPUs {_cores(before.affinity)} -> {_cores(after.affinity)}")
    if after.stopped and not before.stopped:
        found.append("stopped")
    return found


@dataclass
class SchedWatch:
    """The judge's processes (by role) and their scheduling before any candidate ran."""

    baseline: dict[str, tuple[int, SchedState]]

    @classmethod
    def snapshot(cls, processes: dict[str, int]) -> "SchedWatch":
        """Read every process of `processes` (role -> pid; 0 is this process) now; a process
        that cannot be read is left out."""
        watch = cls({})
        for role, pid in processes.items():
            watch.add(role, pid)
        return watch

    @classmethod
    def of_judge(cls, zygote_pid: int) -> "SchedWatch":
        """This process (the judge) and its worker zygote, read now."""
        return cls.snapshot({"judge": 0, "worker zygote": zygote_pid})

    def add(self, role: str, pid: int) -> None:
        """Watch one more process (0: this one) from now on (a worker forked ahead, before its
        candidate); one that cannot be read is left out."""
        state = read_state(pid)
        if state is not None:
            self.baseline[role] = (pid or os.getpid(), state)

    def forget(self, role: str) -> None:
        """Stop watching `role` (a worker forked ahead that was given its candidate)."""
        self.baseline.pop(role, None)

    def changes(self) -> str | None:
        """What a candidate changed, as one line naming each process; None when nothing did."""
        found = []
        for role, (pid, before) in self.baseline.items():
            after = read_state(pid)
            if after is None:
                continue
            what = describe_changes(before, after)
            if what:
                found.append(f"{role} (pid {pid}): {', '.join(what)}")
        if not found:
            return None
        return "the scheduling of the judge's own processes was changed: " + "; ".join(found)
