"""The tracker's guard around MLflow calls: failures are logged and counted, never raised; after
too many in a row, calls pause for a while, then the next one probes the backend again.

Place in the flow: `MlflowTracker`'s writer thread runs every MLflow call through one
`CallBreaker`, held by its `mlflow_tracker_calls.TrackerCalls`. No mlflow import (it guards any
callable).
"""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_MAX_MESSAGE = 500


class CallBreaker:
    """Runs calls to one backend; not thread-safe (only the tracker's writer thread uses it)."""

    def __init__(self, backend: str, max_consecutive_failures: int, retry_after_s: float) -> None:
        """Guard calls to `backend` (named in log lines): after `max_consecutive_failures`
        failures in a row, skip calls for `retry_after_s` seconds."""
        self._backend = backend
        self._max_in_a_row = max(1, max_consecutive_failures)
        self._retry_after_s = max(0.0, retry_after_s)
        self._failed_calls = 0
        self._in_a_row = 0
        self._paused = False
        self._retry_at = 0.0

    @property
    def failed_calls(self) -> int:
        """Calls that failed so far."""
        return self._failed_calls

    def available(self) -> bool:
        """False while calls are paused after too many failures."""
        return not self._paused or time.monotonic() >= self._retry_at

    def run(self, what: str, action: Callable[[], T], force: bool = False) -> tuple[bool, T | None]:
        """Run `action` (`what` names it in log lines): (True, result), or (False, None) when it
        failed or was skipped while paused (`force` runs it anyway)."""
        if not force and not self.available():
            return False, None
        try:
            result = action()
        except Exception as exc:
            # The Tracker contract: a backend failure never reaches the campaign. Backends fail
            # with more than MlflowException and OSError (e.g. alembic's CommandError when two
            # processes create one SQLite store at once), so all are caught, logged and counted;
            # attempts.jsonl and `kernelarc sync` cover the gap.
            self.record_failure(what, exc)
            return False, None
        if self._paused:
            logger.warning(
                "MLflow at %s answers again; logging resumes (kernelarc sync uploads the gap)",
                self._backend,
            )
        self._paused = False
        self._in_a_row = 0
        return True, result

    def record_failure(self, what: str, exc: Exception) -> None:
        """Count and log one failed call; pause calls after too many in a row."""
        self._failed_calls += 1
        self._in_a_row += 1
        log = logger.warning if not self._paused else logger.debug
        text = str(exc)
        log(
            "MLflow: could not %s at %s (%s: %s); tracking is degraded, attempts.jsonl stays "
            "the source of truth",
            what,
            self._backend,
            type(exc).__name__,
            text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "...",
        )
        if self._in_a_row < self._max_in_a_row:
            return
        if not self._paused:
            logger.warning(
                "MLflow: %d failures in a row; not contacting %s for %.0f s (then retrying); "
                "`kernelarc sync RUN_DIR` uploads what is missing",
                self._in_a_row,
                self._backend,
                self._retry_after_s,
            )
        self._paused = True
        self._retry_at = time.monotonic() + self._retry_after_s
