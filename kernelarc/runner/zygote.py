"""A fork server for solution workers.

The judge forks the zygote right after torch and the runner modules are imported and before it
touches CUDA, loads the reference or reads the result key. Each worker is then a fork of that
clean state: no second ~5 s torch import per worker, no CUDA context inherited, no secret in its
memory. The zygote never runs candidate code; it forks workers, hands the judge one end of a
socket pair per worker (SCM_RIGHTS) and reaps them, reporting their wait status.

Control protocol (one outstanding command at a time): 9-byte commands `>cq` (`s`pawn or
`r`eap, pid); replies are 8-byte `>q` (the new pid, with the judge's socket end attached, or the
reaped wait status). Closing the judge's end makes the zygote kill and reap its workers and exit.
"""

import contextlib
import logging
import os
import signal
import socket
import struct
from collections.abc import Callable

from kernelarc.runner.channel import ChannelClosed, recv_exact

logger = logging.getLogger(__name__)

_COMMAND = struct.Struct(">cq")
_REPLY = struct.Struct(">q")

WorkerMain = Callable[[socket.socket], None]


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
        pid = os.fork()
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
        """A fresh worker: its pid and the judge's end of its socket."""
        self._sock.sendall(_COMMAND.pack(b"s", 0))
        data, fds, _, _ = socket.recv_fds(self._sock, _REPLY.size, 1)
        if len(data) != _REPLY.size or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            msg = "the worker zygote gave a malformed spawn reply"
            raise ChannelClosed(msg)
        (pid,) = _REPLY.unpack(data)
        return pid, socket.socket(fileno=fds[0])

    def reap(self, pid: int) -> int:
        """Wait for worker `pid` to end (kill it first) and return its wait status."""
        self._sock.sendall(_COMMAND.pack(b"r", pid))
        (status,) = _REPLY.unpack(recv_exact(self._sock, _REPLY.size))
        return int(status)

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
    while True:
        try:
            op, pid = _COMMAND.unpack(recv_exact(sock, _COMMAND.size))
        except ChannelClosed:
            break
        if op == b"s":
            child = _fork_worker(sock, worker_main)
            children.add(child)
        elif op == b"r":
            _, status = os.waitpid(pid, 0)
            children.discard(pid)
            sock.sendall(_REPLY.pack(status))
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _fork_worker(sock: socket.socket, worker_main: WorkerMain) -> int:
    judge_end, worker_end = socket.socketpair()
    child = os.fork()
    if child == 0:
        code = 71
        try:
            sock.close()
            judge_end.close()
            worker_main(worker_end)
        finally:
            os._exit(code)
    worker_end.close()
    socket.send_fds(sock, [_REPLY.pack(child)], [judge_end.fileno()])
    judge_end.close()
    return child
