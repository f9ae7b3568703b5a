"""attempts.jsonl: the append-only, fsync'd record of every judged attempt of a campaign.

The campaign loop appends each Attempt here before telling the Tracker, so this file is the
source of truth (MLflow may be degraded); `leaderboard.export_run` and resume read it back.
"""

import logging
import os
import threading
from pathlib import Path

from pydantic import ValidationError

from kernelarc.errors import TrackingError
from kernelarc.schema import Attempt

logger = logging.getLogger(__name__)

ATTEMPTS_FILE = "attempts.jsonl"
"""File name of the log inside a run dir."""


class AttemptLog:
    """Append-only JSONL writer of Attempts; safe to share between threads.

    Each append writes one whole line, flushes it and fsyncs the file, so after a crash the file
    holds every attempt appended before it, plus at most one truncated last line.
    """

    def __init__(self, path: Path) -> None:
        """Open (or create) the log at `path`; its parent directory must exist.

        A truncated last line left by a crash is cut off (with a warning) so that appends start
        on a fresh line and the file stays valid JSONL.

        Raises:
            TrackingError: the file cannot be read or repaired.
        """
        self._path = path
        self._lock = threading.Lock()
        _drop_unterminated_tail(path)

    @property
    def path(self) -> Path:
        """The log file."""
        return self._path

    def append(self, attempt: Attempt) -> None:
        """Write one attempt as a line, flush and fsync.

        Raises:
            TrackingError: the write failed (disk full, permissions); the message names the file.
        """
        line = attempt.model_dump_json() + "\n"
        with self._lock:
            try:
                with self._path.open("a", encoding="utf-8") as handle:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                msg = f"{self._path}: cannot append attempt {attempt.index} ({exc})"
                raise TrackingError(msg) from exc


def _drop_unterminated_tail(path: Path) -> None:
    """Cut a last line that has no newline (a write cut short by a crash)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        msg = f"{path}: cannot read the attempts log ({exc})"
        raise TrackingError(msg) from exc
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    logger.warning(
        "%s: dropping a truncated last line of %d bytes (a crash mid-write): %r",
        path,
        len(data) - keep,
        data[keep : keep + 120],
    )
    try:
        with path.open("r+b") as handle:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        msg = f"{path}: cannot repair the truncated last line ({exc})"
        raise TrackingError(msg) from exc


def read_attempts(path: Path) -> list[Attempt]:
    """Read every attempt of an attempts.jsonl, in file order.

    A last line without its newline that does not parse (a crash mid-write) is skipped with a
    warning; blank lines are ignored.

    Raises:
        TrackingError: the file cannot be read, or a complete line is not a valid Attempt; the
            message names `file:line` and the field.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        msg = f"{path}: cannot read the attempts log ({exc})"
        raise TrackingError(msg) from exc
    # Lines stay bytes: a cut can split a multi-byte character, which must not fail the file.
    lines = data.split(b"\n")
    # split(b"\n") leaves b"" last when the file ends with a newline; otherwise the last item is
    # an unterminated line, the only one a crash can leave behind.
    unterminated = len(lines) - 1 if lines[-1].strip() else -1
    attempts: list[Attempt] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            attempts.append(Attempt.model_validate_json(line))
        except ValidationError as exc:
            where = f"{path}:{i + 1}"
            if i == unterminated:
                logger.warning("%s: skipping a truncated or invalid last line (%s)", where, exc)
                continue
            msg = f"{where}: not a valid Attempt record: {_describe(exc)}"
            raise TrackingError(msg) from exc
    return attempts


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<line>"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)
