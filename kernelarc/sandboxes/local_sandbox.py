"""The local sandbox: the runner as a hardened subprocess of this host.

Per evaluate(): a private temp dir (the runner's cwd, HOME and TMPDIR, removed afterwards), a
new session/process group, a scrubbed environment, rlimits, a network namespace where `unshare`
works, stdout/stderr to files read back only by their tail, and a wall-clock timeout that kills
the whole group. A fresh random key goes to the runner on stdin; only a result file signed with
it is read (candidate code, which runs in the runner's worker processes, never sees the key).
Whatever happens to the candidate, the result has one trace per workload.

When the host runs as root and a mount namespace works, the runner also starts inside the jail
(`jail.py`): the whole filesystem read-only except the temp dir and the identity's compile
cache dir, a private /dev/shm, the runner as an unprivileged user (`user`, default nobody)
without capabilities, and a supervisor that kills every process the candidate leaves behind,
setsid'd daemons included. Every runner user is a complete account (USER/LOGNAME, and passwd
and group entries the jail adds where the host has none: `runner_accounts.py`), and each
identity keeps its compile caches for the candidates after it (`runner_cache.py`). A runner
that could not set itself up (`runner/self_check.py`, the jail's set-up) is a SandboxError.
Where the jail cannot be used (not root, no mount namespace, its probe fails) the sandbox says so
in `EvalResult.sandbox_notes` and runs as before.

With `warm_spare` (the default) the sandbox keeps one spare runner (`spare_slot.py`) that
imports torch in its own fresh temp dir and process, then waits for its request. The next
evaluation that fits it (same device and timeout) writes the request and the key into it and
starts the clock there, so the import is off the candidate's path; otherwise it starts a runner
itself, exactly as a spare but at once (a cold start). When the next spare starts
(`spare_start`): on `cuda` as soon as an evaluation has its runner, so that candidates arriving
back to back find it ready (one CPU core importing torch does not disturb GPU timing); on `cpu`
only when the evaluation has ended, so the import never competes with a candidate's CPU timing.
A spare that coexists with a candidate runs in the jail as the other of two users (`user`,
`spare_user`; `runner_identities.py`): a capability-less process of one uid can neither signal
nor ptrace the other's, nor enter its temp dir (0700). Without the jail, or with one user, the
spare waits for the end. Runners are forked from one long-lived thread (`spawn_thread.py`), so
their parent-death signal ties them to the host process, not to the thread of the evaluation
that started them. `close()` (or leaving a `with` block, or garbage collection of the sandbox)
ends the spare and removes its temp dir. `prepare()` starts the first spare before the first
evaluation (on cpu too: nothing of this sandbox is being timed yet).

Temp dirs are named for the host process (`owned_dirs.py`); creating a sandbox removes those
a host killed with SIGKILL left in the temp root (never a live host's).

With `build_cache` (a directory; campaigns use `~/.cache/kernelarc/builds`) C++ solutions
already built on this host are not compiled again, and a candidate's JIT-compiled kernels
(torch.compile, Triton) are kept for its later evaluations (`host_caches.py`; `build_cache.py`
and `jit_cache.py` have the checks and the threat model).
"""

import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Literal

from kernelarc.errors import SandboxError
from kernelarc.sandboxes import jail
from kernelarc.sandboxes.host_caches import HostCaches
from kernelarc.sandboxes.memory_need import machine_memory_bytes
from kernelarc.sandboxes.network import probe_isolation
from kernelarc.sandboxes.owned_dirs import make_owned_dir, sweep_stale
from kernelarc.sandboxes.process_limits import (
    GIB,
    ResourceLimits,
    limits_preexec,
    package_root,
    scrubbed_env,
)
from kernelarc.sandboxes.request_limits import memory_limits, runner_request
from kernelarc.sandboxes.result_file import (
    new_result_key,
    read_signed_result,
    setup_failure,
    traces_after_run,
)
from kernelarc.sandboxes.runner_accounts import host_account
from kernelarc.sandboxes.runner_cache import (
    CACHE_LIMIT_BYTES,
    IdentityCaches,
    per_candidate_env,
    trim,
)
from kernelarc.sandboxes.runner_identities import Identity, IdentityPool, Lease
from kernelarc.sandboxes.runner_process import RunnerProcess, start
from kernelarc.sandboxes.spare_slot import SpareSlot
from kernelarc.sandboxes.spawn_thread import call_in_spawn_thread, submit_to_spawn_thread
from kernelarc.schema import EvalRequest, EvalResult

