"""The judge's handle on one solution worker: requests with a time budget, death detection.

Every exchange runs under the workload's remaining `Budget` (`hang_deadline.py`: derived from
the workload, capped by the request's timeouts; no limit without one). A worker that
closes its socket, breaks the protocol or overruns the budget raises `WorkerDied` or
`WorkerTimedOut`; the judge then `stop()`s it (SIGKILL of its process tree + reap, which says
how it ended) and starts a fresh one for the next workload. `stop()` returns only once every
process of that tree is gone (reaped by whoever inherited it): a killed fork bomb's processes
hold the process limit (RLIMIT_NPROC, a container's pids limit) until they are reaped, and the
next worker's fork must not fail on them.
"""

import contextlib
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from kernelarc.runner.channel import (
    Blob,
    ChannelError,
    WorkerReply,
    pack_values,
    recv_message,
    send_message,
)
from kernelarc.runner.cuda_ipc import SharingUnavailable, StagingPool, open_values
from kernelarc.runner.hang_deadline import Budget
from kernelarc.runner.interleaved import block_budget_s, block_calls, interleaved_calls
from kernelarc.runner.zygote import SpawnFailed, Zygote, describe_wait_status
from kernelarc.schema import TimingConfig

logger = logging.getLogger(__name__)


class WorkerDied(Exception):
    """The worker closed its socket, or sent something the protocol does not allow."""


class WorkerTimedOut(Exception):
    """The workload's time budget ran out while waiting for the worker."""


@dataclass(frozen=True)
class RunResult:
    """A worker's answer to one `run` request, with the judge's own measurements."""

    reply: WorkerReply
    blob: Blob
    round_trip_s: float
    """Judge-measured wall time from sending the inputs to having the outputs."""
    pack_s: float
    """Judge-side serialisation CPU time of the inputs."""
    cpu_s: float | None
    """The worker's CPU time over the round trip (see `WorkerClient.cpu_time_s`), if readable."""
    values: list[Any] | None = None
    """The outputs, already copied into the judge's memory, when they came by CUDA IPC."""
    unpack_s: float = 0.0
    """Judge-side CPU time spent mapping and copying IPC outputs."""


@dataclass
class PendingRun:
    """A `run` request sent to a worker and not yet answered (`WorkerClient.start_run`)."""

    workload: int
    inputs: Sequence[Any]
    shared: bool
    """The inputs went by CUDA IPC."""
    staged: list[Any]
    """The judge's staged copies the worker maps: kept alive until it answered."""
    pack_s: float
    cpu_before: float | None


_REPLY_HEADER_ONLY = 0
_TREE_PASSES = 50
#: How long `stop()` waits for the killed tree to be reaped (a subreaper or the namespace's init
#: does that, usually within milliseconds; a loaded host can take much longer).
TREE_GONE_WAIT_S = 20.0
_staging: StagingPool | None = None


