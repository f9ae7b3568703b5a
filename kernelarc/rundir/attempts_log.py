"""attempts.jsonl: the append-only, fsync'd record of every judged attempt of a campaign.

The campaign loop appends each Attempt here before telling the Tracker, so this file is the
source of truth (MLflow may be degraded); `leaderboard.export_run` and resume read it back.
"""

import logging
import threading
from pathlib import Path

from kernelarc.errors import TrackingError
from kernelarc.jsonl_log import append_record, drop_unterminated_tail, read_records
from kernelarc.schema import Attempt

logger = logging.getLogger(__name__)

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
        drop_unterminated_tail(path, "attempts log")

    @property
    def path(self) -> Path:
        """The log file."""
        return self._path

    def append(self, attempt: Attempt) -> None:
        """Write one attempt as a line, flush and fsync.

        Raises:
            TrackingError: the write failed (disk full, permissions); the message names the file.
        """
        with self._lock:
            append_record(self._path, attempt, f"attempt {attempt.index}")


def read_attempts(path: Path) -> list[Attempt]:
    """Read every attempt of an attempts.jsonl, in file order.

    A last line without its newline that does not parse (a crash mid-write) is skipped with a
    warning; blank lines are ignored.

    Raises:
        TrackingError: the file cannot be read, or a complete line is not a valid Attempt; the
            message names `file:line` and the field.
    """
    try:
        return read_records(path, Attempt, "Attempt record")
    except FileNotFoundError as exc:
        msg = f"{path}: cannot read the attempts log ({exc})"
        raise TrackingError(msg) from exc
