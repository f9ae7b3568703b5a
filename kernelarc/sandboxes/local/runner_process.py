"""A local runner process from start to end: `LocalSandbox`'s `runner_lifecycle.Runner`.

A runner is started as `python -P -m kernelarc.runner --device DEVICE request.json result.json`
in its own temp dir and process group (`start`, called by `runner_start.py`); it imports torch
and waits. `go()` writes the request into its dir and the go line and result key on its stdin;
`finish()` waits for it against the wall-clock timeout, kills its whole group (and stops the
jail) and reads back the log tails. A cold evaluation calls the three in a row; a spare is
started ahead of its request and handed to the next evaluation that fits (`spare_slot.py`).
`discard()` ends a runner that is no longer wanted (closing its stdin is EOF before `go`, on
which a spare exits; the kill makes sure) and removes its temp dir. Command line, environment
and limits are the sandbox's choice.

A resident runner (`--resident`, `kernelarc/runner/resident.py`) lives on after a request: `go`
keeps its stdin open, `finish` returns once the judge marked the result `complete` (signed with
this request's key) while the process lives on, and `reusable` then says it may take the next
request of the same problem (`problem`), after `clear_for_next` emptied its dir. Anything else
(it exited, overran, or its dir cannot be emptied) ends it as a one-off runner ends.
"""

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.errors import SandboxError
from kernelarc.runner.go_line import go_line
from kernelarc.sandboxes.local.runner_identities import Lease
from kernelarc.sandboxes.resident_runner import empty_dir_but, file_stamp
from kernelarc.sandboxes.result_file import cap_tail, result_complete
from kernelarc.sandboxes.runner_lifecycle import RunEnd
from kernelarc.sandboxes.safe_files import write_below

logger = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024
#: What `clear_for_next` leaves in a resident runner's dir: the judge's reference and the logs.
KEPT_ENTRIES = frozenset({"ref", "stderr.log", "stdout.log"})
_POLL_MAX_S = 0.02
_GROUP_GONE_WAIT_S = 5.0
_JAIL_EXIT_WAIT_S = 10.0


