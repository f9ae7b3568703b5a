"""The local sandbox: the runner as a hardened subprocess of this host.

Per evaluate(): a private temp dir (the runner's cwd, HOME and TMPDIR, removed afterwards), a
new session/process group, a scrubbed environment, rlimits, a network namespace where `unshare`
works, stdout/stderr to files read back only by their tail, and a wall-clock timeout that kills
the whole group. A fresh random key goes to the runner on stdin; only a result file signed with
it is read (candidate code, which runs in the runner's worker processes, never sees the key).
Whatever happens to the candidate, the result has one trace per workload.

When the host runs as root and a mount namespace works, the runner also starts inside the jail
(`jail.py`): the whole filesystem read-only except the temp dir (and the cache dir), a private
/dev/shm, the runner as an unprivileged user (`user`, default nobody) without capabilities, and
a supervisor that kills every process the candidate leaves behind, setsid'd daemons included.
Where the jail cannot be used (not root, no mount namespace, its probe fails) the sandbox says so
in `EvalResult.sandbox_notes` and runs as before.
"""

import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelarc.errors import SandboxError
from kernelarc.execution import jail
from kernelarc.execution.network import probe_isolation
from kernelarc.execution.process_limits import (
    GIB,
    ResourceLimits,
    limits_preexec,
    package_root,
    scrubbed_env,
)
from kernelarc.execution.result_file import (
    cap_tail,
    new_result_key,
    read_raw_traces,
    traces_after_run,
)
from kernelarc.schema import EvalRequest, EvalResult

logger = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024
_GROUP_GONE_WAIT_S = 5.0
_JAIL_EXIT_WAIT_S = 10.0
_JAIL_PROBE_TIMEOUT_S = 30.0
#: uid:gid of `nobody` on Debian-like systems: the runner's user inside the jail by default.
NOBODY = (65534, 65534)


@dataclass(frozen=True)
class _Run:
    returncode: int | None
    timed_out: bool
    log_tail: str


def _read_tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return f"[... {size - limit} bytes cut ...]\n{text}" if size > limit else text


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


