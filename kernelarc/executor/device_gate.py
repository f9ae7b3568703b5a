"""Who may use a device while the guard times on it: screens share it, the guard's runs do not.

Place in the flow: `LocalExecutor` gives each device (a GPU index, or None for the CPU) that
both a timed slot and correctness slots use one `DeviceGate`. A correctness screen holds the gate
shared for its whole sandbox run; a guard run (re-timing, confirmation) holds it exclusive, so
the guard's numbers, the ones a campaign reports and exports, are taken with no screen on its
device. A candidate's own timed run takes no side: it may run beside screens, which compile and
check other candidates (mostly CPU work, a few kernel calls), and the gate tells it whether any
did, so its result can say so.

Writer preference: once a guard run waits, no new screen starts; the screens already running
finish (a screen is a few seconds, and never needs a timed slot, so the wait cannot deadlock).
A guard challenge is several runs back to back (re-timing rounds, then the confirmation), so
after a guard run the device stays closed to new screens for `grace_s`: the next run of the same
challenge takes it at once instead of waiting for screens that slipped in between (on the
H200, 2026-12-04, that wait was 24-28 s of a 100 s campaign).
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds the device stays closed to new screens after a guard run (see the module docstring).
GUARD_GRACE_S = 2.0


class DeviceGate:
    """A readers-writer gate over one device; thread-safe."""

    def __init__(self, grace_s: float = GUARD_GRACE_S) -> None:
        """No holder; the device stays closed to screens `grace_s` after a guard run."""
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0
        self._shared_starts = 0
        self._grace_s = grace_s
        self._closed_until = 0.0

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the device beside others (a screen); waits while a guard run holds or wants it,
        and for the grace after one."""
        with self._cond:
            while True:
                if self._exclusive or self._exclusive_waiting:
                    self._cond.wait()
                    continue
                closed_for = self._closed_until - time.monotonic()
                if closed_for <= 0:
                    break
                self._cond.wait(closed_for)
            self._shared += 1
            self._shared_starts += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the device alone (a guard run); waits for the running screens to finish."""
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._closed_until = time.monotonic() + self._grace_s
                self._cond.notify_all()

    @contextmanager
    def watched(self) -> Iterator["Overlap"]:
        """Run beside whatever holds the gate (a candidate's timed run) and learn afterwards
        whether any screen ran on the device meanwhile."""
        with self._cond:
            overlap = Overlap(running_at_start=self._shared)
            starts = self._shared_starts
        try:
            yield overlap
        finally:
            with self._cond:
                overlap.started_during = self._shared_starts - starts

    def holders(self) -> int:
        """Screens holding the gate now."""
        with self._cond:
            return self._shared

    def guards_waiting(self) -> int:
        """Guard runs waiting for the device now."""
        with self._cond:
            return self._exclusive_waiting


class Overlap:
    """How many screens shared the device with a watched run."""

    def __init__(self, running_at_start: int) -> None:
        """`running_at_start` screens were running when the watched run began."""
        self.running_at_start = running_at_start
        self.started_during = 0

    @property
    def screens(self) -> int:
        """Screens that ran at some point during the watched run."""
        return self.running_at_start + self.started_during
