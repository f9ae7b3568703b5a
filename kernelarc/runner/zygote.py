"""A fork server for solution workers.

The judge forks the zygote right after torch and the runner modules are imported and before it
touches CUDA, loads the reference or reads the result key. Each worker is then a fork of that
clean state: no second ~5 s torch import per worker, no CUDA context inherited, no secret in its
memory. The zygote never runs candidate code; it forks workers, hands the judge one end of a
socket pair per worker (SCM_RIGHTS) and reaps them, reporting their wait status.

Control protocol (one outstanding command at a time): 9-byte commands `>cq` (`s`pawn or
`r`eap, pid); replies are 8-byte `>q` (the new pid, with the judge's socket end attached, or the
reaped wait status; a spawn that could not fork answers minus the errno, without a socket).
Closing the judge's end makes the zygote kill and reap its workers and exit.

The zygote is its workers' child subreaper: a process a worker started that outlives it
(double-forked, `setsid`, a daemon) is re-parented to the zygote, not to the host's init, so it
stays below the judge. The zygote reaps such orphans as they end (SIGCHLD) and `sweep()`
(command `k`) kills every one still alive: a resident judge (`resident.py`) sweeps between two
candidates so that nothing one candidate started is alive when the next one runs.

A fork that fails for a transient reason (EAGAIN: the process limit is still held by processes
of a killed worker that are not reaped yet; ENOMEM) is retried for up to `FORK_RETRY_S`; so is the
fork of the zygote itself. Every spawn that yields no worker is a `SpawnFailed` naming why, and
leaves no worker behind: a fork refused after the retries, a socket pair the zygote cannot create
(its open-file limit), a reply it cannot send with the socket attached (the worker it forked is
killed and reaped), and a reply whose socket the judge cannot take (MSG_CTRUNC: the judge's
open-file limit; the judge kills the worker and has the zygote reap it). `ChannelClosed` ("malformed
spawn reply") is left for a zygote that is gone or broke the protocol.
"""

import contextlib
import ctypes
import errno
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from kernelarc.runner.channel import ChannelClosed, recv_exact

logger = logging.getLogger(__name__)

_COMMAND = struct.Struct(">cq")
_REPLY = struct.Struct(">q")

WorkerMain = Callable[[socket.socket], None]
#: How long the zygote retries a fork that fails with EAGAIN or ENOMEM.
FORK_RETRY_S = 10.0
_TRANSIENT = (errno.EAGAIN, errno.ENOMEM)
#: How many times `sweep` looks for orphans again after killing the ones it found.
SWEEP_PASSES = 50
_PR_SET_CHILD_SUBREAPER = 36


class SpawnFailed(Exception):
    """No worker came of a spawn (the message says why: the errno, or the judge's fd limit)."""


