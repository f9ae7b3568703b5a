"""`DockerSandbox`: the Docker sandbox's options, its device slots, and its side of the lifecycle.

Place in the flow: `make_sandbox("docker", ...)` builds one (the engine is contacted then).
`evaluate` takes the request's device slot (`slot.py`) and, under its lock, makes sure of its
pool container and memory limit (`containers.py`), then runs the request through the shared
lifecycle (`runner_lifecycle.py`) with `_SlotEvaluation`, its `RunnerHost`: the slot's spare,
runners exec'd as the user that did not run last (`exec_runner.py`, `accounts.py`), the
container replaced when the run leaves it untrustworthy (`processes.py`), the user's compile
cache trimmed, the next spare exec'd. What the package does as a whole, and the spare rule, is
in `docker/__init__.py`.
"""

import logging
import os
import re
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path

import docker

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.docker.accounts import default_user, runner_users, trim_cache
from kernelarc.sandboxes.docker.containers import (
    ContainerPool,
    ContainerSpec,
    drop_container,
    remove_all,
)
from kernelarc.sandboxes.docker.engine import DOCKER_ERRORS, PROBLEM_MOUNT
from kernelarc.sandboxes.docker.exec_runner import ExecRunner, exec_runner
from kernelarc.sandboxes.docker.processes import replace_reason
from kernelarc.sandboxes.docker.slot import Slot
from kernelarc.sandboxes.owned_dirs import sweep_stale
from kernelarc.sandboxes.request_limits import runner_request
from kernelarc.sandboxes.result_file import SignedResult
from kernelarc.sandboxes.runner_cache import CACHE_LIMIT_BYTES
from kernelarc.sandboxes.runner_lifecycle import (
    RunEnd,
    SpareStart,
    check_spare_start,
    run_evaluation,
    spare_rule_allows_beside,
)
from kernelarc.schema import EvalRequest, EvalResult, Trace

logger = logging.getLogger(__name__)

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


