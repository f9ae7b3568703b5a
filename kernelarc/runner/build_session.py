"""Run a build command in a session of its own and kill every process it leaves behind.

Place in the flow: `cpp_build.run_build` runs its child (`_cpp_build_child.py`) through
`run_in_session`. Kept apart from the build rules in `cpp_build.py`: this is only process
handling. ninja puts each compiler in a process group of its own, so killing the child's group
is not enough: every live process of the session is found in /proc and killed, on timeout and
after a normal exit alike (a daemon started by a static constructor during the import check must
not outlive the build and change the shared object afterwards).
"""

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def run_in_session(argv: Sequence[str], log_path: Path, cwd: Path, timeout_s: float) -> int | None:
    """Run argv with stdout and stderr into log_path; its exit status, or None on timeout.

    Either way every process of its session is dead when this returns (or raises).
    """
    # Output goes to a file, not a pipe: a compiler left behind must not keep a pipe open.
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            proc.wait()
            return None
        except BaseException:
            kill_session(proc.pid)
            proc.wait()
            raise
    kill_session(proc.pid)
    return code


def session_members(sid: int) -> list[int]:
    """Pids of the live processes in session `sid` (Linux /proc)."""
    pids: list[int] = []
    try:
        entries = [e.name for e in Path("/proc").iterdir() if e.name.isdigit()]
    except OSError:
        return pids
    for entry in entries:
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp session ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def kill_session(sid: int) -> None:
    """SIGKILL the child's process group, then every process left in its session."""
    with contextlib.suppress(OSError):
        os.killpg(sid, signal.SIGKILL)
    for _ in range(50):
        members = [pid for pid in session_members(sid) if pid != os.getpid()]
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