def describe_wait_status(status: int) -> str:
    """`exited with code 3`, `was killed by SIGSEGV`, ..."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by {name}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"ended with wait status {status}"


class Zygote:
    """The judge's handle on the fork server."""

    def __init__(self, worker_main: WorkerMain) -> None:
        """Fork the server now; `worker_main(sock)` runs in each worker and must not return."""
        ours, theirs = socket.socketpair()
        try:
            pid = _fork()
        except OSError:
            ours.close()
            theirs.close()
            raise
        if pid == 0:  # the zygote
            ours.close()
            code = 0
            try:
                _serve(theirs, worker_main)
            except BaseException:  # the zygote must never fall back into the judge's code
                logger.exception("worker zygote failed")
                code = 70
            os._exit(code)
        theirs.close()
        self.pid = pid
        self._sock = ours

    def spawn(self) -> tuple[int, socket.socket]:
        """A fresh worker: its pid and the judge's end of its socket.

        Raises:
            SpawnFailed: the fork failed (after retries, for a transient errno).
            ChannelClosed: the zygote is gone or answered something else.
        """
        self._sock.sendall(_COMMAND.pack(b"s", 0))
        data, fds, flags, _ = socket.recv_fds(self._sock, _REPLY.size, 1)
        if len(data) == _REPLY.size and not fds:
            (code,) = _REPLY.unpack(data)
            if code < 0:
                msg = f"the worker zygote could not fork a worker: {os.strerror(-code)}"
                if -code == errno.EAGAIN:
                    msg += " (the process limit stayed spent)"
                raise SpawnFailed(msg)
            if flags & socket.MSG_CTRUNC:
                # The zygote forked worker `code` and attached its socket, but the kernel could
                # not give this process the descriptor: the worker would wait for nothing.
                self._discard(code)
                msg = (
                    "the judge could not receive a new worker's socket (its open-file limit is "
                    "spent); the worker was killed"
                )
                raise SpawnFailed(msg)
        if len(data) != _REPLY.size or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            msg = "the worker zygote gave a malformed spawn reply"
            raise ChannelClosed(msg)
        (pid,) = _REPLY.unpack(data)
        return pid, socket.socket(fileno=fds[0])

    def _discard(self, pid: int) -> None:
        """Kill worker `pid`, which the judge holds no socket of, and have the zygote reap it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        self.reap(pid)

    def reap(self, pid: int) -> int:
        """Wait for worker `pid` to end (kill it first) and return its wait status."""
        self._sock.sendall(_COMMAND.pack(b"r", pid))
        (status,) = _REPLY.unpack(recv_exact(self._sock, _REPLY.size))
        return int(status)

    def sweep(self) -> int:
        """Kill and reap every process below the zygote that is not a worker it was asked to
        fork and has not been told to reap; how many it killed, or -1 when some were still
        there after `SWEEP_PASSES` passes (a fork bomb faster than the sweep).

        Raises:
            ChannelClosed: the zygote is gone.
        """
        self._sock.sendall(_COMMAND.pack(b"k", 0))
        (count,) = _REPLY.unpack(recv_exact(self._sock, _REPLY.size))
        return int(count)

    def close(self) -> None:
        """Stop the zygote, which kills and reaps any worker still alive."""
        self._sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _serve(sock: socket.socket, worker_main: WorkerMain) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the judge reads its result key from fd 0 after this fork
    os.close(devnull)
    children: set[int] = set()
    if _become_subreaper():
        signal.signal(signal.SIGCHLD, lambda *_: _reap_orphans(children))
    while True:
        try:
            op, pid = _COMMAND.unpack(recv_exact(sock, _COMMAND.size))
        except ChannelClosed:
            break
        if op == b"s":
            # SIGCHLD waits until the new worker is in `children`: a worker that ends at once
            # must not be reaped as an orphan before the judge asks for its status.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
            try:
                children.add(_fork_worker(sock, worker_main))
            except OSError as exc:
                logger.warning("worker zygote: no worker: %s", exc)
                sock.sendall(_REPLY.pack(-(exc.errno or errno.EIO)))
                continue
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        elif op == b"r":
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # not a child of ours: say it was killed, never crash
                status = signal.SIGKILL
            children.discard(pid)
            sock.sendall(_REPLY.pack(status))
        elif op == b"k":
            sock.sendall(_REPLY.pack(_kill_orphans(children)))
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _fork(limit_s: float = FORK_RETRY_S) -> int:
    """os.fork(), retried with backoff while it fails with a transient errno."""
    deadline = time.monotonic() + limit_s
    delay = 0.01
    while True:
        try:
            return os.fork()
        except OSError as exc:
            if exc.errno not in _TRANSIENT or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _fork_worker(sock: socket.socket, worker_main: WorkerMain) -> int:
    judge_end, worker_end = socket.socketpair()
    try:
        child = _fork()
    except OSError:
        judge_end.close()
        worker_end.close()
        raise
    if child == 0:
        code = 71
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote's reaper is not the worker's
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            sock.close()
            judge_end.close()
            worker_main(worker_end)
        finally:
            os._exit(code)
    worker_end.close()
    try:
        socket.send_fds(sock, [_REPLY.pack(child)], [judge_end.fileno()])
    except OSError:
        # Nobody will ever talk to this worker: end it before answering with the error.
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
        raise
    finally:
        judge_end.close()
    return child


def _become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER, 1); False where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _child_states() -> dict[int, str]:
    """This process's children (pid -> state letter, `Z` for a zombie), from /proc."""
    me = str(os.getpid())
    found: dict[int, str] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == me:
            found[int(entry.name)] = fields[0]
    return found


def _reap_orphans(workers: set[int]) -> None:
    """Reap the ended processes below the zygote that are not workers (SIGCHLD handler). It
    never raises: an exception in a signal handler surfaces wherever the zygote was, and would
    end the zygote (a fork bomb's thousands of orphans are when it runs most)."""
    try:
        for pid, state in _child_states().items():
            if pid not in workers and state == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
    except Exception:  # the next SIGCHLD or `sweep` reaps what this one missed
        logger.debug("worker zygote: reaping orphans failed", exc_info=True)


def _kill_orphans(workers: set[int]) -> int:
    """SIGKILL and reap every child that is not a worker, until none is left (see `sweep`)."""
    killed = 0
    for _ in range(SWEEP_PASSES):
        orphans = [pid for pid in _child_states() if pid not in workers]
        if not orphans:
            return killed
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            killed += 1
    return -1