def _give_key(proc: "subprocess.Popen[bytes]", key: bytes) -> None:
    """The result key as one hex line on the runner's stdin (fits the pipe buffer: no block)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(key.hex().encode("ascii") + b"\n")
        proc.stdin.close()
    except OSError as exc:  # the runner died at once; its missing result says the rest
        logger.warning("cannot give the runner its result key: %s", exc)


def _stop_jail(proc: "subprocess.Popen[bytes]") -> None:
    """SIGTERM the jail (it kills its whole tree, setsid'd processes included) and wait a bit."""
    proc.terminate()
    try:
        proc.wait(timeout=_JAIL_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        logger.warning("the sandbox jail did not exit within %.0f s of SIGTERM", _JAIL_EXIT_WAIT_S)


def _cuda_device_nodes() -> tuple[str, ...]:
    """The NVIDIA device nodes a CUDA runner opens (all GPUs: numbering differs from CUDA's)."""
    nodes = sorted(str(p) for p in Path("/dev").glob("nvidia*") if p.is_char_device())
    return tuple(n for n in nodes if not n.endswith(("-uvm-tools", "-modeset")))


@functools.cache
def _jail_failure(base: tuple[str, ...]) -> str | None:
    """Run the jail's probe once per set-up: None when it works, else why not."""
    probe_dir = Path(tempfile.mkdtemp(prefix="kernelarc_jail_probe_"))
    command = [*base, "--rw", str(probe_dir), "--probe"]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=_JAIL_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip()[-500:]
        return f"exit {done.returncode}: {tail}"
    return None


class LocalSandbox:
    """Runs `python -P -m kernelarc.runner` in a hardened subprocess per request."""

    def __init__(
        self,
        *,
        gpu: int = 0,
        memory_limit_gb: float | None = 16.0,
        network: bool = False,
        cache_dir: str | Path | None = None,
        cpu_time_limit_s: int | None = None,
        max_open_files: int | None = 4096,
        max_file_size_bytes: int | None = 256 * 1024**2,
        max_processes: int | None = 8192,
        python: str = sys.executable,
        extra_env: Mapping[str, str] | None = None,
        jail: bool = True,
        user: tuple[int, int] = NOBODY,
        pid_namespace: bool = True,
    ) -> None:
        """Options; `memory_limit_gb` applies on CPU only (CUDA maps huge virtual ranges).

        `cpu_time_limit_s` None means timeout x cores + 30 s; `cache_dir` None keeps the Triton
        and Inductor caches inside each evaluation's temp dir (no cross-candidate sharing).
        `jail` runs the runner in `jail.py` where possible, as `user` (uid, gid).
        `pid_namespace` False skips the PID namespace on CPU too (CUDA never gets one): the
        set-up GPU hosts use, on any host.
        """
        self.gpu = gpu
        self.memory_limit_gb = memory_limit_gb
        self.network = network
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.cpu_time_limit_s = cpu_time_limit_s
        self.max_open_files = max_open_files
        self.max_file_size_bytes = max_file_size_bytes
        self.max_processes = max_processes
        self.python = python
        self.extra_env = dict(extra_env or {})
        self.jail = jail
        self.user = user
        self.pid_namespace = pid_namespace

    def _limits(self, device: str, timeout_s: float) -> ResourceLimits:
        address_space = None
        if device == "cpu" and self.memory_limit_gb is not None:
            address_space = int(self.memory_limit_gb * GIB)
        cpu = self.cpu_time_limit_s
        if cpu is None:
            cpu = int(timeout_s * (os.cpu_count() or 1)) + 30
        return ResourceLimits(
            address_space_bytes=address_space,
            cpu_seconds=cpu,
            open_files=self.max_open_files,
            file_size_bytes=self.max_file_size_bytes,
            processes=self.max_processes,
        )

    def evaluate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Evaluate in a fresh temp dir; candidate failures become statuses, never exceptions."""
        if not Path(self.python).is_file():
            msg = f"sandbox python {self.python!r} does not exist"
            raise SandboxError(msg)
        started = time.monotonic()
        try:
            workdir = Path(tempfile.mkdtemp(prefix="kernelarc_eval_"))
        except OSError as exc:
            msg = f"cannot create the sandbox temp dir: {exc}"
            raise SandboxError(msg) from exc
        try:
            notes: list[str] = []  # for EvalResult.sandbox_notes
            trace_notes: list[str] = []  # the subset every trace's log must carry
            key = new_result_key()
            run = self._run(request, workdir, timeout_s, notes, trace_notes, key)
            raw, problem = read_raw_traces(workdir / "result.json", key)
            traces = traces_after_run(
                request,
                raw,
                problem,
                timed_out=run.timed_out,
                exit_code=run.returncode,
                timeout_s=timeout_s,
                kill_note="the process group was killed",
                log_tail=run.log_tail,
                notes=trace_notes,
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return EvalResult(
            traces=traces,
            stderr_tail=run.log_tail,
            wall_s=time.monotonic() - started,
            sandbox="local",
            sandbox_notes=notes,
        )

    def _command(
        self, device: str, writable: list[Path], notes: list[str], trace_notes: list[str]
    ) -> tuple[list[str], bool]:
        """The runner's command line, and whether it runs in the jail."""
        runner = [self.python, "-P", "-m", "kernelarc.runner", "request.json", "result.json"]
        if self.network:
            notes.append("no jail: network access was asked for (no namespaces)")
            return runner, False
        isolation = probe_isolation(pid_namespace=device != "cuda" and self.pid_namespace)
        if isolation.note:
            notes.append(isolation.note)
            if not isolation.network_isolated:
                trace_notes.append(isolation.note)
        jailed = self._jail_prefix(isolation.prefix, isolation.mount_namespace, device, notes)
        if jailed is None:
            return [*isolation.prefix, *runner], False
        for folder in writable:
            jailed += ["--rw", str(folder)]
        return [*jailed, "--", *runner], True

    def _jail_prefix(
        self, prefix: tuple[str, ...], mount_namespace: bool, device: str, notes: list[str]
    ) -> list[str] | None:
        if not self.jail:
            return None
        if os.geteuid() != 0 or not mount_namespace:
            notes.append("no jail: needs root and a mount namespace (`unshare -m`)")
            return None
        uid, gid = self.user
        needs = [self.python, str(package_root())]
        needs += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if Path(self.python).resolve() == Path(sys.executable).resolve():
            needs += [sys.prefix, sys.base_prefix]
        opens = _cuda_device_nodes() if device == "cuda" else ()
        base = [*prefix, self.python, "-I", "-S", jail.__file__, "--uid", str(uid), "--gid"]
        base.append(str(gid))
        for path in dict.fromkeys(needs):
            base += ["--needs", path]
        for node in opens:
            base += ["--open", node]
        failure = _jail_failure(tuple(base))
        if failure is not None:
            notes.append(f"no jail: its probe failed: {failure}")
            return None
        return base

    def _hand_over(self, writable: list[Path]) -> None:
        """Give the jail's user the writable dirs (the host, root, still deletes them)."""
        uid, gid = self.user
        for folder in writable:
            folder.mkdir(parents=True, exist_ok=True)
            try:
                if folder.stat().st_uid == uid:
                    continue
                os.chown(folder, uid, gid)
                for path in folder.rglob("*"):
                    os.chown(path, uid, gid, follow_symlinks=False)
            except OSError as exc:
                msg = f"cannot give {folder} to the sandbox user {uid}:{gid}: {exc}"
                raise SandboxError(msg) from exc

    def _run(
        self,
        request: EvalRequest,
        workdir: Path,
        timeout_s: float,
        notes: list[str],
        trace_notes: list[str],
        key: bytes,
    ) -> _Run:
        (workdir / "request.json").write_text(request.model_dump_json(), encoding="utf-8")
        cache = self.cache_dir if self.cache_dir is not None else workdir / "cache"
        env = scrubbed_env(
            workdir=workdir,
            cache_dir=cache,
            device=request.device,
            gpu=self.gpu,
            extra=self.extra_env,
        )
        writable = [workdir]
        if not cache.resolve().is_relative_to(workdir.resolve()):
            writable.append(cache)
        command, jailed = self._command(request.device, writable, notes, trace_notes)
        if jailed:
            self._hand_over(writable)
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
                    preexec_fn=limits_preexec(self._limits(request.device, timeout_s)),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                msg = f"cannot start the sandbox runner {command}: {exc}"
                raise SandboxError(msg) from exc
            _give_key(proc, key)
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                logger.info("sandbox timed out after %.1f s; killing group %d", timeout_s, proc.pid)
            finally:
                if jailed and proc.poll() is None:
                    _stop_jail(proc)  # its supervisor kills what left the process group
                # Always: kills leftovers (background children) even after a normal exit.
                _kill_group(proc)
        log = _read_tail(err_path, TAIL_BYTES)
        stdout_tail = _read_tail(out_path, TAIL_BYTES // 4)
        if stdout_tail.strip():
            log += "\n--- stdout ---\n" + stdout_tail
        return _Run(returncode=proc.returncode, timed_out=timed_out, log_tail=cap_tail(log))