logger = logging.getLogger(__name__)

_JAIL_PROBE_TIMEOUT_S = 30.0
#: uid:gid of `nobody` on Debian-like systems: the runner's user inside the jail by default.
NOBODY = (65534, 65534)
#: The second runner identity (`spare_user`): in Debian's reserved range 65000-65533 (policy
#: 9.2.2), which no package or account allocates; uids need no passwd entry.
SPARE_USER = (65533, 65533)
#: When the next spare starts: `auto` = at once on cuda, after the evaluation on cpu; `after` =
#: always after; `concurrent` = always at once (what tests and benchmarks use on a CPU host).
SpareStart = Literal["auto", "after", "concurrent"]
#: EvalResult.sandbox_notes of an evaluation that used the spare (tests and logs look for it).
WARM_SPARE_NOTE = "warm spare runner"


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
    """Runs `python -P -m kernelarc.runner` in a hardened subprocess per request.

    Use as a context manager (or call `close()`) when `warm_spare` is on: the spare runner
    lives until then (garbage collection and interpreter exit end it too).
    """

    def __init__(
        self,
        *,
        gpu: int = 0,
        memory_limit_gb: float | None = 16.0,
        max_memory_gb: float | None = None,
        network: bool = False,
        cache_dir: str | Path | None = None,
        cpu_time_limit_s: int | None = None,
        max_open_files: int | None = 4096,
        max_file_size_bytes: int | None = 256 * 1024**2,
        max_processes: int | None = 8192,
        python: str = sys.executable,
        extra_env: Mapping[str, str] | None = None,
        jail: bool = True,
        user: Identity = NOBODY,
        spare_user: Identity = SPARE_USER,
        pid_namespace: bool = True,
        warm_spare: bool = True,
        spare_start: SpareStart = "auto",
        cache_limit_bytes: int | None = CACHE_LIMIT_BYTES,
        build_cache: str | Path | None = None,
    ) -> None:
        """Options; the memory limits apply on CPU only (CUDA maps huge virtual ranges): each
        runner process may map `memory_limit_gb` plus the problem's data times the copies the
        protocol makes (`memory_need.py`), at most `max_memory_gb` (None: this machine's
        memory); a problem whose reference alone exceeds that is refused (SandboxError).
        `memory_limit_gb` None: no address-space limit at all.

        `cpu_time_limit_s` None means timeout x cores + 30 s. Each runner identity keeps its
        compile caches (Triton, Inductor, CUDA) in `<cache_dir>/<uid>-<gid>/`, its own, for the
        candidates that follow (`runner_cache.py`); `cache_dir` None: a dir of this sandbox's
        own, removed by `close()`; an identity's dir past `cache_limit_bytes` is emptied.
        With `build_cache` and no `cache_dir`, Triton and Inductor caches are kept per
        candidate instead (`jit_cache.py`), in the runner's own dir.
        `jail` runs the runner in `jail.py` where possible, as `user` or `spare_user` (uid,
        gid), alternating per runner. `pid_namespace` False skips the PID namespace on CPU too
        (CUDA never gets one): the set-up GPU hosts use, on any host.
        `warm_spare` keeps one pre-started runner for the next evaluation, started as
        `spare_start` says (module docstring). `build_cache` is the directory of the host's
        C++ build cache (None: every C++ solution is built in its runner).
        """
        if spare_start not in ("auto", "after", "concurrent"):
            msg = f"spare_start must be auto, after or concurrent (got {spare_start!r})"
            raise ValueError(msg)
        self.gpu = gpu
        self.memory_limit_gb = memory_limit_gb
        self.max_memory_gb = max_memory_gb
        self.network = network
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.cache_limit_bytes = cache_limit_bytes
        self.cpu_time_limit_s = cpu_time_limit_s
        self.max_open_files = max_open_files
        self.max_file_size_bytes = max_file_size_bytes
        self.max_processes = max_processes
        self.python = python
        self.extra_env = dict(extra_env or {})
        self.jail = jail
        self.user = user
        self.spare_user = spare_user
        self.pid_namespace = pid_namespace
        self.warm_spare = warm_spare
        self.spare_start = spare_start
        # A shared cache_dir is its own mode (candidates of an identity share their JIT caches
        # there): no JIT entries then. Otherwise Triton and Inductor write into the runner's own
        # dir (`runner_cache.per_candidate_env`), from where the host keeps them per candidate.
        self.caches = (
            HostCaches(build_cache, jit=self.cache_dir is None) if build_cache is not None else None
        )
        self._identities = IdentityPool(user, spare_user)
        self._spares: SpareSlot[RunnerProcess] = SpareSlot()
        self._preparing: Future[None] | None = None
        self._temp_root = Path(tempfile.gettempdir())
        sweep_stale(self._temp_root, ["eval", "cache"])  # what a host killed with SIGKILL left
        self._caches = IdentityCaches(self.cache_dir, self._temp_root, cache_limit_bytes)
        self._finalizer = weakref.finalize(self, _close_all, self._spares, self._caches)

    def __enter__(self) -> "LocalSandbox":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End the spare runner and remove its temp dir and the compile caches this sandbox
        made; later evaluations run cold."""
        self._finalizer()

    def prepare(self, device: str, timeout_s: float, problem_dir: str | None = None) -> None:
        """Start the spare for a first evaluation of `device` with `timeout_s` now, so that it
        is not cold; returns at once (the runner is forked on the spawn thread and imports
        torch on its own). Nothing without `warm_spare`, after `close()`, or when a spare of
        that key is already held. Also on `cpu`: no candidate of this sandbox runs yet.
        `problem_dir` is for DockerSandbox's container (a local runner reads it from its
        request)."""
        del problem_dir
        if not self.warm_spare or not self._finalizer.alive:
            return
        self._preparing = submit_to_spawn_thread(
            functools.partial(self._start_spare, device, timeout_s)
        )

    def _ceiling(self) -> tuple[int | None, str]:
        """The most a runner process may map, and what sets it."""
        if self.max_memory_gb is not None:
            return int(self.max_memory_gb * GIB), "the sandbox's max_memory_gb"
        return machine_memory_bytes(), "this machine's memory"

    def _address_space(self, request: EvalRequest) -> int | None:
        """The request's address-space limit (CPU, with a memory limit), see memory_need.py.

        Raises:
            SandboxError: the reference alone does not fit under the ceiling.
        """
        if request.device != "cpu" or self.memory_limit_gb is None:
            return None
        ceiling, name = self._ceiling()
        base = int(self.memory_limit_gb * GIB)
        if ceiling is not None:
            ceiling = max(ceiling, base)
        return memory_limits(request, base, ceiling, name).per_process_bytes

    def _limits(self, device: str, timeout_s: float) -> ResourceLimits:
        # A runner starts with the ceiling (a spare does not know its request yet) and lowers
        # it to its request's `address_space_bytes` before it starts any worker.
        address_space = None
        if device == "cpu" and self.memory_limit_gb is not None:
            ceiling, _ = self._ceiling()
            base = int(self.memory_limit_gb * GIB)
            address_space = max(ceiling, base) if ceiling is not None else None
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
        """Evaluate in a fresh runner process and temp dir (the spare when it fits); candidate
        failures become statuses, never exceptions.

        Raises:
            SandboxError: the runner cannot be started, or the problem's reference alone needs
                more memory than the sandbox may use (nothing runs then).
        """
        if not Path(self.python).is_file():
            msg = f"sandbox python {self.python!r} does not exist"
            raise SandboxError(msg)
        address_space = self._address_space(request)
        started = time.monotonic()
        runner, notes = self._take_runner(request.device, timeout_s, started)
        cached = self.caches.prepare(request, self.python) if self.caches else None
        if cached is not None:
            request = cached.request
            notes += cached.notes
        next_spare: Future[None] | None = None
        try:
            if cached is not None and self.caches is not None:
                owner = runner.lease.identity if runner.jailed and runner.lease else None
                notes += self.caches.stage_into(cached, runner.workdir, owner)
            if self.warm_spare and self._spare_at_once(request.device, runner):
                # Forked on the spawn thread meanwhile: the candidate's clock does not wait.
                next_spare = submit_to_spawn_thread(
                    functools.partial(self._start_spare, request.device, timeout_s)
                )
            key = new_result_key()
            runner.go(runner_request(request, timeout_s, address_space).model_dump_json(), key)
            run = runner.finish(timeout_s)
            signed = read_signed_result(runner.workdir / "result.json", key)
            report = signed.report
            if cached is not None and self.caches is not None:  # the runner is dead
                notes += self.caches.collect(cached, runner.workdir, report)
        finally:
            runner.discard()
            self._trim_cache(runner)
            if next_spare is not None:
                _wait_quietly(next_spare)
        setup = setup_failure(signed, run.returncode, jailed=runner.jailed)
        if setup is not None:
            if self.warm_spare:
                self._start_spare(request.device, timeout_s)
            msg = f"the sandbox runner could not set itself up: {setup}\n{run.log_tail[-2000:]}"
            raise SandboxError(msg)
        raw, problem = signed.traces, signed.problem
        traces = traces_after_run(
            request,
            raw,
            problem,
            timed_out=run.timed_out,
            exit_code=run.returncode,
            timeout_s=timeout_s,
            kill_note="the process group was killed",
            log_tail=run.log_tail,
            notes=runner.trace_notes,
            skipped=report.skipped,
        )
        wall_s = time.monotonic() - started
        if self.warm_spare:
            self._start_spare(request.device, timeout_s)  # none when the one above is held
        return EvalResult(
            traces=traces,
            stderr_tail=run.log_tail,
            wall_s=wall_s,
            sandbox="local",
            sandbox_notes=notes,
            build=report.build,
            stage_s=report.stage_s,
            jit_cache_hit=cached is not None and cached.jit_hit,
        )

    def _take_runner(
        self, device: str, timeout_s: float, started: float
    ) -> tuple[RunnerProcess, list[str]]:
        """The spare when it fits, else a runner started now; and the notes for
        EvalResult.sandbox_notes."""
        preparing = self._preparing
        if preparing is not None:  # a fork, and the cold start would queue behind it anyway
            _wait_quietly(preparing)
        runner = self._spares.take((device, timeout_s))
        if runner is None:
            runner = self._start_runner(device, timeout_s)
            return runner, list(runner.notes)
        ahead = max(0.0, started - runner.started)  # < 0: a prepare still forking
        return runner, [
            *runner.notes,
            f"{WARM_SPARE_NOTE} (started {ahead:.1f} s before the request)",
        ]

    def _spare_at_once(self, device: str, runner: RunnerProcess) -> bool:
        """Whether the next spare may start beside this runner's candidate: the rule says so
        for `device`, and the runner is jailed (only the jail's users keep the two apart)."""
        if self.spare_start == "after" or (self.spare_start == "auto" and device != "cuda"):
            return False
        return runner.jailed and len(self._identities.identities) == 2

    def _start_spare(self, device: str, timeout_s: float) -> None:
        """Start the next evaluation's runner now (its import overlaps the time until then),
        as an identity no live runner has; none when no identity is free."""
        if not self._spares.wants((device, timeout_s)):
            return
        lease = self._identities.lease(only_free=True)
        if lease is None:
            logger.debug("no free runner identity for a spare; the next evaluation starts cold")
            return
        try:
            spare = self._start_runner(device, timeout_s, lease)
        except SandboxError as exc:
            logger.warning("cannot start a spare runner (the next evaluation starts cold): %s", exc)
            return
        self._spares.offer(spare)

    def _start_runner(
        self, device: str, timeout_s: float, lease: Lease | None = None
    ) -> RunnerProcess:
        """A runner for `device` waiting for its request (forked from the spawn thread), as
        `lease`'s identity (None: whichever is free, or the less busy one)."""
        if lease is None:
            lease = self._identities.lease(only_free=False)
            assert lease is not None
        try:
            return call_in_spawn_thread(functools.partial(self._spawn, device, timeout_s, lease))
        except BaseException:
            lease.release()
            raise

    def _command(
        self, device: str, identity: Identity, notes: list[str], trace_notes: list[str]
    ) -> tuple[list[str], list[str], bool]:
        """(what goes before the runner's own command line, the runner's command line, whether
        it runs in the jail); the jail's part still lacks its `--rw` dirs and account lines."""
        runner = [self.python, "-P", "-m", "kernelarc.runner", "--device", device]
        runner += ["request.json", "result.json"]
        if self.network:
            notes.append("no jail: network access was asked for (no namespaces)")
            return [], runner, False
        isolation = probe_isolation(pid_namespace=device != "cuda" and self.pid_namespace)
        if isolation.note:
            notes.append(isolation.note)
            if not isolation.network_isolated:
                trace_notes.append(isolation.note)
        jailed = self._jail_prefix(
            isolation.prefix, isolation.mount_namespace, device, identity, notes
        )
        if jailed is None:
            return list(isolation.prefix), runner, False
        return jailed, runner, True

    def _jail_prefix(
        self,
        prefix: tuple[str, ...],
        mount_namespace: bool,
        device: str,
        identity: Identity,
        notes: list[str],
    ) -> list[str] | None:
        if not self.jail:
            return None
        if os.geteuid() != 0 or not mount_namespace:
            notes.append("no jail: needs root and a mount namespace (`unshare -m`)")
            return None
        uid, gid = identity
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

    def _hand_over(self, folder: Path, identity: Identity) -> None:
        """Give the jail's user a writable dir (the host, root, still deletes it)."""
        uid, gid = identity
        folder.mkdir(parents=True, exist_ok=True)
        try:
            if folder.stat().st_uid == uid:
                return
            os.chown(folder, uid, gid)
            for path in folder.rglob("*"):
                os.chown(path, uid, gid, follow_symlinks=False)
        except OSError as exc:
            msg = f"cannot give {folder} to the sandbox user {uid}:{gid}: {exc}"
            raise SandboxError(msg) from exc

    def _trim_cache(self, runner: RunnerProcess) -> None:
        """Empty the runner's identity cache if it grew too big, once no runner of that
        identity is alive (the one just discarded was its last)."""
        if runner.cache is None or runner.lease is None:
            return
        if self._identities.live(runner.lease.identity) == 0:
            trim(runner.cache, self.cache_limit_bytes)

    def _spawn(self, device: str, timeout_s: float, lease: Lease) -> RunnerProcess:
        """Temp dir, identity (cache, account), environment, command line (jail or not), then
        the process itself."""
        try:
            workdir = make_owned_dir("eval", self._temp_root)  # swept if this host is killed
        except OSError as exc:
            msg = f"cannot create the sandbox temp dir: {exc}"
            raise SandboxError(msg) from exc
        try:
            notes: list[str] = []
            trace_notes: list[str] = []
            prefix, runner_command, jailed = self._command(
                device, lease.identity, notes, trace_notes
            )
            # Unjailed, the runner is this process's user, whatever identity it leased.
            uid, gid = lease.identity if jailed else (os.geteuid(), os.getegid())
            cache = self._caches.folder(uid, gid)
            account = host_account(uid, gid, str(workdir))
            env = scrubbed_env(
                workdir=workdir,
                cache_dir=cache,
                device=device,
                gpu=self.gpu,
                account=account,
                extra=self.extra_env,
            )
            if self.caches is not None and self.caches.jit is not None:
                env.update(per_candidate_env(workdir))  # the candidate's own, staged per request
            command = [*prefix, *runner_command]
            if jailed:
                self._hand_over(workdir, lease.identity)  # mkdtemp: mode 0700
                jail_args = ["--rw", str(workdir), "--rw", str(cache)]
                jail_args += [f"--passwd-line={line}" for line in account.passwd_lines]
                jail_args += [f"--group-line={line}" for line in account.group_lines]
                command = [*prefix, *jail_args, "--", *runner_command]
            runner = start(
                command,
                workdir=workdir,
                env=env,
                preexec=limits_preexec(self._limits(device, timeout_s)),
                jailed=jailed,
                device=device,
                timeout_s=timeout_s,
                notes=notes,
                trace_notes=trace_notes,
                lease=lease,
            )
            runner.cache = cache
            return runner
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise


def _close_all(spares: SpareSlot[RunnerProcess], caches: IdentityCaches) -> None:
    """End the spare, then remove the caches this sandbox made (the finalizer's work)."""
    spares.close()
    caches.close()


def _wait_quietly(future: "Future[None]") -> None:
    """Wait for a spare's start (a fork: short); its failure only costs a later cold start."""
    try:
        future.result()
    except Exception:
        logger.exception("starting a spare runner failed")
