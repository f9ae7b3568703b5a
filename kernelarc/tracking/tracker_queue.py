"""One writer thread for a tracker's backend calls, fed through a FIFO queue.

Place in the flow: `MlflowTracker` hands every MLflow call to one `WriterQueue`. The campaign
loop reports attempts while it holds its state lock, which every agent thread takes; a tracking
server that answers slowly must not stall them all. So the tracker's methods only enqueue (a
list append under a short lock) and return, and this thread makes the calls, one at a time, in
the order they were enqueued: per run, metrics and tags land in the order the loop reported them,
and the backend's guard (`CallBreaker`, not thread-safe) is only used from here.

`close` waits a bounded time for the queue to empty; on timeout the queue is cut short: the call
in flight finishes, the jobs still queued are dropped (their data stays in attempts.jsonl, and
`kernelarc sync` uploads what the ledger does not list). The thread is a daemon, so a hung call
never keeps the process alive. No mlflow import: it runs any callable.
"""

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

Job = Callable[[], object]
"""One unit of work for the writer (it catches and logs whatever the job raises)."""


class _Waiter(Generic[T]):
    """The result of one job a caller waits for (`WriterQueue.call`)."""

    def __init__(self, job: Callable[[], T]) -> None:
        self._job = job
        self.done = threading.Event()
        self.result: T | None = None

    def __call__(self) -> None:
        try:
            self.result = self._job()
        finally:
            self.done.set()


class WriterQueue:
    """A FIFO of jobs served by one daemon thread, started on the first job.

    Thread-safe: any thread may `submit`; `call` and `close` must not be called from a job
    (the writer would wait on itself).
    """

    def __init__(self, name: str) -> None:
        """Name the writer thread `name` (it appears in thread dumps and log records)."""
        self._name = name
        self._cond = threading.Condition()
        self._jobs: deque[Job] = deque()
        self._busy = False
        self._closed = False
        self._cut_short = False
        self._dropped = 0
        self._thread: threading.Thread | None = None

    @property
    def cut_short(self) -> bool:
        """True once `close` timed out: the job in flight should stop making calls."""
        return self._cut_short

    @property
    def dropped(self) -> int:
        """Jobs a timed-out `close` dropped unrun."""
        return self._dropped

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._jobs) + int(self._busy)

    def submit(self, job: Job) -> bool:
        """Queue `job` after every job queued before it and return at once; False (not queued)
        once the queue is closed."""
        with self._cond:
            if self._closed:
                return False
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return True

    def call(self, job: Callable[[], T]) -> T | None:
        """Queue `job`, wait until the writer ran it (after every job before it) and return its
        result; None if it raised or the queue is closed. Waits as long as the job takes: for
        calls made once, outside any lock the agents take (opening the campaign)."""
        waiter = _Waiter(job)
        if not self.submit(waiter):
            return None
        waiter.done.wait()
        return waiter.result

    def close(self, timeout_s: float) -> bool:
        """Refuse new jobs and wait up to `timeout_s` until every queued job ran; True if they
        did (the writer thread then ends). On timeout the job in flight finishes (`cut_short`
        tells it to make no further call), the queued ones are dropped (`dropped`), and False is
        returned: the caller says what that means for its data."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            if self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout_s):
                return True
            dropped = list(self._jobs)
            self._jobs.clear()
            self._cut_short = True
            self._dropped = len(dropped)
        for job in dropped:
            if isinstance(job, _Waiter):
                job.done.set()  # its caller gets None instead of waiting forever
        return False

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait up to `timeout_s` (None: as long as it takes) until no job is queued or running;
        True if so. Does not close the queue."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout_s)

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                self._cond.wait_for(lambda: bool(self._jobs) or self._closed)
                if not self._jobs:  # closed and empty: nothing more will come
                    return
                job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except Exception:
                # A job's own bug must not kill the writer (every later call would be lost).
                logger.exception("tracker writer %s: a queued job failed", self._name)
