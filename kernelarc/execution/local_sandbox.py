"""The local sandbox: the runner as a hardened subprocess of this host.

Per evaluate(): a private temp dir (the runner's cwd, HOME and TMPDIR, removed afterwards), a
new session/process group, a scrubbed environment, rlimits, a network namespace where `unshare`
works, stdout/stderr to files read back only by their tail, and a wall-clock timeout that kills
the whole group. A fresh random key goes to the runner on stdin; only a result file signed with
it is read (candidate code, which runs in the runner's worker processes, never sees the key).
Whatever happens to the candidate, the result has one trace per workload.
"""

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
from kernelarc.execution.network import probe_isolation
from kernelarc.execution.process_limits import (
    GIB,
    ResourceLimits,
    limits_preexec,
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
    ) -> None:
        """Options; `memory_limit_gb` applies on CPU only (CUDA maps huge virtual ranges).

        `cpu_time_limit_s` None means timeout x cores + 30 s; `cache_dir` None keeps the Triton
        and Inductor caches inside each evaluation's temp dir (no cross-candidate sharing).
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

    def _command(self, device: str, notes: list[str], trace_notes: list[str]) -> list[str]:
        prefix: tuple[str, ...] = ()
        if not self.network:
            isolation = probe_isolation(pid_namespace=device != "cuda")
            prefix = isolation.prefix
            if isolation.note:
                notes.append(isolation.note)
                if not isolation.network_isolated:
                    trace_notes.append(isolation.note)
        return [*prefix, self.python, "-P", "-m", "kernelarc.runner", "request.json", "result.json"]

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
        command = self._command(request.device, notes, trace_notes)
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
                # Always: kills leftovers (background children) even after a normal exit.
                _kill_group(proc)
        log = _read_tail(err_path, TAIL_BYTES)
        stdout_tail = _read_tail(out_path, TAIL_BYTES // 4)
        if stdout_tail.strip():
            log += "\n--- stdout ---\n" + stdout_tail
        return _Run(returncode=proc.returncode, timed_out=timed_out, log_tail=cap_tail(log))