def _staging_pool() -> StagingPool:
    """The judge's one private pool for inputs shared with workers (made on first use)."""
    global _staging
    if _staging is None:
        _staging = StagingPool()
    return _staging


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat): with the pid, an
    identity that a reused pid does not share; None when the process is gone (reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def wait_until_reaped(pids: dict[int, str], limit_s: float) -> list[int]:
    """Wait until none of `pids` (pid -> start time) exists any more, zombies included (a zombie
    still counts against process limits); the pids still there after `limit_s`."""
    deadline = time.monotonic() + limit_s
    delay = 0.001
    while True:
        left = [pid for pid, started in pids.items() if _start_time(pid) == started]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _descendants(root: int) -> list[int]:
    """Every process below `root` in the parent tree, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class WorkerClient:
    """One forked worker; not reusable after `stop()`."""

    def __init__(
        self, zygote: Zygote, *, share_cuda: bool = False, request_json: bytes | None = None
    ) -> None:
        """Fork a worker; with `request_json` it is sent its `setup` at once (it starts
        importing the candidate), else `setup` gives it later (a pre-started worker).

        `share_cuda`: pass CUDA inputs and outputs by IPC handle (`cuda_ipc`) rather than by
        copy; it turns itself off for this worker at the first value that cannot be shared.
        """
        self._zygote = zygote
        self.share_cuda = share_cuda
        self.sharing_note = ""
        try:
            self.pid, self._sock = zygote.spawn()
        except SpawnFailed as exc:
            raise WorkerDied(str(exc)) from exc
        self.forked_at = time.monotonic()
        self.setup_at: float | None = None
        self.budget = Budget()
        """The workload's budget; the judge replaces it per workload (a shared object)."""
        self._stopped: str | None = None
        self._sent_at = time.perf_counter()
        if request_json is not None:
            self.setup(request_json)

    def setup(self, request_json: bytes) -> None:
        """Give a worker forked by `worker.worker_main` its candidate: the request as JSON
        (then it imports the candidate; `wait_ready` has its answer)."""
        self.setup_at = time.monotonic()
        self._send({"kind": "setup"}, request_json)

    def context_on_path_s(self, reply: WorkerReply) -> float:
        """Seconds of the worker's CUDA context making that came after its `setup` was sent
        (the candidate waited for them), from its start reply."""
        if self.setup_at is None:
            return 0.0
        return max(0.0, self.forked_at + reply.context_s - self.setup_at)

    def wait_ready(self) -> WorkerReply:
        """The worker's start reply: `ready`, `import_error` or `compile_error`."""
        reply, _, _ = self._receive(("ready", "import_error", "compile_error"), 0)
        return reply

    def run(self, workload: int, inputs: Sequence[Any], max_blob: int) -> RunResult:
        """Ask for one call on `inputs`; outputs come back as a blob or, on CUDA, by IPC.

        When sharing fails either way (the worker cannot map the inputs, or its output
        descriptors cannot be read) sharing is turned off and the call repeated with copies.
        """
        return self.finish_run(self.start_run(workload, inputs), max_blob)

    def start_run(self, workload: int, inputs: Sequence[Any]) -> "PendingRun":
        """The first half of `run`: send the request and return at once, so that several
        workers can work at the same time (`finish_run` collects the answer)."""
        started = time.thread_time()  # CPU time: preemption on a loaded host is not counted
        header: dict[str, Any] = {"kind": "run", "workload": workload}
        blob: Blob = b""
        staged: list[Any] = []
        if self.share_cuda:
            try:
                staged, descs = _staging_pool().stage(inputs)
                header["shared"] = [d.model_dump(mode="json") for d in descs]
            except SharingUnavailable as exc:
                self._stop_sharing(f"inputs not shared by IPC ({exc}); sent by copy")
        if "shared" not in header:
            blob = pack_values(inputs)
        pack_s = time.thread_time() - started
        cpu_before = self.cpu_time_s()
        self._send(header, blob)
        return PendingRun(workload, inputs, "shared" in header, staged, pack_s, cpu_before)

    def finish_run(self, pending: "PendingRun", max_blob: int) -> RunResult:
        """The second half of `run`: wait for the worker's answer to `pending`."""
        reply, out, elapsed = self._receive(("run",), max_blob)
        cpu_after = self.cpu_time_s()
        if reply.ipc_failed and pending.shared:
            self._stop_sharing(f"the worker could not map the shared inputs: {reply.error}")
            return self.run(pending.workload, pending.inputs, max_blob)
        pending.staged.clear()  # the worker is done with them (the allocator keeps them until
        # it unmapped)
        cpu_before = pending.cpu_before
        cpu_s = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        values = None
        unpack_s = 0.0
        if reply.shared is not None:
            started = time.thread_time()
            try:
                values = open_values(reply.shared, copy=True)
                torch.cuda.synchronize()
            except Exception as exc:
                why = f"outputs shared by IPC could not be read ({type(exc).__name__}: {exc})"
                self._stop_sharing(f"{why}; the call was repeated with copies")
                return self.run(pending.workload, pending.inputs, max_blob)
            unpack_s = time.thread_time() - started
        return RunResult(
            reply=reply,
            blob=out,
            round_trip_s=elapsed,
            pack_s=pending.pack_s,
            cpu_s=cpu_s,
            values=values,
            unpack_s=unpack_s,
        )

    def _stop_sharing(self, why: str) -> None:
        self.share_cuda = False
        self.sharing_note = why

    def cpu_time_s(self) -> float | None:
        """CPU seconds the worker used so far, as the kernel accounts them (unforgeable).

        max(main thread's time on CPU from /proc/PID/schedstat, all threads' utime+stime from
        /proc/PID/stat divided by torch's intra-op thread count): time spent waiting for a
        CPU on a loaded host is not in it, and a kernel's own worker threads count at most
        once. None when /proc/PID is not this worker (a PID namespace without its own /proc).
        """
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
            if int(fields[1]) != self._zygote.pid:
                return None  # not our worker: /proc is not this PID namespace's
            ticks = int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            return None
        total = ticks / os.sysconf("SC_CLK_TCK") / max(1, torch.get_num_threads())
        with contextlib.suppress(OSError, ValueError, IndexError):
            main = int(Path(f"/proc/{self.pid}/schedstat").read_text().split()[0]) / 1e9
            return max(main, total)
        return total

    def time(self, config: TimingConfig) -> WorkerReply:
        """Ask for the median latency over the last run's inputs."""
        header = {
            "kind": "time",
            "warmup": config.warmup,
            "iterations": config.iterations,
            "flush_l2": config.flush_l2,
            "budget_s": config.budget_s,
        }
        self._send(header, b"")
        reply, _, _ = self._receive(("time",), _REPLY_HEADER_ONLY)
        return reply

    def time_block(self, config: TimingConfig, method: str, *, first: bool) -> WorkerReply:
        """Ask for one interleaved timing block (`interleaved.py`) with the judge's clock
        `method`; `first` starts a fresh pool for the workload's blocks."""
        header = {
            "kind": "time_block",
            "warmup": config.block_warmup,
            "calls": block_calls(config),
            "flush_l2": config.flush_l2,
            "method": method,
            "budget_s": block_budget_s(config),
            "core": config.timing_core,
            "first": first,
            "pool_calls": interleaved_calls(config),
        }
        self._send(header, b"")
        reply, _, _ = self._receive(("time_block",), _REPLY_HEADER_ONLY)
        return reply

    def stop(self) -> str:
        """Kill and reap the worker and every process it started; how it ended.

        The worker's descendants are stopped (SIGSTOP: none can fork any more) until the set
        is complete, then all are SIGKILLed, and this returns once every one of them has been
        reaped (or `TREE_GONE_WAIT_S` passed): a fork bomb in one workload cannot keep the
        process limit spent for the next. Orphans it made earlier are left to the sandbox.
        """
        if self._stopped is None:
            self._sock.close()
            tree = {pid: started for pid in self._tree() if (started := _start_time(pid))}
            for pid in tree:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            try:
                self._stopped = describe_wait_status(self._zygote.reap(self.pid))
            except (OSError, ChannelError):  # the zygote is gone: the worker was killed above
                self._stopped = "was killed (its zygote was gone, so its status is unknown)"
            left = wait_until_reaped(tree, TREE_GONE_WAIT_S)
            if left:
                logger.warning(
                    "%d processes of the killed worker %d were not reaped within %.0f s",
                    len(left),
                    self.pid,
                    TREE_GONE_WAIT_S,
                )
        return self._stopped

    def _tree(self) -> set[int]:
        """The worker and its descendants, each stopped (empty when /proc is not ours)."""
        if _parent_of(self.pid) != self._zygote.pid:
            return set()
        stopped: set[int] = set()
        for _ in range(_TREE_PASSES):
            found = {self.pid, *_descendants(self.pid)} - stopped
            if not found:
                break
            for pid in found:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            stopped |= found
        return stopped

    def _timeout(self) -> float | None:
        left = self.budget.remaining_s()
        if left is None:
            return None
        if left <= 0:
            raise WorkerTimedOut
        return left

    def _charge(self, seconds: float) -> None:
        self.budget.charge(seconds)

    def _send(self, header: dict[str, Any], blob: Blob) -> None:
        self._sock.settimeout(self._timeout())
        started = time.perf_counter()
        self._sent_at = started
        try:
            send_message(self._sock, header, blob)
        except TimeoutError as exc:
            raise WorkerTimedOut from exc
        except OSError as exc:
            msg = f"the worker stopped reading: {exc}"
            raise WorkerDied(msg) from exc
        finally:
            self._charge(time.perf_counter() - started)

    def _receive(self, kinds: tuple[str, ...], max_blob: int) -> tuple[WorkerReply, Blob, float]:
        self._sock.settimeout(self._timeout())
        started = time.perf_counter()
        try:
            header, blob = recv_message(self._sock, max_blob=max_blob)
        except TimeoutError as exc:
            raise WorkerTimedOut from exc
        except (ChannelError, OSError) as exc:
            raise WorkerDied(str(exc)) from exc
        finally:
            self._charge(time.perf_counter() - started)
        elapsed = time.perf_counter() - self._sent_at
        try:
            reply = WorkerReply.model_validate(header)
        except ValidationError as exc:
            msg = f"the worker sent an invalid reply: {exc}"
            raise WorkerDied(msg) from exc
        if reply.kind not in kinds:
            msg = f"the worker answered {reply.kind!r} where {kinds} was expected"
            raise WorkerDied(msg)
        return reply, blob, elapsed
