"""`DockerSandbox`: the Docker sandbox's options, its device slots, and its evaluations.

Place in the flow: `make_sandbox("docker", ...)` builds one (the engine is contacted then).
`evaluate` takes the request's device slot (`slot.py`) and, under its lock, makes sure of its
pool container and memory limit (`containers.py`), then runs the request through the shared
lifecycle (`runner_lifecycle.py`) with `SlotEvaluation` (`slot_evaluation.py`), its
`RunnerHost`. Runners are exec'd here (`exec_runner.py`, `accounts.py`); with
`resident_requests` each is a resident judge kept in the slot for the next request of its
problem. What the package does as a whole, and the spare rule, is in `docker/__init__.py`.
"""

import logging
import os
import re
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path

import docker

from kernelarc.errors import SandboxError
from kernelarc.problem_key import problem_key
from kernelarc.sandboxes.docker.accounts import default_user, runner_users
from kernelarc.sandboxes.docker.containers import (
    ContainerPool,
    ContainerSpec,
    drop_container,
    remove_all,
)
from kernelarc.sandboxes.docker.engine import DOCKER_ERRORS
from kernelarc.sandboxes.docker.exec_runner import ExecRunner, exec_runner
from kernelarc.sandboxes.docker.slot import Slot
from kernelarc.sandboxes.docker.slot_evaluation import SlotEvaluation, with_image
from kernelarc.sandboxes.owned_dirs import sweep_stale
from kernelarc.sandboxes.resident_runner import (
    DEFAULT_RESIDENT_REQUESTS,
    RESIDENT_NOTE,
)
from kernelarc.sandboxes.runner_cache import CACHE_LIMIT_BYTES
from kernelarc.sandboxes.runner_lifecycle import (
    SpareStart,
    check_spare_start,
    run_evaluation,
    spare_rule_allows_beside,
)
from kernelarc.schema import EvalRequest, EvalResult

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
        resident_requests: int = DEFAULT_RESIDENT_REQUESTS,
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
        `resident_requests` > 0 (with `warm_spare`): each runner is a resident judge serving up
        to that many requests of one problem (`kernelarc/runner/resident.py`); 0: a fresh
        runner per request.
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
        self.resident_requests = resident_requests if warm_spare else 0
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
            side = SlotEvaluation(self, slot, problem_key(request))
            done = run_evaluation(side, request, timeout_s=timeout_s, started=started, notes=notes)
            image_id = slot.image_id
        report = done.signed.report
        if report.resident:
            notes.append(f"{RESIDENT_NOTE} (request {int(report.resident.get('request', 0))})")
        return EvalResult(
            traces=with_image(done.traces, image_id),
            stderr_tail=done.run.log_tail,
            wall_s=done.wall_s,
            sandbox="docker",
            sandbox_notes=notes,
            sandbox_image=image_id,
            build=report.build,
            stage_s=report.stage_s,
            judge_cache=report.cache,
            resident_request=int(report.resident.get("request", 0)),
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
                resident_requests=self.resident_requests,
            )
        except DOCKER_ERRORS as exc:
            msg = f"cannot exec the runner in container {slot.container.short_id}: {exc}"
            if not keep_container:
                drop_container(slot)
            raise SandboxError(msg) from exc
        slot.last_user = user
        return runner
