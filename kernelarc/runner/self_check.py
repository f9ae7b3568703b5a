"""The judge's check of its own identity and environment, before any candidate code exists.

Place in the flow: `python -m kernelarc.runner` runs `setup_problems()` at its start (a spare:
before its `go`). A runner whose user has no name, or whose HOME, TMPDIR or compile cache dirs
cannot be written, would make every candidate that compiles fail in ways that look like the
candidate's fault (Inductor's `getpass.getuser()` raised KeyError under a uid without a passwd
entry). Such a runner evaluates nothing: it writes RUNTIME_ERROR traces and a `setup_error` in
its signed result, which the host turns into a SandboxError (an infrastructure failure that the
guard retries, never a candidate's defeat). Only the standard library.
"""

import getpass
import os
import tempfile
from pathlib import Path

#: Variables naming dirs the runner and the candidates' compilers must be able to write.
WRITABLE_DIRS = (
    "HOME",
    "TMPDIR",
    "TRITON_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "CUDA_CACHE_PATH",
    "XDG_CACHE_HOME",
)


def _writable(path: str) -> str | None:
    """None if a file can be created in `path` (made if missing), else why not."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".kernelarc-probe-", dir=path)
        os.close(fd)
        Path(name).unlink()
    except OSError as exc:
        return f"{exc.strerror or exc} ({type(exc).__name__})"
    return None


def setup_problems() -> list[str]:
    """What is wrong with this process's identity and dirs (empty: nothing)."""
    problems = []
    try:
        getpass.getuser()
    except (KeyError, OSError, ImportError) as exc:
        problems.append(
            f"getpass.getuser() fails for uid {os.getuid()} ({exc!r}): the runner's user has "
            "no name (USER/LOGNAME unset and no passwd entry)"
        )
    for name in WRITABLE_DIRS:
        path = os.environ.get(name)
        if not path:
            continue
        why = _writable(path)
        if why is not None:
            problems.append(f"{name}={path} is not writable by uid {os.getuid()}: {why}")
    return problems
