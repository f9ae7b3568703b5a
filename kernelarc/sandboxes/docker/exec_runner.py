"""A runner exec'd in a pool container: the Docker sandbox's `runner_lifecycle.Runner`.

Place in the flow: `DockerSandbox` execs every runner, spare or cold, as
`python -P -m kernelarc.runner --device D request.json result.json` with stdin attached, in a
fresh eval dir of its own (`make_eval_dir`: under the slot's pool dir, mounted at /work/eval,
mode 0700 and owned by the runner's uid where the host can chown) and with the environment of
`exec_env`. It imports torch and waits. `go` writes request.json on the host side of the mount,
then sends `go <timeout>` and the result key: the runner SIGKILLs its own process group at that
deadline (a spare that waits an unknown time before `go` cannot run under `timeout -s KILL`),
and `finish` still gives up HOST_GRACE_S later (the sandbox then replaces the container).
`alive` asks the engine and peeks at the output stream; `discard` closes the connection (EOF:
a spare exits) and removes the eval dir.

With `resident_requests` the runner is a resident judge (`kernelarc/runner/resident.py`): `go`
removes the last request's files first, `finish` returns as soon as the result file says the
request is complete (signed with this request's key) while the exec runs on (`reusable`), the
log is what the stream carried since this `go`, and `clear_for_next` empties the eval dir but
the judge's `ref/` for the next request of its problem (`problem`).
"""

import contextlib
import logging
import os
import select
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelarc.errors import SandboxError
from kernelarc.runner.go_line import go_line
from kernelarc.sandboxes.docker.accounts import CACHE_DIR, make_cache_dir, numeric
from kernelarc.sandboxes.docker.attach_stream import AttachStream, drain, pump_until
from kernelarc.sandboxes.docker.engine import DOCKER_ERRORS, EVAL_MOUNT
from kernelarc.sandboxes.resident_runner import empty_dir_but, file_stamp
from kernelarc.sandboxes.result_file import result_complete
from kernelarc.sandboxes.runner_accounts import Account, account_env
from kernelarc.sandboxes.runner_cache import cache_env
from kernelarc.sandboxes.runner_lifecycle import RunEnd
from kernelarc.sandboxes.safe_files import write_below

logger = logging.getLogger(__name__)

#: Extra seconds the host waits past the runner's own deadline before it kills the container.
HOST_GRACE_S = 15.0
#: How often a resident runner's result file is looked at while its output is pumped.
_POLL_S = 0.02


