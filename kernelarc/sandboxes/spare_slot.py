"""The one pre-started spare runner a local sandbox keeps for its next evaluation.

Place in the flow: `LocalSandbox` offers every spare it starts here and takes it back in the
lifecycle's first step (`runner_lifecycle.py`); its `Spare` protocol is the part of the
lifecycle's `Runner` this needs. (A DockerSandbox slot holds its one spare under the slot's
lock instead, `docker/slot.py`.)

A one-off runner serves one candidate; a resident judge (`local/runner_process.py`) comes
back here after each request and serves the next of its problem. Either way the
spare moves the runner's start-up (the ~3 s torch import) off the candidate's path. The
sandbox starts it when an evaluation has ended (its runner and every process it left are dead
by then) on cpu, so the import never overlaps a candidate's CPU timing; on cuda when an
evaluation takes its runner, as the other of two users, so the running candidate cannot reach
it (the rules and why: `runner_lifecycle.py`).

A spare fits a request with the same key (device, and the timeout its limits were computed
for) while it is alive; `take` hands it out once, else the caller starts a runner itself (a
cold start). Thread-safe: `evaluate` may run on several threads of one sandbox; a thread that
finds no spare cold-starts. `close` discards the spare and refuses later ones.
"""

import threading
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar


class Spare(Protocol):
    """What the slot needs from a runner."""

    @property
    def fits(self) -> Hashable:
        """The key a request must match."""
        ...

    def alive(self) -> bool:
        """Whether it can still be used."""
        ...

    def discard(self) -> None:
        """End it and release what it holds (idempotent)."""
        ...


S = TypeVar("S", bound=Spare)


class SpareSlot(Generic[S]):
    """Holds at most one spare; every method is safe to call from any thread."""

    def __init__(self) -> None:
        """An empty, open slot."""
        self._lock = threading.Lock()
        self._spare: S | None = None
        self._closed = False

    def take(self, key: Hashable) -> S | None:
        """The spare if it fits `key` and is alive (the slot is then empty); else None, and an
        unfitting or dead spare is discarded."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare.fits == key and spare.alive():
            return spare
        spare.discard()
        return None

    def wants(self, key: Hashable) -> bool:
        """Whether a new spare for `key` would be kept (open, and no fitting spare held)."""
        with self._lock:
            return not self._closed and (self._spare is None or self._spare.fits != key)

    def offer(self, spare: S) -> None:
        """Keep `spare` for the next evaluation, or discard it (closed, or a spare of the same
        key is already held); a held spare of another key is discarded for it."""
        unwanted: S | None = spare
        with self._lock:
            if not self._closed and (self._spare is None or self._spare.fits != spare.fits):
                unwanted, self._spare = self._spare, spare
        if unwanted is not None:
            unwanted.discard()

    def close(self) -> None:
        """Discard the spare; later offers are discarded at once (idempotent)."""
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()

    def replace(self, spare: S) -> None:
        """Keep `spare` (a resident judge back from its request), discarding any held spare;
        `spare` itself is discarded when the slot is closed."""
        unwanted: S | None = spare
        with self._lock:
            if not self._closed:
                unwanted, self._spare = self._spare, spare
        if unwanted is not None:
            unwanted.discard()