@dataclass
class RunnerProcess:
    """A started runner (waiting for `go`, or running) and the temp dir it works in."""

    proc: "subprocess.Popen[bytes]"
    workdir: Path
    jailed: bool
    device: str
    timeout_s: float
    """The timeout its limits were computed for (RLIMIT_CPU depends on it)."""
    notes: list[str] = field(default_factory=list)
    """For EvalResult.sandbox_notes (isolation and jail notes of its command line)."""
    trace_notes: list[str] = field(default_factory=list)
    """The subset every trace's log must carry."""
    started: float = field(default_factory=time.monotonic)
    cache: Path | None = None
    """Its identity's compile cache dir (`runner_cache.py`), writable beside its temp dir."""
    lease: Lease | None = None
    """Its uid:gid in the jail (`runner_identities`), released by `discard` once it is dead."""
    resident: bool = False
    """Started with `--resident`: it serves request after request (module docstring)."""
    served: int = 0
    """Requests given to it so far."""
    problem: str | None = None
    """The problem it holds (`problem_key` of its first request); None before any."""
    reusable: bool = False
    """Its last request completed and it lives on, waiting for the next `go`."""
    _key: bytes = b""
    _log_offset: int = 0

    @property
    def fits(self) -> tuple[str, float]:
        """What a request must match to use this runner: (device, timeout_s)."""
        return self.device, self.timeout_s

    def alive(self) -> bool:
        """Whether the process (the jail or `unshare`, when there is one) still runs."""
        return self.proc.poll() is None

    @property
    def result_path(self) -> Path:
        """Its signed result file (in its temp dir)."""
        return self.workdir / "result.json"

    def go(self, request_json: str, result_key: bytes, timeout_s: float) -> None:
        """Write request.json into its dir, then `go` and the key line on its stdin (EOF after).
        No deadline goes with `go`: `finish` keeps the time (`timeout_s` is for Docker's).

        Raises:
            SandboxError: request.json cannot be written.
        """
        del timeout_s
        self._key, self.reusable = result_key, False
        self._log_offset = _size(self.workdir / "stderr.log")
        self.served += 1
        try:
            for name in ("request.json", "result.json", "result.json.tmp"):
                (self.workdir / name).unlink(missing_ok=True)  # the last request's (resident)
            # The dir belongs to the sandbox user; never follow a planted link.
            write_below(self.workdir, ["request.json"], request_json.encode("utf-8"))
        except OSError as exc:
            msg = f"cannot write the request into the sandbox dir {self.workdir}: {exc}"
            raise SandboxError(msg) from exc
        # A process of the same uid elsewhere (no PID namespace on CUDA) may have stopped it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGCONT)
        assert self.proc.stdin is not None
        try:  # two short lines: they fit the pipe buffer, so this never blocks
            self.proc.stdin.write(go_line() + result_key.hex().encode("ascii") + b"\n")
            if self.resident:
                self.proc.stdin.flush()
            else:
                self.proc.stdin.close()
        except OSError as exc:  # the runner died; its missing result says the rest
            logger.warning("cannot give the runner its go line and key: %s", exc)

    def finish(self, timeout_s: float) -> RunEnd:
        """Wait up to `timeout_s`, then kill whatever is left; how it ended. A resident runner
        whose result is complete is left alive (`reusable`)."""
        timed_out = False
        try:
            if self.resident:
                self.reusable = self._wait_complete(timeout_s)
            if not self.reusable:
                self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            logger.info(
                "sandbox timed out after %.1f s; killing group %d", timeout_s, self.proc.pid
            )
        finally:
            if not self.reusable:
                self._stop()
        log = read_tail(self.workdir / "stderr.log", TAIL_BYTES, start=self._log_offset)
        stdout_tail = read_tail(self.workdir / "stdout.log", TAIL_BYTES // 4)
        if stdout_tail.strip():
            log += "\n--- stdout ---\n" + stdout_tail
        code = 0 if self.reusable else self.proc.returncode
        return RunEnd(returncode=code, timed_out=timed_out, log_tail=cap_tail(log))

    def _wait_complete(self, timeout_s: float) -> bool:
        """Poll the result file until the judge marked it complete (True) or the process ended
        (False).

        Raises:
            subprocess.TimeoutExpired: `timeout_s` passed first.
        """
        deadline = time.monotonic() + timeout_s
        seen: tuple[int, int] | None = None
        delay = 0.002
        while True:
            stamp = file_stamp(self.result_path)
            if stamp is not None and stamp != seen:
                seen = stamp
                complete, retiring = result_complete(self.result_path, self._key)
                if complete:
                    return not retiring and self.proc.poll() is None
            if self.proc.poll() is not None:
                return False
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.proc.args, timeout_s)
            time.sleep(delay)
            delay = min(delay * 1.5, _POLL_MAX_S)

    def clear_for_next(self) -> bool:
        """Empty its dir for the next request but the judge's own entries (`KEPT_ENTRIES`);
        False when something stays (then it must not be reused)."""
        return empty_dir_but(self.workdir, KEPT_ENTRIES)

    def discard(self) -> None:
        """End it (if it has not ended), remove its temp dir, then release its identity (its
        processes are dead, so another runner may start under it); idempotent."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # EOF before `go`: a spare exits by itself
        if self.proc.returncode is None:
            self._stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.lease is not None:
            self.lease.release()

    def _stop(self) -> None:
        if self.jailed and self.proc.poll() is None:
            _stop_jail(self.proc)  # its supervisor kills what left the process group
        # Always: kills leftovers (background children) even after a normal exit.
        _kill_group(self.proc)


def start(
    command: list[str],
    *,
    workdir: Path,
    env: dict[str, str],
    preexec: Callable[[], None],
    jailed: bool,
    device: str,
    timeout_s: float,
    notes: list[str],
    trace_notes: list[str],
    lease: Lease | None = None,
) -> RunnerProcess:
    """Start the runner in `workdir` (its cwd), in a new session, stdout/stderr to log files.

    Raises:
        SandboxError: the process cannot be started.
    """
    out_path, err_path = workdir / "stdout.log", workdir / "stderr.log"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        try:
            proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            msg = f"cannot start the sandbox runner {command}: {exc}"
            raise SandboxError(msg) from exc
    return RunnerProcess(
        proc=proc,
        workdir=workdir,
        jailed=jailed,
        device=device,
        timeout_s=timeout_s,
        notes=notes,
        trace_notes=trace_notes,
        lease=lease,
    )


def read_tail(path: Path, limit: int, start: int = 0) -> str:
    """The last `limit` bytes after offset `start` of a file as text (with a note of what was
    cut); '' if unreadable."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            begin = max(start, size - limit)
            handle.seek(begin)
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return f"[... {begin - start} bytes cut ...]\n{text}" if begin > start else text


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL the runner's whole group, reap the runner, then wait (bounded) for the rest."""
    pgid = proc.pid  # start_new_session: the runner leads its own group
    deadline = time.monotonic() + _GROUP_GONE_WAIT_S
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            break
        except PermissionError:
            logger.warning("cannot signal process group %d", pgid)
            break
        # Reaping our own child first: a zombie still counts as a group member.
        if proc.poll() is None:
            proc.wait()
        if time.monotonic() > deadline:
            logger.warning("process group %d still has members after SIGKILL", pgid)
            break
        time.sleep(0.02)
    proc.wait()


def _stop_jail(proc: "subprocess.Popen[bytes]") -> None:
    """SIGTERM the jail (it kills its whole tree, setsid'd processes included) and wait a bit."""
    proc.terminate()
    try:
        proc.wait(timeout=_JAIL_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        logger.warning("the sandbox jail did not exit within %.0f s of SIGTERM", _JAIL_EXIT_WAIT_S)