@dataclass
class ExecRunner:
    """A runner exec'd in a pool container, waiting for `go` (or running), stdin attached."""

    api: Any
    """docker-py's low-level client (exec_inspect)."""
    exec_id: str
    raw: Any
    """docker-py's hijacked connection (close it: the runner reads EOF, a spare exits)."""
    conn: socket.socket
    workdir: Path
    """Its eval dir on the host side of the mount (under the slot's pool dir)."""
    device: str
    user: str
    """The uid:gid it runs as."""
    started: float = field(default_factory=time.monotonic)
    notes: list[str] = field(default_factory=list)
    """None of its own: the container's isolation is the same for every runner."""
    trace_notes: list[str] = field(default_factory=list)
    jailed: bool = False
    """Never the local jail: its exit codes mean nothing special."""
    resident: bool = False
    """Exec'd with `--resident`: it may serve request after request."""
    served: int = 0
    problem: str | None = None
    """The problem it holds (`problem_key` of its first request)."""
    reusable: bool = False
    """Its last request completed and it runs on, waiting for the next `go`."""
    _go_at: float | None = None
    _key: bytes = b""
    _stream: AttachStream = field(default_factory=AttachStream)

    @property
    def fits(self) -> str:
        """A spare fits any timeout of its device: the deadline comes with `go`."""
        return self.device

    @property
    def result_path(self) -> Path:
        """Its signed result file, read on the host side of the mount."""
        return self.workdir / "result.json"

    def alive(self) -> bool:
        """Whether the engine says the exec runs, or has not yet started it (no exit code: an
        exec asked for a moment ago on a loaded host), and its output stream has not ended
        (which the engine's state can lag behind). Taking a just-exec'd spare as ended made the
        next candidate start cold (a flaky docker test saw "the spare runner had ended")."""
        try:
            state = self.api.exec_inspect(self.exec_id)
        except DOCKER_ERRORS as exc:
            logger.warning("cannot inspect the spare runner %s: %s", self.exec_id[:12], exc)
            return False
        if not state.get("Running") and state.get("ExitCode") is not None:
            return False
        try:
            readable, _, _ = select.select([self.conn], [], [], 0)
            return not readable or self.conn.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):
            return False

    def go(self, request_json: str, key: bytes, timeout_s: float) -> None:
        """Write request.json into its eval dir, then send `go <timeout>` and the key.

        Raises:
            SandboxError: request.json cannot be written.
        """
        self._key, self.reusable = key, False
        self.served += 1
        self._stream.stdout.clear()  # this request's log only (a frame in flight stays whole)
        self._stream.stderr.clear()
        try:
            for name in ("request.json", "result.json", "result.json.tmp"):
                (self.workdir / name).unlink(missing_ok=True)  # the last request's (resident)
            # The dir is the container user's; never follow a planted link.
            write_below(self.workdir, ["request.json"], request_json.encode("utf-8"))
        except OSError as exc:
            msg = f"cannot write the request into the sandbox eval dir {self.workdir}: {exc}"
            raise SandboxError(msg) from exc
        self._go_at = time.monotonic()
        try:
            self.conn.sendall(go_line(timeout_s) + key.hex().encode("ascii") + b"\n")
        except OSError as exc:  # the runner died at once; its missing result says the rest
            logger.warning("cannot give the runner its go line and key: %s", exc)

    def finish(self, timeout_s: float) -> RunEnd:
        """Read the runner's output until it ends, or HOST_GRACE_S past its own deadline; a
        resident runner's until its result is complete (then it runs on: `reusable`)."""
        started = self._go_at if self._go_at is not None else time.monotonic()
        final = started + timeout_s + HOST_GRACE_S
        stream = self._stream
        if self.resident:
            ended = self._pump_until_complete(final)
            if self.reusable:
                return RunEnd(returncode=0, timed_out=False, log_tail=stream.log())
        else:
            ended = pump_until(self.conn, stream, final)
        exit_code = exec_exit_code(self.api, self.exec_id) if ended else None
        elapsed = time.monotonic() - started
        timed_out = not ended or (exit_code in (124, 137) and elapsed >= timeout_s)
        return RunEnd(returncode=exit_code, timed_out=timed_out, log_tail=stream.log())

    def _pump_until_complete(self, final: float) -> bool:
        """Pump the output, looking at the result file between reads, until the request is
        complete and the judge runs on (`reusable`, False returned), the exec ended (True) or
        `final` passed (False)."""
        seen: tuple[int, int] | None = None
        while True:
            if pump_until(self.conn, self._stream, min(time.monotonic() + _POLL_S, final)):
                return True
            stamp = file_stamp(self.result_path)
            if stamp is not None and stamp != seen:
                seen = stamp
                complete, retiring = result_complete(self.result_path, self._key)
                if complete and not retiring:
                    # What it wrote before the result: this request's last log lines.
                    if drain(self.conn, self._stream):
                        return True
                    self.reusable = True
                    return False
            if time.monotonic() >= final:
                return False

    def clear_for_next(self) -> bool:
        """Empty the eval dir but the judge's `ref/`; False when something stays."""
        return empty_dir_but(self.workdir, frozenset({"ref"}))

    def close(self) -> None:
        """Close its stdin/output connection (its eval dir stays)."""
        with contextlib.suppress(OSError):
            self.raw.close()

    def discard(self) -> None:
        """Close its connection and remove its eval dir (idempotent)."""
        self.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def exec_runner(
    api: Any,
    container: Any,
    pool_dir: Path,
    device: str,
    user: str,
    python: str,
    *,
    account: Account | None,
    extra_env: dict[str, str],
    resident_requests: int = 0,
) -> ExecRunner:
    """Exec a runner as `user` in a fresh eval dir (its own) under `pool_dir`, the container's
    EVAL_MOUNT; it imports torch, then waits for `go` on the attached stdin.

    Raises:
        SandboxError: its eval dir or its user's cache dir cannot be made.
        docker.errors.DockerException, OSError: the exec failed (its eval dir is removed).
    """
    name = uuid.uuid4().hex
    make_eval_dir(pool_dir / name, user)
    make_cache_dir(pool_dir, user)
    workdir = f"{EVAL_MOUNT}/{name}"
    command = [python, "-P", "-m", "kernelarc.runner", "--device", device]
    if resident_requests > 0:
        command += ["--resident", str(resident_requests)]
    command += ["request.json", "result.json"]
    env = exec_env(workdir, device, user, account, extra_env)
    try:
        exec_id = api.exec_create(
            container.id, command, stdin=True, user=user, workdir=workdir, environment=env
        )["Id"]
        raw = api.exec_start(exec_id, socket=True)
    except DOCKER_ERRORS:
        shutil.rmtree(pool_dir / name, ignore_errors=True)
        raise
    runner = ExecRunner(
        api, exec_id, raw, getattr(raw, "_sock", raw), pool_dir / name, device, user
    )
    runner.resident = resident_requests > 0
    return runner


def exec_exit_code(api: Any, exec_id: str) -> int | None:
    """The exec's exit code, waiting up to 5 s for the engine to see it end; None when the
    engine cannot say."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            info = api.exec_inspect(exec_id)
        except DOCKER_ERRORS as exc:
            logger.warning("cannot inspect exec %s: %s", exec_id[:12], exc)
            return None
        if not info.get("Running") or time.monotonic() > deadline:
            code = info.get("ExitCode")
            return int(code) if code is not None else None
        time.sleep(0.02)


def make_eval_dir(workdir: Path, user: str) -> None:
    """A runner's eval dir, mode 0700, owned by its uid where the host can chown (root);
    world-writable for a named or foreign container user a non-root host cannot chown to.

    Raises:
        SandboxError: the dir cannot be made or given away.
    """
    try:
        workdir.mkdir(mode=0o700)
        uid, _, gid = user.partition(":")
        if os.getuid() == 0 and uid.isdigit():
            os.chown(workdir, int(uid), int(gid) if gid.isdigit() else -1)
        elif uid != str(os.getuid()):
            workdir.chmod(0o777)  # a named/foreign container user must still write here
    except OSError as exc:
        msg = f"cannot prepare the sandbox eval dir {workdir}: {exc}"
        raise SandboxError(msg) from exc


def exec_env(
    workdir: str,
    device: str,
    user: str,
    account: Account | None,
    extra_env: dict[str, str],
) -> dict[str, str]:
    """The runner's environment: its dirs, its account's name, its identity's caches."""
    ids = numeric(user)
    cache = f"{workdir}/cache"
    if ids is not None:
        cache = f"{EVAL_MOUNT}/{CACHE_DIR}/{ids[0]}-{ids[1]}"
    env = {
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        **cache_env(cache),
    }
    if account is not None:
        env.update(account_env(account))
    elif ids is None:  # a name: the image has its entry (docker resolved it there)
        name = user.partition(":")[0]
        env.update(USER=name, LOGNAME=name)
    if device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the cuda slot's one GPU is its device 0
    env.update(extra_env)
    return env
