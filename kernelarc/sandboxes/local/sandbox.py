"""`LocalSandbox`: the local sandbox's options, its spare slot, and its side of the lifecycle.

Place in the flow: `make_sandbox("local", ...)` builds one; `evaluate` checks the request's
memory fit (`memory_need.py`: the address-space limit on CPU, or a SandboxError when the
reference alone does not fit) and runs it through the shared lifecycle (`runner_lifecycle.py`)
with `_Evaluation`, its `RunnerHost`: spares kept in a `SpareSlot`, runners forked from the
spawn thread as the identity they leased (`runner_start.py`), the host's build and JIT caches
staged before `go` and collected after the run (`host_caches.py`), a runner's identity cache
trimmed once its last runner is gone (`runner_cache.py`). What the package does as a whole,
and the spare rule, is in `local/__init__.py`.
"""

import functools
import logging
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

from kernelarc.errors import SandboxError
from kernelarc.problem_key import problem_key
from kernelarc.sandboxes.host_caches import HostCaches, Prepared
from kernelarc.sandboxes.local.runner_identities import Identity, IdentityPool, Lease
from kernelarc.sandboxes.local.runner_limits import LimitSettings
from kernelarc.sandboxes.local.runner_process import RunnerProcess
from kernelarc.sandboxes.local.runner_start import RunnerStart
from kernelarc.sandboxes.local.spawn_thread import call_in_spawn_thread, submit_to_spawn_thread
from kernelarc.sandboxes.owned_dirs import sweep_stale
from kernelarc.sandboxes.request_limits import runner_request
from kernelarc.sandboxes.resident_runner import (
    DEFAULT_RESIDENT_REQUESTS,
    RESIDENT_NOTE,
)
from kernelarc.sandboxes.result_file import SignedResult
from kernelarc.sandboxes.runner_cache import CACHE_LIMIT_BYTES, IdentityCaches, trim
from kernelarc.sandboxes.runner_lifecycle import (
    RunEnd,
    SpareStart,
    check_spare_start,
    run_evaluation,
    spare_rule_allows_beside,
)
from kernelarc.sandboxes.spare_slot import SpareSlot
from kernelarc.schema import EvalRequest, EvalResult, Trace

logger = logging.getLogger(__name__)

#: uid:gid of `nobody` on Debian-like systems: the runner's user inside the jail by default.
NOBODY = (65534, 65534)
#: The second runner identity (`spare_user`): in Debian's reserved range 65000-65533 (policy
#: 9.2.2), which no package or account allocates; uids need no passwd entry.
SPARE_USER = (65533, 65533)


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
        resident_requests: int = DEFAULT_RESIDENT_REQUESTS,
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
        `spare_start` says (`local/__init__.py`). `build_cache` is the directory of the host's
        C++ build cache (None: every C++ solution is built in its runner).
        `resident_requests` > 0 (with `warm_spare`): each runner is a resident judge that
        judges up to that many requests of one problem, keeping the problem's inputs,
        reference outputs and reference latency between them (`kernelarc/runner/resident.py`);
        0: a fresh runner per request.
        """
        check_spare_start(spare_start)
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
        self._limit_settings = LimitSettings(
            memory_limit_gb,
            max_memory_gb,
            cpu_time_limit_s,
            max_open_files,
            max_file_size_bytes,
            max_processes,
        )
        self.python = python
        self.extra_env = dict(extra_env or {})
        self.jail = jail
        self.user = user
        self.spare_user = spare_user
        self.pid_namespace = pid_namespace
        self.warm_spare = warm_spare
        self.spare_start = spare_start
        self.resident_requests = resident_requests if warm_spare else 0
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
        self._start = RunnerStart(
            python=python,
            gpu=gpu,
            network=network,
            jail=jail,
            pid_namespace=pid_namespace,
            extra_env=self.extra_env,
            per_candidate_jit=self.caches is not None and self.caches.jit is not None,
            identity_caches=self._caches,
            temp_root=self._temp_root,
            resident_requests=self.resident_requests,
        )
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

    def evaluate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Evaluate in the resident judge of the request's problem, else the spare when it
        fits, else a runner started now; candidate failures become statuses, never exceptions.

        Raises:
            SandboxError: the runner cannot be started, or the problem's reference alone needs
                more memory than the sandbox may use (nothing runs then).
        """
        if not Path(self.python).is_file():
            msg = f"sandbox python {self.python!r} does not exist"
            raise SandboxError(msg)
        address_space = self._limit_settings.address_space(request)
        started = time.monotonic()
        side = _Evaluation(self, address_space, problem_key(request))
        notes: list[str] = []
        done = run_evaluation(side, request, timeout_s=timeout_s, started=started, notes=notes)
        report = done.signed.report
        if report.resident:
            notes.append(f"{RESIDENT_NOTE} (request {int(report.resident.get('request', 0))})")
        return EvalResult(
            traces=done.traces,
            stderr_tail=done.run.log_tail,
            wall_s=done.wall_s,
            sandbox="local",
            sandbox_notes=notes,
            build=report.build,
            stage_s=report.stage_s,
            jit_cache_hit=side.cached is not None and side.cached.jit_hit,
            judge_cache=report.cache,
            resident_request=int(report.resident.get("request", 0)),
        )

    def _take_spare(self, device: str, timeout_s: float, problem: str) -> RunnerProcess | None:
        """The spare when it fits (once `prepare`'s start, if any, is done), else None; a
        resident judge only for the problem it holds."""
        preparing = self._preparing
        if preparing is not None:  # a fork, and the cold start would queue behind it anyway
            _wait_quietly(preparing)
        spare = self._spares.take((device, timeout_s))
        if spare is not None and spare.problem not in (None, problem):
            spare.discard()
            self._trim_cache(spare)
            return None
        return spare

    def _keep_resident(self, runner: RunnerProcess) -> bool:
        """Keep a resident judge whose request completed for the next request (its dir
        emptied); False when it cannot be kept."""
        if not (runner.reusable and runner.alive() and self._finalizer.alive):
            return False
        if not runner.clear_for_next():
            return False
        self._spares.replace(runner)
        return True

    def _spare_at_once(self, device: str, runner: RunnerProcess) -> bool:
        """Whether the next spare may start beside this runner's candidate: the rule says so
        for `device`, and the runner is jailed (only the jail's users keep the two apart)."""
        if not spare_rule_allows_beside(self.spare_start, device):
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
        limits = self._limit_settings.runner_limits(device, timeout_s)
        try:
            return call_in_spawn_thread(
                functools.partial(self._start.spawn, device, timeout_s, lease, limits)
            )
        except BaseException:
            lease.release()
            raise

    def _trim_cache(self, runner: RunnerProcess) -> None:
        """Empty the runner's identity cache if it grew too big, once no runner of that
        identity is alive (the one just discarded was its last)."""
        if runner.cache is None or runner.lease is None:
            return
        if self._identities.live(runner.lease.identity) == 0:
            trim(runner.cache, self.cache_limit_bytes)


