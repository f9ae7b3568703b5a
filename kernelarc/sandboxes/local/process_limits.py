"""What the sandboxed runner process inherits: a scrubbed environment and resource limits.

The environment is an allowlist (nothing from the host leaks in, secrets in particular); the
limits are applied in the child between fork and exec. RLIMIT_NPROC counts every process of the
uid, not just the sandbox's, so its default is generous; it is a fork-bomb brake, not a quota.
"""

import ctypes
import os
import re
import resource
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import kernelarc
from kernelarc.sandboxes.runner_accounts import Account, account_env
from kernelarc.sandboxes.runner_cache import cache_env

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_PASSED_THROUGH = ("PATH", "LANG", "LD_LIBRARY_PATH", "CUDA_HOME")

GIB = 1024**3
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ResourceLimits:
    """Soft=hard limits for the runner; None leaves a limit as inherited."""

    address_space_bytes: int | None = 16 * GIB
    cpu_seconds: int | None = None
    open_files: int | None = 4096
    file_size_bytes: int | None = 256 * 1024**2
    processes: int | None = 8192
    core_bytes: int | None = 0

    def table(self) -> list[tuple[int, int]]:
        """(resource, value) pairs, each clamped to the current hard limit so setrlimit works."""
        wanted = [
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_CORE, self.core_bytes),
        ]
        table: list[tuple[int, int]] = []
        for which, value in wanted:
            if value is None:
                continue
            _, hard = resource.getrlimit(which)
            table.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return table


def limits_preexec(limits: ResourceLimits) -> Callable[[], None]:
    """A preexec_fn that applies the limits; values are computed here, in the parent.

    The child side only calls setrlimit (no allocation-heavy work, no locks), which keeps the
    fork-without-exec window safe even when the host is multi-threaded.
    """
    table = limits.table()
    die_with_parent = _parent_death_signal()

    def apply() -> None:
        for which, value in table:
            resource.setrlimit(which, (value, value))
        die_with_parent()

    return apply


def _parent_death_signal() -> Callable[[], None]:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) for the child: a runner whose host process dies (a Ray
    actor killed mid-evaluation, a campaign SIGKILLed) dies too, instead of running on and
    holding its GPU while a replacement starts the next evaluation there. Linux only; the
    signal follows the forking *thread*: the local sandbox forks every runner from one
    long-lived thread (`spawn_thread.py`), so a spare outlives the call that started it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return lambda: None
    kill = int(signal.SIGKILL)

    def apply() -> None:
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)

    return apply


def package_root() -> Path:
    """The directory holding the `kernelarc` package (goes on the runner's PYTHONPATH)."""
    return Path(kernelarc.__file__).resolve().parent.parent


def _python_path() -> str:
    # Our package first, then the host's own PYTHONPATH: the runner must import the same
    # kernelarc and the same dependencies (pydantic, torch) the host does, installed or not.
    parts = [str(package_root())]
    parts += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def scrubbed_env(
    *,
    workdir: Path,
    cache_dir: Path,
    device: str,
    gpu: int,
    account: Account | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The runner's whole environment: an allowlist plus sandbox-specific values. `cache_dir`
    holds the compile caches (`runner_cache.cache_env`); `account` names the runner's user
    (USER, LOGNAME: what `getpass.getuser()` reads before the passwd database)."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        {
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "PYTHONPATH": _python_path(),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            # A CPU evaluation sees no GPU at all; a CUDA one sees only its pinned GPU.
            "CUDA_VISIBLE_DEVICES": str(gpu) if device == "cuda" else "",
            **cache_env(cache_dir),
            **(account_env(account) if account is not None else {}),
        }
    )
    for name, value in (extra or {}).items():
        if not _SECRET_NAME.search(name):
            env[name] = value
    return {k: v for k, v in env.items() if not _SECRET_NAME.search(k)}
