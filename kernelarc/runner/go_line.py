"""The `go` line that starts a spare runner, and the deadline it may carry.

A spare runner (`python -P -m kernelarc.runner --device DEVICE ...`) imports torch, then waits
on stdin for `go\\n` or `go SECONDS\\n`, then the result key line. The go line is read one byte
at a time so that not one byte of the key line enters the process before the worker zygote is
forked (`result_key`). With SECONDS the runner makes itself a process-group leader and SIGKILLs
its whole group SECONDS after reading the line: the Docker sandbox's timeout, since a spare that
waits an unknown time before `go` cannot run under `timeout -s KILL`. The local sandbox sends no
deadline: it times the runner and kills its group from the host.

Imports nothing heavy: the host side formats the line with `go_line` too.
"""

import contextlib
import logging
import os
import signal
import threading
from dataclasses import dataclass

logger = logging.getLogger(__name__)

_MAX_LINE = 64


@dataclass(frozen=True)
class Go:
    """A go line received; `deadline_s` None when the host keeps time itself."""

    deadline_s: float | None


class BadGoLine(ValueError):
    """Stdin held something other than a go line."""


def go_line(deadline_s: float | None = None) -> bytes:
    """The line a host writes to start a spare (`deadline_s` > 0, or None for none)."""
    if deadline_s is None:
        return b"go\n"
    if not deadline_s > 0:
        msg = f"a go deadline must be > 0 s (got {deadline_s})"
        raise ValueError(msg)
    return f"go {deadline_s:.3f}\n".encode("ascii")


def parse_go_line(line: bytes) -> Go:
    """`go` or `go SECONDS` (without the newline) into a Go.

    Raises:
        BadGoLine: anything else.
    """
    words = line.decode("ascii", errors="replace").split()
    if not words or words[0] != "go" or len(words) > 2:
        msg = f"expected a go line, got {line[:_MAX_LINE]!r}"
        raise BadGoLine(msg)
    if len(words) == 1:
        return Go(deadline_s=None)
    try:
        deadline = float(words[1])
    except ValueError:
        msg = f"bad go deadline {words[1]!r}"
        raise BadGoLine(msg) from None
    if not deadline > 0:
        msg = f"a go deadline must be > 0 s (got {words[1]!r})"
        raise BadGoLine(msg)
    return Go(deadline_s=deadline)


def wait_for_go(fd: int = 0) -> Go | None:
    """Block until the go line arrives on `fd`; None on EOF first (the spare was discarded).

    Reads one byte at a time, so nothing after the line's newline is consumed.

    Raises:
        BadGoLine: the line is not a go line, or runs past 64 bytes without a newline.
    """
    line = bytearray()
    while True:
        try:
            byte = os.read(fd, 1)
        except InterruptedError:
            continue
        if not byte:
            return None
        if byte == b"\n":
            return parse_go_line(bytes(line))
        line += byte
        if len(line) > _MAX_LINE:
            msg = f"no newline in the first {_MAX_LINE} bytes of stdin"
            raise BadGoLine(msg)


def lead_own_group() -> None:
    """setpgid(0, 0): the group the deadline kills is this process and what it forks after.

    EPERM (already a session leader, the local sandbox's case) is fine: it leads its group.
    """
    try:
        os.setpgid(0, 0)
    except PermissionError:
        if os.getpgrp() != os.getpid():
            logger.warning("cannot lead a process group; the deadline kills the inherited one")


def start_deadline(seconds: float) -> threading.Timer:
    """A daemon thread that SIGKILLs this process's group `seconds` from now."""

    message = f"runner: deadline of {seconds:.3f} s from go reached; killing the group\n"

    def expire() -> None:
        # os.write, not logging: a logging lock held by a stuck main thread must not delay this.
        with contextlib.suppress(OSError):
            os.write(2, message.encode())
        os.killpg(os.getpgrp(), signal.SIGKILL)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer
