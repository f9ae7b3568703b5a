"""The live tracker's MLflow calls: each one guarded, each success noted in the run dir's ledger.

Place in the flow: `MlflowTracker`'s writer thread (`tracker_queue.WriterQueue`) makes every
MLflow call through one `TrackerCalls`, and so does `mlflow_tracker_runs.TrackerRuns`, which opens
the runs. A call goes through the `CallBreaker` (a failure is logged and counted, never raised;
too many in a row pause the calls) and is skipped once `finish` gave up waiting for the writer.
A call that fails or is skipped leaves the record `incomplete` (the runs get the degraded tag at
finish); one that succeeds is written to the run dir's ledger, so `kernelarc sync` later uploads
exactly what is missing.
"""

import logging
import os
from collections.abc import Callable
from typing import TypeVar

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelarc.rundir.sync_ledger import (
    CampaignEntry,
    LoggedEntry,
    MarkEntry,
    Part,
    RunEntry,
    SyncLedger,
)
from kernelarc.tracking.call_breaker import CallBreaker
from kernelarc.tracking.tracker_queue import WriterQueue

logger = logging.getLogger(__name__)

T = TypeVar("T")

# requests' exceptions (connection refused, timeouts) are OSError subclasses.
BACKEND_ERRORS = (MlflowException, OSError)
"""What a failing tracking backend raises."""


class TrackerCalls:
    """One tracker's MLflow client, call guard and ledger; the client, the breaker and
    `incomplete` belong to the writer thread, `note` may be called from any thread (the ledger is
    thread-safe)."""

    def __init__(
        self,
        uri: str,
        breaker: CallBreaker,
        writer: WriterQueue,
        ledger: SyncLedger | None,
    ) -> None:
        """Call the store at `uri` through `breaker`; skip calls once `writer` was cut short;
        note successes in `ledger` (None: no run dir, nothing noted)."""
        self.uri = uri
        self._breaker = breaker
        self._writer = writer
        self._ledger = ledger
        self._client: MlflowClient | None = None
        self.incomplete = False
        """True once a call failed or was skipped: the store lacks part of the campaign."""

    @property
    def client(self) -> MlflowClient:
        """The client, made on first use inside a call (a sqlite store opens its DB here); only
        the writer thread uses it."""
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @property
    def failed_calls(self) -> int:
        """Calls that failed so far."""
        return self._breaker.failed_calls

    def available(self) -> bool:
        """False while calls pause after too many failures (see CallBreaker)."""
        return self._breaker.available()

    def record_failure(self, what: str, exc: Exception) -> None:
        """Count and log a failed call made outside `call` (one whose error is looked at)."""
        self._breaker.record_failure(what, exc)
        self.incomplete = True

    def _run(self, what: str, action: Callable[[], T], force: bool) -> tuple[bool, T | None]:
        """Run one MLflow call through the breaker; skipped (False, None) once `finish` gave up
        waiting, so a job still in flight then makes no further call."""
        if self._writer.cut_short:
            self.incomplete = True
            return False, None
        return self._breaker.run(what, action, force)

    def call(self, what: str, action: Callable[[], T], force: bool = False) -> T | None:
        """Run one MLflow call and return its result; None if it failed or was skipped."""
        return self._run(what, action, force)[1]

    def ok(self, what: str, action: Callable[[], object], force: bool = False) -> bool:
        """Run one MLflow call; True if it succeeded. `force` runs it even while calls pause."""
        return self._run(what, action, force)[0]

    def required(self, what: str, action: Callable[[], object]) -> None:
        """Run one MLflow call whose failure leaves the record incomplete."""
        if not self.ok(what, action):
            self.incomplete = True

    def logged(
        self, what: str, action: Callable[[], object], parent: str | None, index: int, part: Part
    ) -> None:
        """A call for one part of attempt `index`; on success the ledger records it under the
        campaign run `parent`."""
        if not self.ok(what, action):
            self.incomplete = True
        elif parent is not None:
            self.note(LoggedEntry(uri=self.uri, run_id=parent, index=index, part=part))

    def note(self, entry: CampaignEntry | RunEntry | LoggedEntry | MarkEntry) -> None:
        """Append `entry` to the ledger; a ledger that cannot be written is logged, not raised."""
        if self._ledger is None:
            return
        try:
            self._ledger.append(entry)
        except OSError as exc:
            logger.warning("%s: cannot write the MLflow ledger (%s)", self._ledger, exc)