class _Evaluation:
    """LocalSandbox's side of one evaluation (`runner_lifecycle.RunnerHost`): its spare slot,
    its runners, and the host caches of the request."""

    kill_note = "the process group was killed"

    def __init__(self, sandbox: LocalSandbox, address_space: int | None, problem: str) -> None:
        """For one request; `address_space` is its CPU address-space limit (None: none),
        `problem` its `problem_key`."""
        self._sandbox = sandbox
        self._address_space = address_space
        self._problem = problem
        self.cached: Prepared | None = None
        """The request's cache step (`host_caches.py`), once the runner has it."""
        self.kept = False
        """The runner was kept as a resident judge for the next request."""

    def take_spare(self, device: str, timeout_s: float) -> RunnerProcess | None:
        """The spare (or resident judge) when it fits."""
        runner = self._sandbox._take_spare(device, timeout_s, self._problem)
        if runner is not None and runner.resident:
            runner.problem = self._problem
        return runner

    def start_runner(self, device: str, timeout_s: float) -> RunnerProcess:
        """A runner forked now, as whichever identity is free (or the less busy one)."""
        runner = self._sandbox._start_runner(device, timeout_s)
        runner.problem = self._problem
        return runner

    def request_for(
        self, runner: RunnerProcess, request: EvalRequest, timeout_s: float, notes: list[str]
    ) -> EvalRequest:
        """Look the host caches up and stage their files into the runner's dir; the request
        with its limits."""
        caches = self._sandbox.caches
        if caches is not None:
            self.cached = caches.prepare(request, self._sandbox.python)
            request = self.cached.request
            notes += self.cached.notes
            owner = runner.lease.identity if runner.jailed and runner.lease else None
            notes += caches.stage_into(self.cached, runner.workdir, owner)
        return runner_request(request, timeout_s, self._address_space)

    def start_spare_beside(
        self, device: str, timeout_s: float, runner: RunnerProcess
    ) -> Callable[[], None] | None:
        """Fork the next spare on the spawn thread meanwhile (the candidate's clock does not
        wait for it) where the rule and the jail allow it."""
        sandbox = self._sandbox
        if runner.resident:
            return None  # it comes back for the next request; if not, a spare starts after
        if not (sandbox.warm_spare and sandbox._spare_at_once(device, runner)):
            return None
        future = submit_to_spawn_thread(functools.partial(sandbox._start_spare, device, timeout_s))
        return functools.partial(_wait_quietly, future)

    def collect(self, runner: RunnerProcess, signed: SignedResult, notes: list[str]) -> None:
        """Store what the judge built or hashed (the runner is dead)."""
        caches = self._sandbox.caches
        if self.cached is not None and caches is not None:
            notes += caches.collect(self.cached, runner.workdir, signed.report)

    def release(self, runner: RunnerProcess) -> None:
        """Keep a resident judge whose request completed for the next one; else kill what is
        left of it, remove its temp dir, trim its identity's cache."""
        self.kept = self._sandbox._keep_resident(runner)
        if not self.kept:
            runner.discard()
            self._sandbox._trim_cache(runner)

    def replaced(
        self, run: RunEnd, signed: SignedResult, traces: list[Trace], notes: list[str]
    ) -> bool:
        """Never: each runner had its own process group and temp dir, both gone now."""
        del run, signed, traces, notes
        return False

    def start_spare_after(
        self, device: str, timeout_s: float, runner: RunnerProcess, replaced: bool
    ) -> None:
        """The next spare, unless the runner was kept or the one started beside is held."""
        del runner, replaced
        if self._sandbox.warm_spare and not self.kept:
            self._sandbox._start_spare(device, timeout_s)


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
