"""The two uid:gid identities a jailed LocalSandbox's runners alternate between.

A spare runner may be started while the previous candidate still runs (on CUDA, where there is
no PID namespace, `local/__init__.py`). What keeps that candidate away from the spare is that they
run as different users: the jail drops every capability, so a process of one uid cannot signal
or ptrace a process of another, nor enter its private temp dir (owned by its uid, mode 0700).
So every runner holds a lease on one identity from its start until it was killed and its dir
removed, and a spare is only started under an identity no live runner of the sandbox holds.
With one identity (both the same), a spare can only be started when no runner is alive.

Leases hand out the free identity that was not handed out last, so consecutive runners
alternate. A cold start takes an identity even when both are held (evaluations on several
threads of one sandbox), preferring the one with fewer live runners.
"""

import threading
from dataclasses import dataclass, field

#: uid, gid
Identity = tuple[int, int]


@dataclass
class Lease:
    """One runner's claim on an identity; `release` (idempotent) when its processes are gone."""

    identity: Identity
    _pool: "IdentityPool" = field(repr=False)
    _released: bool = False

    def release(self) -> None:
        """Give the identity back (call only once the runner's processes are all dead)."""
        self._pool._release(self)


class IdentityPool:
    """Counts live runners per identity; thread-safe."""

    def __init__(self, first: Identity, second: Identity) -> None:
        """Two identities (the same one twice: a pool of one)."""
        self._lock = threading.Lock()
        self._live: dict[Identity, int] = dict.fromkeys((first, second), 0)
        self._last: Identity | None = None

    @property
    def identities(self) -> tuple[Identity, ...]:
        """The distinct identities, in the order given."""
        return tuple(self._live)

    def live(self, identity: Identity) -> int:
        """How many live runners hold `identity`."""
        with self._lock:
            return self._live.get(identity, 0)

    def lease(self, *, only_free: bool) -> Lease | None:
        """An identity held by no live runner, not the last one handed out if both are free;
        with both held: None if `only_free`, else the one with fewer live runners."""
        with self._lock:
            free = [i for i, count in self._live.items() if count == 0]
            if free:
                fresh = [i for i in free if i != self._last]
                chosen = (fresh or free)[0]
            elif only_free:
                return None
            else:
                chosen = min(self._live, key=lambda i: self._live[i])
            self._live[chosen] += 1
            self._last = chosen
            return Lease(chosen, self)

    def _release(self, lease: Lease) -> None:
        with self._lock:
            if not lease._released:
                lease._released = True
                self._live[lease.identity] -= 1
