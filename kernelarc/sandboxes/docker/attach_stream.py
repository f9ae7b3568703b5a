"""The output side of a `docker exec` attach: read it against a deadline, keep only its tails.

Place in the flow: `exec_runner.ExecRunner.finish` pumps its runner's connection through
`pump_until` into an `AttachStream` until the runner ends or its deadline passes. Docker
multiplexes stdout and stderr on one connection in frames: an 8-byte header (stream byte, 3 zero
bytes, big-endian payload size), then the payload. Nothing here imports docker.
"""

import logging
import socket
import struct
import time

from kernelarc.sandboxes.result_file import cap_tail

logger = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024


class AttachStream:
    """Docker's attach stream (8-byte frame headers) into capped stdout and stderr tails."""

    def __init__(self) -> None:
        self._pending = b""
        self.stdout = bytearray()
        self.stderr = bytearray()

    def feed(self, data: bytes) -> None:
        """Add bytes as read from the connection (frames may be split anywhere)."""
        self._pending += data
        while len(self._pending) >= 8:
            kind, size = self._pending[0], struct.unpack(">I", self._pending[4:8])[0]
            if len(self._pending) < 8 + size:
                break
            target = self.stdout if kind == 1 else self.stderr
            target += self._pending[8 : 8 + size]
            self._pending = self._pending[8 + size :]
            if len(target) > 2 * TAIL_BYTES:
                del target[:-TAIL_BYTES]

    def log(self) -> str:
        """The stderr tail, then the stdout tail when there is one (capped as a trace log)."""
        text = self.stderr[-TAIL_BYTES:].decode("utf-8", errors="replace")
        out = self.stdout[-TAIL_BYTES // 4 :].decode("utf-8", errors="replace")
        return cap_tail(text + ("\n--- stdout ---\n" + out if out.strip() else ""))


def pump_until(conn: socket.socket, stream: AttachStream, deadline: float) -> bool:
    """Read the exec's output until it ends (True) or the deadline passes (False)."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        conn.settimeout(min(remaining, 5.0))
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        except OSError as exc:
            logger.warning("the runner's output stream broke: %s", exc)
            return True
        if not data:
            return True
        stream.feed(data)


def drain(conn: socket.socket, stream: AttachStream) -> bool:
    """Read what the connection already holds, without waiting; True when it ended."""
    conn.settimeout(0.0)
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return True
            stream.feed(data)
    except (BlockingIOError, TimeoutError):
        return False
    except OSError as exc:
        logger.warning("the runner's output stream broke: %s", exc)
        return True
