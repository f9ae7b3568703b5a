"""Namespaces for the local sandbox: which `unshare` wrapper works on this host.

Probed once per process and cached. Preferred is a new network, mount and PID namespace with
its own /proc (`unshare -n -m -p -f --kill-child --mount-proc`): killing the sandbox then also
ends processes that left the process group with setsid, the sandbox sees only its own processes
in /proc (not the host's, whose memory a same-uid process could otherwise open), and /proc/PID
means the sandbox's PID (the judge reads its workers' CPU time there). The mount namespace is
where `jail.py` makes the filesystem read-only (root hosts; see local/__init__.py).
Fallbacks: network and mount namespaces, a network namespace alone, then nothing (with a note).
CUDA evaluations skip the PID namespace: on the H200 host, cudaGetDeviceCount fails with
error 304 ("OS call failed") inside `unshare -p -f`, while `unshare -n` alone works.
"""

import functools
import logging
import shutil
import subprocess
from dataclasses import dataclass

logger = logging.getLogger(__name__)

_CANDIDATES = (
    ("-n", "-m", "-p", "-f", "--kill-child", "--mount-proc"),
    ("-n", "-m"),
    ("-n",),
)


@dataclass(frozen=True)
class Isolation:
    """A command prefix and, when isolation is missing or partial, a note saying so."""

    prefix: tuple[str, ...]
    note: str | None
    network_isolated: bool

    @property
    def mount_namespace(self) -> bool:
        """Whether the prefix makes a new mount namespace (where the jail can work)."""
        return "-m" in self.prefix


_NO_PID_ON_CUDA = "no PID namespace: CUDA does not initialise inside one (`unshare -p`)"


@functools.cache
def probe_isolation(pid_namespace: bool = True) -> Isolation:
    """The strongest working `unshare` prefix here (cached for the process).

    Args:
        pid_namespace: also try a new PID namespace (False for CUDA evaluations).
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), "no network isolation: `unshare` is not installed", False)
    for flags in _CANDIDATES if pid_namespace else _CANDIDATES[1:]:
        cmd = (unshare, *flags)
        try:
            done = subprocess.run([*cmd, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.info("isolation probe %s failed: %s", cmd, exc)
            continue
        if done.returncode == 0:
            if "-p" in flags:
                note = None
            elif pid_namespace:
                note = "no PID namespace: `unshare -p` is not permitted"
            else:
                note = _NO_PID_ON_CUDA
            return Isolation(cmd, note, True)
        logger.info("isolation probe %s: rc %s %s", cmd, done.returncode, done.stderr[-200:])
    return Isolation((), "no network isolation: `unshare -n` is not permitted here", False)
