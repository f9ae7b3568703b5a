"""Network isolation for the local sandbox: which `unshare` wrapper works on this host.

Probed once per process and cached. Preferred is a new network and PID namespace
(`unshare -n -p -f --kill-child`): killing the sandbox then also ends processes that left the
process group with setsid. Fallback is a network namespace alone, then nothing (with a note).
"""

import functools
import logging
import shutil
import subprocess
from dataclasses import dataclass

logger = logging.getLogger(__name__)

_CANDIDATES = (
    ("-n", "-p", "-f", "--kill-child"),
    ("-n",),
)


@dataclass(frozen=True)
class Isolation:
    """A command prefix and, when isolation is missing or partial, a note saying so."""

    prefix: tuple[str, ...]
    note: str | None
    network_isolated: bool


@functools.cache
def probe_isolation() -> Isolation:
    """The strongest working `unshare` prefix here (cached for the process)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), "no network isolation: `unshare` is not installed", False)
    for flags in _CANDIDATES:
        cmd = (unshare, *flags)
        try:
            done = subprocess.run([*cmd, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.info("isolation probe %s failed: %s", cmd, exc)
            continue
        if done.returncode == 0:
            note = None if "-p" in flags else "no PID namespace: `unshare -p` is not permitted"
            return Isolation(cmd, note, True)
        logger.info("isolation probe %s: rc %s %s", cmd, done.returncode, done.stderr[-200:])
    return Isolation((), "no network isolation: `unshare -n` is not permitted here", False)