class DockerSandbox:
    """Runs the runner as a fresh process in a warm, hardened container per device slot.

    Use as a context manager (or call `close()`): pool containers live until then.
    """

    def __init__(
        self,
        *,
        image: str = "kernelarc-sandbox:latest",
        gpu: int = 0,
        memory_limit_gb: float | None = 16.0,
        pids_limit: int = 4096,
        cpus: float | None = None,
        docker_host: str | None = None,
        network: bool = False,
        user: str | None = None,
        spare_user: str | None = None,
        python: str = "python",
        tmpfs_size_mb: int = 4096,
        max_file_size_bytes: int | None = 256 * 1024**2,
        work_root: str | Path | None = None,
        extra_mounts: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        warm_spare: bool = True,
        spare_start: SpareStart = "auto",
        cache_limit_bytes: int | None = CACHE_LIMIT_BYTES,
    ) -> None:
        """Options; the engine is contacted now (SandboxError when it cannot be reached).

        `max_file_size_bytes` is RLIMIT_FSIZE in the container (as LocalSandbox): the eval dir
        is a host directory, so without it a candidate could fill the host's disk; None = none.
        `network` True gives the container docker's default network (off: `none`). `user` None
        is the host's uid:gid (1000:1000 when the host is root). `work_root` is where the
        per-container eval dirs are made (None: the system temp dir); it must be a path the
        engine's host sees identically. `extra_mounts` (host path -> container path, read-only)
        exist for the tests' stand-in image, which borrows this host's Python. `warm_spare`
        keeps a pre-started runner in each slot's container for its next evaluation, exec'd
        as `spare_start` says (`docker/__init__.py`). `spare_user` is the other user runners
        alternate with (None: 1001:1001 when the host is root and `user` the default; runners
        only alternate when the host is root and both users are numeric uid:gid). A numeric
        user's compile cache dir in the pool dir is emptied past `cache_limit_bytes`.
        """
        check_spare_start(spare_start)
        self.image = image
        self.gpu = gpu
        self.memory_limit_gb = memory_limit_gb
        self.pids_limit = pids_limit
        self.cpus = cpus
        self.network = network
        self.user = user or default_user()
        if spare_user is None and user is None and os.getuid() == 0:
            spare_user = "1001:1001"
        self.spare_user = spare_user
        self.spare_start = spare_start
        self._users = runner_users(self.user, self.spare_user)
        self.python = python
        self.tmpfs_size_mb = tmpfs_size_mb
        self.max_file_size_bytes = max_file_size_bytes
        self.work_root = Path(work_root) if work_root is not None else None
        self._pool_root = self.work_root or Path(tempfile.gettempdir())
        self.extra_mounts = dict(extra_mounts or {})
        self.extra_env = {k: v for k, v in (extra_env or {}).items() if not _SECRET_NAME.search(k)}
        self.warm_spare = warm_spare
        self.cache_limit_bytes = cache_limit_bytes
        try:
            self._client = (
                docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
            )
            self._client.ping()
        except DOCKER_ERRORS as exc:
            msg = f"no Docker engine at {docker_host or '$DOCKER_HOST/default socket'}: {exc}"
            raise SandboxError(msg) from exc
        self._owner = uuid.uuid4().hex
        self._pool = ContainerPool(
            self._client,
            ContainerSpec(
                image=image,
                gpu=gpu,
                memory_limit_gb=memory_limit_gb,
                pids_limit=pids_limit,
                cpus=cpus,
                network=network,
                user=self.user,
                users=self._users,
                python=python,
                tmpfs_size_mb=tmpfs_size_mb,
                max_file_size_bytes=max_file_size_bytes,
                extra_mounts=self.extra_mounts,
                pool_root=self._pool_root,
                owner=self._owner,
            ),
        )
        # Pool dirs (and their containers) a host killed with SIGKILL left.
        sweep_stale(self._pool_root, ["pool"], on_dead=self._pool.remove_dead_hosts_containers)
        self._slots: dict[str, Slot] = {}
        self._slots_lock = threading.Lock()
        self._preparing: list[threading.Thread] = []
        self._finalizer = weakref.finalize(self, remove_all, self._client, self._slots, self._owner)

    def __enter__(self) -> "DockerSandbox":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop and remove every pool container (idempotent); waits for `prepare` threads
        first, so none starts a container after this."""
        for thread in self._preparing:
            thread.join()
        self._finalizer()

    def prepare(self, device: str, timeout_s: float, problem_dir: str | None = None) -> None:
        """Start the slot's container for `problem_dir` (what evaluations of it must mount)
        and, with `warm_spare`, its first spare, on a thread of its own; returns at once. An
        evaluation of the slot meanwhile waits for it (the slot's lock) and uses both. The
        container starts with or without `warm_spare`; a spare fits any `timeout_s` (the
        runner gets its deadline with `go`). Nothing after `close()` or when the slot already
        has its container; a failure is logged, and the first evaluation tries again."""
        del timeout_s
        try:
            slot = self._slot(device)
        except SandboxError:  # closed
            return
        thread = threading.Thread(
            target=self._prepare_slot,
            args=(slot, device, problem_dir),
            name=f"kernelarc-docker-prepare-{slot.key}",
            daemon=True,
        )
        self._preparing = [t for t in self._preparing if t.is_alive()]
        self._preparing.append(thread)
        thread.start()

    def _prepare_slot(self, slot: Slot, device: str, problem_dir: str | None) -> None:
        with slot.lock:
            if slot.container is not None or not self._finalizer.alive:
                return
            try:
                self._pool.ensure(slot, problem_dir, [])
            except SandboxError as exc:
                logger.warning("sandbox slot %s: cannot prepare its container: %s", slot.key, exc)
                return
            if self.warm_spare and slot.spare is None:
                self._start_spare(slot, device, self._other_user(slot.last_user))

    def _other_user(self, user: str | None) -> str:
        """The user that is not `user` (the first one when there is only one)."""
        others = [u for u in self._users if u != user]
        return others[0] if others else self._users[0]

    def _spare_at_once(self, device: str) -> bool:
        if not spare_rule_allows_beside(self.spare_start, device):
            return False
        return len(self._users) == 2

    def container_id(self, device: str = "cpu") -> str | None:
        """The id of the slot's pool container (None when not started): for tests and logs."""
        slot = self._slots.get(self._slot_key(device))
        return None if slot is None or slot.container is None else str(slot.container.id)

    def _slot_key(self, device: str) -> str:
        return f"cuda:{self.gpu}" if device == "cuda" else "cpu"

    def _slot(self, device: str) -> Slot:
        if not self._finalizer.alive:
            msg = "this DockerSandbox was closed; make a new one"
            raise SandboxError(msg)
        key = self._slot_key(device)
        with self._slots_lock:
            return self._slots.setdefault(key, Slot(key))

    def evaluate(self, request: EvalRequest, *, timeout_s: float) -> EvalResult:
        """Evaluate in the slot's container; candidate failures become statuses.

        One evaluation per slot at a time (a second caller waits for the slot's lock).

        Raises:
            SandboxError: the engine or the pool container cannot be used.
        """
        started = time.monotonic()
        slot = self._slot(request.device)
        notes: list[str] = []
        with slot.lock:
            self._pool.ensure(slot, request.problem_dir, notes)
            self._pool.fit_memory(slot, request, notes)
            side = _SlotEvaluation(self, slot)
            done = run_evaluation(side, request, timeout_s=timeout_s, started=started, notes=notes)
            image_id = slot.image_id
        report = done.signed.report
        return EvalResult(
            traces=_with_image(done.traces, image_id),
            stderr_tail=done.run.log_tail,
            wall_s=done.wall_s,
            sandbox="docker",
            sandbox_notes=notes,
            sandbox_image=image_id,
            build=report.build,
            stage_s=report.stage_s,
        )

    def _start_spare(self, slot: Slot, device: str, user: str, *, beside: bool = False) -> None:
        """Exec the next evaluation's runner now as `user`; a failure only costs that one a cold
        start (and, as the container may be broken, the container: the next starts fresh;
        not while a candidate runs `beside` it: its evaluation's checks replace it then)."""
        try:
            slot.spare = self._start_runner(slot, device, user, keep_container=beside)
        except SandboxError as exc:
            logger.warning("sandbox slot %s: no spare runner: %s", slot.key, exc)

    def _start_runner(
        self, slot: Slot, device: str, user: str, *, keep_container: bool = False
    ) -> ExecRunner:
        """Exec a runner as `user` in a fresh eval dir (its own) of the slot's container; it
        imports torch, then waits for `go` on the attached stdin.

        Raises:
            SandboxError: the dir or the exec failed (the container is dropped unless
                `keep_container`: gone or broken, the next evaluation starts a fresh one).
        """
        assert slot.pool_dir is not None
        account = slot.accounts.get(user)
        try:
            runner = exec_runner(
                self._client.api,
                slot.container,
                slot.pool_dir,
                device,
                user,
                self.python,
                extra_env=self.extra_env,
                account=account,
            )
        except DOCKER_ERRORS as exc:
            msg = f"cannot exec the runner in container {slot.container.short_id}: {exc}"
            if not keep_container:
                drop_container(slot)
            raise SandboxError(msg) from exc
        slot.last_user = user
        return runner


class _SlotEvaluation:
    """DockerSandbox's side of one evaluation in one slot (`runner_lifecycle.RunnerHost`),
    under the slot's lock."""

    kill_note = "the container was replaced"

    def __init__(self, sandbox: DockerSandbox, slot: Slot) -> None:
        """For one request in `slot`, whose container is up."""
        self._sandbox = sandbox
        self._slot = slot

    def take_spare(self, device: str, timeout_s: float) -> ExecRunner | None:
        """The slot's spare if it is for `device` and still running (else it is dropped)."""
        del timeout_s  # a spare fits any: its deadline comes with `go`
        spare, self._slot.spare = self._slot.spare, None
        if spare is None:
            return None
        if spare.fits == device and spare.alive():
            return spare
        spare.discard()
        return None

    def start_runner(self, device: str, timeout_s: float) -> ExecRunner:
        """A runner exec'd now, as the user that did not run last."""
        del timeout_s
        user = self._sandbox._other_user(self._slot.last_user)
        return self._sandbox._start_runner(self._slot, device, user)

    def request_for(
        self, runner: ExecRunner, request: EvalRequest, timeout_s: float, notes: list[str]
    ) -> EvalRequest:
        """The request with its timeout, naming the problem dir where the container has it."""
        del runner, notes
        sent = runner_request(request, timeout_s)
        if sent.problem_dir is not None:
            sent = sent.model_copy(update={"problem_dir": PROBLEM_MOUNT})
        return sent

    def start_spare_beside(
        self, device: str, timeout_s: float, runner: ExecRunner
    ) -> Callable[[], None] | None:
        """Exec the next spare now, as the other user, where the rule and two users allow."""
        del timeout_s
        sandbox = self._sandbox
        if sandbox.warm_spare and sandbox._spare_at_once(device):
            sandbox._start_spare(self._slot, device, sandbox._other_user(runner.user), beside=True)
        return None

    def collect(self, runner: ExecRunner, signed: SignedResult, notes: list[str]) -> None:
        """Nothing: DockerSandbox keeps no host caches yet."""
        del runner, signed, notes

    def release(self, runner: ExecRunner) -> None:
        """Close its connection and remove its eval dir."""
        runner.discard()

    def replaced(
        self, run: RunEnd, signed: SignedResult, traces: list[Trace], notes: list[str]
    ) -> bool:
        """Drop the container when the run leaves it untrustworthy (`processes.py`)."""
        slot = self._slot
        api, python = self._sandbox._client.api, self._sandbox.python
        reason = replace_reason(api, python, slot, run, signed.problem, traces)
        if reason is None:
            return False
        notes.append(f"container {slot.container.short_id} replaced: {reason}")
        logger.info("sandbox slot %s: replacing its container (%s)", slot.key, reason)
        drop_container(slot)
        return True

    def start_spare_after(
        self, device: str, timeout_s: float, runner: ExecRunner, replaced: bool
    ) -> None:
        """Trim the runner's user's cache; exec the next spare unless the container went or a
        spare is held (one exec'd beside)."""
        del timeout_s
        sandbox, slot = self._sandbox, self._slot
        trim_cache(slot.pool_dir, runner.user, sandbox.cache_limit_bytes)
        if not replaced and sandbox.warm_spare and slot.spare is None:
            sandbox._start_spare(slot, device, sandbox._other_user(runner.user))


def _with_image(traces: list[Trace], image_id: str) -> list[Trace]:
    """Every trace's environment.libs gets `sandbox_image` (models are frozen: copies)."""
    out: list[Trace] = []
    for trace in traces:
        evaluation = trace.evaluation
        if evaluation is None:
            out.append(trace)
            continue
        env = evaluation.environment
        env = env.model_copy(update={"libs": {**env.libs, "sandbox_image": image_id}})
        evaluation = evaluation.model_copy(update={"environment": env})
        out.append(trace.model_copy(update={"evaluation": evaluation}))
    return out
