"""The Docker sandbox: the runner in a warm, locked-down container per device slot (GPU hosts).

The only module that imports `docker`. Per slot (`cuda:<gpu>` or `cpu`) one long-lived container
runs `sleep infinity` under docker's init: no network, read-only root, a tmpfs /tmp, no
capabilities, no-new-privileges, pids/memory/CPU limits, a non-root user; the problem dir is
mounted read-only at /work/problem, a host temp dir read-write at /work/eval. Each evaluation
is a fresh `python -P -m kernelarc.runner --device D request.json result.json` exec'd in its own
/work/eval/<id> with stdin attached; the host writes request.json there, then `go <timeout>` and
the result key on stdin: the runner SIGKILLs its own process group at that deadline (it cannot
run under `timeout -s KILL`: see below), and the host still gives up HOST_GRACE_S later. The
signed result is read back on the host side of the mount with `result_file`, as LocalSandbox
does. The container is replaced after a timeout, a runner crash, a poisoned CUDA context or
leftover processes, so container start-up is paid once and no candidate can affect the next: the
leftover check lists the container's processes from inside after every evaluation, before the
next runner is exec'd or given `go`. The runner returns only once the killed worker's whole tree
is reaped, so a fork bomb's processes do not count there; the listing also reads how many forks
the container's pids limit refused, and a candidate that hit that limit while a spare was exec'd
beside it (`spare_start`) has the container replaced too, since the spare's own forks or threads
may have been refused while it imported torch.

With `warm_spare` (the default) the slot keeps the next runner exec'd ahead, in its own fresh eval
dir: it imports torch and waits for `go`, so the next evaluation skips the import (as LocalSandbox's
spare; `spare_slot.py`). On `cuda` (`spare_start` auto) it is exec'd as soon as the current
evaluation has its runner, so back-to-back candidates find it ready; on `cpu` only when an
evaluation ends, after the leftover check, so its import never competes with CPU timing. Runners
alternate between two numeric users (`user`, `spare_user`): with no capabilities in the container,
the running candidate's uid can neither signal nor ptrace the spare, nor enter its eval dir (chowned
to the spare's uid, mode 0700); the leftover check ignores the spare's uid. Without a second user (a
non-root host cannot chown the eval dirs) the spare waits for the end. A spare that died is replaced
by a runner exec'd at once (a cold start); a replaced container takes its spare along. Every runner
user is a complete account (`runner_accounts.py`): USER and LOGNAME name it, and where the image
lacks a passwd or group entry for a numeric user, the pool container gets copies of the image's
/etc/passwd and /etc/group with the entries added, mounted read-only over them. Each numeric user
keeps its compile caches in its own dir of the pool dir (`cache/<uid>-<gid>`, mode 0700:
`runner_cache.py`) for the candidates that follow in that container. A runner that reports (or shows
by its exit code) that it could not set itself up is a SandboxError, not a candidate failure.
`prepare()` starts a slot's container and its first spare on a thread of its own before the first
evaluation, which then waits for it (the slot's lock) and finds both ready. Pool dirs are named for
the host process (`owned_dirs.py`) and containers labelled with it: a new DockerSandbox removes the
pool dirs and containers (on its engine) of a host that was killed without closing its sandboxes.
"""

import contextlib
import io
import logging
import os
import re
import select
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
from docker.types import DeviceRequest, Ulimit

from kernelarc.errors import SandboxError
from kernelarc.runner.go_line import go_line
from kernelarc.sandboxes.docker.attach_stream import AttachStream, pump_until
from kernelarc.sandboxes.memory_need import GIB
from kernelarc.sandboxes.owned_dirs import host_owner, make_owned_dir, sweep_stale
from kernelarc.sandboxes.request_limits import memory_limits, runner_request
from kernelarc.sandboxes.result_file import (
    new_result_key,
    read_signed_result,
    setup_failure,
    traces_after_run,
)
from kernelarc.sandboxes.runner_accounts import Account, account_env, account_in, with_lines
from kernelarc.sandboxes.runner_cache import (
    CACHE_LIMIT_BYTES,
    cache_env,
    give_to,
    identity_folder,
    trim,
)
from kernelarc.schema import EvalRequest, EvalResult, Trace

logger = logging.getLogger(__name__)

EVAL_MOUNT = "/work/eval"
PROBLEM_MOUNT = "/work/problem"
#: In a pool dir: the numeric users' compile cache dirs, and the passwd/group copies.
CACHE_DIR = "cache"
ACCOUNTS_DIR = "accounts"
#: Extra seconds the host waits past the runner's own deadline before it kills the container.
HOST_GRACE_S = 15.0
#: EvalResult.sandbox_notes of an evaluation that used the spare (tests and logs look for it).
WARM_SPARE_NOTE = "warm spare runner"
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
#: Runner log lines that mean the GPU context may be poisoned for whoever comes next.
POISONED_CUDA = re.compile(r"illegal memory access|CUDA error|unspecified launch failure")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_DOCKER_ERRORS = (docker.errors.DockerException, OSError)
_REMOVE_ATTEMPTS = 4
#: Label naming the DockerSandbox instance a pool container belongs to.
OWNER = "kernelarc.sandbox_owner"
#: Label naming the host process (`owned_dirs` owner) whose sandbox started a pool container.
HOST_OWNER = "kernelarc.host_owner"
#: Exec'd in a pool container as root (uid 0 there, with no capabilities: /proc/<pid>/status is
#: world-readable): one `pid uid` line (the real uid) per process but itself; a process that
#: ends mid-walk is skipped, any other error exits non-zero. Then, where the container's pids
#: cgroup shows its events file (v2 at the cgroup root, v1 under pids/), `limit-hits N`: how many
#: forks (or threads) the pids limit has refused in the container so far.
_LIST_PROCESSES = """
import os
me = str(os.getpid())
lines = []
for path in ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"):
    try:
        with open(path) as events:
            hits = [line.split()[1] for line in events if line.startswith("max ")]
    except OSError:
        continue
    lines += ["limit-hits " + hit for hit in hits[:1]]
    break
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid == me:
        continue
    try:
        with open("/proc/" + pid + "/status") as status:
            uid = next(line.split()[1] for line in status if line.startswith("Uid:"))
    except (FileNotFoundError, ProcessLookupError):
        continue
    lines.append(pid + " " + uid)
print("\\n".join(lines))
"""


class _ListingError(Exception):
    """The in-container process listing failed, or said something impossible."""


@dataclass(frozen=True)
class _Listing:
    """What the in-container listing saw."""

    processes: dict[str, str]
    """pid -> real uid of every process but the listing's own (the container's pid numbers)."""
    limit_hits: int | None
    """Forks the container's pids limit refused so far (None: its cgroup file is not visible)."""


#: What the process listing can raise: its caller then cannot trust the container.
_LISTING_ERRORS = (*_DOCKER_ERRORS, _ListingError)


@dataclass
class _Runner:
    """A runner exec'd in a pool container, waiting for `go` (or running), stdin attached."""

    exec_id: str
    raw: Any
    """docker-py's hijacked connection (close it: the runner reads EOF, a spare exits)."""
    conn: socket.socket
    name: str
    """Its eval dir, under the slot's pool dir."""
    device: str
    user: str
    """The uid:gid it runs as."""
    started: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        """Close its stdin/output connection."""
        with contextlib.suppress(OSError):
            self.raw.close()


@dataclass
class _Slot:
    """One device slot: its lock and (while warm) its pool container and spare runner."""

    key: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    container: Any = None
    problem_dir: str | None = None
    pool_dir: Path | None = None
    image_id: str = ""
    baseline_pids: frozenset[str] = frozenset()
    """Pids (the container's own) of its init and `sleep infinity`, listed at its start."""
    limit_hits: int | None = None
    """The pids limit's refusal count at the last listing (None: not visible)."""
    memory_bytes: int | None = None
    """The container's memory limit now (raised for a problem that needs more)."""
    spare: _Runner | None = None
    last_user: str | None = None
    """The user of the runner exec'd last (the next one alternates)."""
    accounts: dict[str, Account] = field(default_factory=dict)
    """Numeric runner user (`uid:gid`) -> its account in the container."""


@dataclass(frozen=True)
class _ExecRun:
    exit_code: int | None
    timed_out: bool
    log_tail: str


def _default_user() -> str:
    # The host must be able to delete what the runner writes into the eval mount.
    return f"{os.getuid()}:{os.getgid()}" if os.getuid() != 0 else "1000:1000"


def _numeric(user: str) -> tuple[int, int] | None:
    """`uid:gid` as numbers, or None for anything else (a name, a uid alone)."""
    uid, _, gid = user.partition(":")
    return (int(uid), int(gid)) if uid.isdigit() and gid.isdigit() else None


#: When the next spare is exec'd: `auto` = at once on cuda, after the evaluation on cpu; `after`
#: = always after; `concurrent` = always at once (what tests and benchmarks use on a CPU host).
SpareStart = Literal["auto", "after", "concurrent"]


def _remove_all(client: Any, slots: dict[str, _Slot], owner: str) -> None:
    """Remove every pool container and its eval dir (close() and the exit finalizer), then any
    container of this sandbox an earlier removal left behind (found by its `owner` label)."""
    for slot in slots.values():
        _drop_container(slot)
    with contextlib.suppress(*_DOCKER_ERRORS):
        for container in client.containers.list(all=True, filters={"label": f"{OWNER}={owner}"}):
            _remove_container(container)
    with contextlib.suppress(*_DOCKER_ERRORS):
        client.close()


def _remove_container(container: Any) -> None:
    """Force-remove, retried: on a loaded host the engine can give up waiting for the kill."""
    for attempt in range(_REMOVE_ATTEMPTS):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            return
        except _DOCKER_ERRORS as exc:
            if attempt + 1 == _REMOVE_ATTEMPTS:
                logger.warning("cannot remove sandbox container %s: %s", container.short_id, exc)
                return
            time.sleep(1.0 + attempt)
        else:
            return


def _drop_container(slot: _Slot) -> None:
    container, pool_dir, spare = slot.container, slot.pool_dir, slot.spare
    slot.container, slot.pool_dir, slot.baseline_pids = None, None, frozenset()
    slot.limit_hits = None
    slot.memory_bytes = None
    slot.spare = None
    if spare is not None:
        spare.close()
    if container is not None:
        _remove_container(container)
    if pool_dir is not None:
        shutil.rmtree(pool_dir, ignore_errors=True)


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
        as `spare_start` says (module docstring). `spare_user` is the other user runners
        alternate with (None: 1001:1001 when the host is root and `user` the default; runners
        only alternate when the host is root and both users are numeric uid:gid). A numeric
        user's compile cache dir in the pool dir is emptied past `cache_limit_bytes`.
        """
        if spare_start not in ("auto", "after", "concurrent"):
            msg = f"spare_start must be auto, after or concurrent (got {spare_start!r})"
            raise ValueError(msg)
        self.image = image
        self.gpu = gpu
        self.memory_limit_gb = memory_limit_gb
        self._engine_memory: int | None = None
        self.pids_limit = pids_limit
        self.cpus = cpus
        self.network = network
        self.user = user or _default_user()
        if spare_user is None and user is None and os.getuid() == 0:
            spare_user = "1001:1001"
        self.spare_user = spare_user
        self.spare_start = spare_start
        self._users = self._runner_users()
        self.python = python
        self.tmpfs_size_mb = tmpfs_size_mb
        self.max_file_size_bytes = max_file_size_bytes
        self.work_root = Path(work_root) if work_root is not None else None
        self._pool_root = self.work_root or Path(tempfile.gettempdir())
        self.extra_mounts = dict(extra_mounts or {})
        self.extra_env = {k: v for k, v in (extra_env or {}).items() if not _SECRET_NAME.search(k)}
        self.warm_spare = warm_spare
        self.cache_limit_bytes = cache_limit_bytes
        self._image_databases: tuple[str, str] | None = None
        try:
            self._client = (
                docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
            )
            self._client.ping()
        except _DOCKER_ERRORS as exc:
            msg = f"no Docker engine at {docker_host or '$DOCKER_HOST/default socket'}: {exc}"
            raise SandboxError(msg) from exc
        # Pool dirs (and their containers) a host killed with SIGKILL left.
        sweep_stale(self._pool_root, ["pool"], on_dead=self._remove_dead_hosts_containers)
        self._slots: dict[str, _Slot] = {}
        self._slots_lock = threading.Lock()
        self._preparing: list[threading.Thread] = []
        self._owner = uuid.uuid4().hex
        self._finalizer = weakref.finalize(
            self, _remove_all, self._client, self._slots, self._owner
        )

    def __enter__(self) -> "DockerSandbox":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _remove_dead_hosts_containers(self, owner: str) -> bool:
        """Remove the containers a dead host process `owner` left on this engine (called by
        the sweep of its pool dirs); False, keeping its dirs for a later sweep, when the
        engine cannot list them."""
        try:
            found = self._client.containers.list(
                all=True, filters={"label": f"{HOST_OWNER}={owner}"}
            )
        except _DOCKER_ERRORS as exc:
            logger.warning("cannot list the containers of dead host %s: %s", owner, exc)
            return False
        for container in found:
            logger.info("removing container %s of dead host %s", container.short_id, owner)
            _remove_container(container)
        return True

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

    def _prepare_slot(self, slot: _Slot, device: str, problem_dir: str | None) -> None:
        with slot.lock:
            if slot.container is not None or not self._finalizer.alive:
                return
            try:
                self._ensure_container(slot, problem_dir, [])
            except SandboxError as exc:
                logger.warning("sandbox slot %s: cannot prepare its container: %s", slot.key, exc)
                return
            if self.warm_spare and slot.spare is None:
                self._start_spare(slot, device, self._other_user(slot.last_user))

    def _runner_users(self) -> tuple[str, ...]:
        """The users runners alternate between: two only when the host can give each its own
        eval dir (root, numeric uid:gid, not the same)."""
        if self.spare_user is None or self.spare_user == self.user or os.getuid() != 0:
            return (self.user,)
        first, second = _numeric(self.user), _numeric(self.spare_user)
        if first is None or second is None or first[0] == second[0]:
            return (self.user,)
        return (self.user, self.spare_user)

    def _other_user(self, user: str | None) -> str:
        """The user that is not `user` (the first one when there is only one)."""
        others = [u for u in self._users if u != user]
        return others[0] if others else self._users[0]

    def _spare_at_once(self, device: str) -> bool:
        if self.spare_start == "after" or (self.spare_start == "auto" and device != "cuda"):
            return False
        return len(self._users) == 2

    def container_id(self, device: str = "cpu") -> str | None:
        """The id of the slot's pool container (None when not started): for tests and logs."""
        slot = self._slots.get(self._slot_key(device))
        return None if slot is None or slot.container is None else str(slot.container.id)

    def _slot_key(self, device: str) -> str:
        return f"cuda:{self.gpu}" if device == "cuda" else "cpu"

    def _slot(self, device: str) -> _Slot:
        if not self._finalizer.alive:
            msg = "this DockerSandbox was closed; make a new one"
            raise SandboxError(msg)
        key = self._slot_key(device)
        with self._slots_lock:
            return self._slots.setdefault(key, _Slot(key))

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
            self._ensure_container(slot, request.problem_dir, notes)
            self._fit_memory(slot, request, notes)
            assert slot.pool_dir is not None
            runner = self._take_spare(slot, request.device)
            if runner is None:
                runner = self._start_runner(slot, request.device, self._other_user(slot.last_user))
            else:
                ahead = max(0.0, started - runner.started)  # < 0: exec'd by prepare meanwhile
                notes.append(f"{WARM_SPARE_NOTE} (started {ahead:.1f} s before the request)")
            if self.warm_spare and self._spare_at_once(request.device):
                self._start_spare(slot, request.device, self._other_user(runner.user), beside=True)
            workdir = slot.pool_dir / runner.name
            try:
                self._write_request(workdir, runner_request(request, timeout_s))
                key = new_result_key()
                run = self._run(slot, runner, timeout_s, key)
                signed = read_signed_result(workdir / "result.json", key)
            finally:
                runner.close()
                shutil.rmtree(workdir, ignore_errors=True)
            raw, problem, report = signed.traces, signed.problem, signed.report
            traces = traces_after_run(
                request,
                raw,
                problem,
                timed_out=run.timed_out,
                exit_code=run.exit_code,
                timeout_s=timeout_s,
                kill_note="the container was replaced",
                log_tail=run.log_tail,
                notes=[],
                skipped=report.skipped,
            )
            image_id = slot.image_id
            reason = self._replace_reason(slot, run, problem, traces)
            if reason is not None:
                notes.append(f"container {slot.container.short_id} replaced: {reason}")
                logger.info("sandbox slot %s: replacing its container (%s)", slot.key, reason)
                _drop_container(slot)
            wall_s = time.monotonic() - started
            self._trim_cache(slot, runner.user)
            if reason is None and self.warm_spare and slot.spare is None:
                self._start_spare(slot, request.device, self._other_user(runner.user))
        setup = setup_failure(signed, run.exit_code, jailed=False)
        if setup is not None:
            msg = f"the sandbox runner could not set itself up: {setup}\n{run.log_tail[-2000:]}"
            raise SandboxError(msg)
        return EvalResult(
            traces=_with_image(traces, image_id),
            stderr_tail=run.log_tail,
            wall_s=wall_s,
            sandbox="docker",
            sandbox_notes=notes,
            sandbox_image=image_id,
            build=report.build,
            stage_s=report.stage_s,
        )

    def _fit_memory(self, slot: _Slot, request: EvalRequest, notes: list[str]) -> None:
        """Raise the container's memory limit to what the request's judge and worker hold
        together beyond `memory_limit_gb` (memory_need.py), at most the engine host's memory.

        Raises:
            SandboxError: the reference alone needs more than the engine host has, or the
                engine refused the new limit.
        """
        if self.memory_limit_gb is None or slot.memory_bytes is None:
            return
        if self._engine_memory is None:
            with contextlib.suppress(*_DOCKER_ERRORS, KeyError, TypeError, ValueError):
                self._engine_memory = int(self._client.info()["MemTotal"])
        base = int(self.memory_limit_gb * GIB)
        ceiling = max(self._engine_memory, base) if self._engine_memory else None
        wanted = memory_limits(
            request, base, ceiling, "the Docker engine host's memory"
        ).container_bytes
        if wanted <= slot.memory_bytes:
            return
        try:
            slot.container.update(mem_limit=wanted, memswap_limit=wanted)
        except _DOCKER_ERRORS as exc:
            msg = f"cannot raise container {slot.container.short_id}'s memory limit: {exc}"
            raise SandboxError(msg) from exc
        notes.append(
            f"container memory limit raised from {slot.memory_bytes / GIB:.3g} to "
            f"{wanted / GIB:.3g} GiB for the problem's data"
        )
        slot.memory_bytes = wanted

    def _take_spare(self, slot: _Slot, device: str) -> _Runner | None:
        """The slot's spare if it is for `device` and still running (else it is dropped)."""
        spare, slot.spare = slot.spare, None
        if spare is None:
            return None
        if spare.device == device and self._running(spare):
            return spare
        spare.close()
        if slot.pool_dir is not None:
            shutil.rmtree(slot.pool_dir / spare.name, ignore_errors=True)
        return None

    def _running(self, runner: _Runner) -> bool:
        """Whether the engine says the exec runs and its output stream has not ended (which
        the engine's state can lag behind)."""
        try:
            running = bool(self._client.api.exec_inspect(runner.exec_id).get("Running"))
        except _DOCKER_ERRORS as exc:
            logger.warning("cannot inspect the spare runner %s: %s", runner.exec_id[:12], exc)
            return False
        if not running:
            return False
        try:
            readable, _, _ = select.select([runner.conn], [], [], 0)
            return not readable or runner.conn.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):
            return False

    def _start_spare(self, slot: _Slot, device: str, user: str, *, beside: bool = False) -> None:
        """Exec the next evaluation's runner now as `user`; a failure only costs that one a cold
        start (and, as the container may be broken, the container: the next starts fresh;
        not while a candidate runs `beside` it: its evaluation's checks replace it then)."""
        try:
            slot.spare = self._start_runner(slot, device, user, keep_container=beside)
        except SandboxError as exc:
            logger.warning("sandbox slot %s: no spare runner: %s", slot.key, exc)

    def _write_request(self, workdir: Path, request: EvalRequest) -> None:
        if request.problem_dir is not None:
            request = request.model_copy(update={"problem_dir": PROBLEM_MOUNT})
        try:
            # O_EXCL | O_NOFOLLOW: the dir is the container user's; never follow a planted link.
            fd = os.open(workdir / "request.json", _NEW_FILE, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(request.model_dump_json())
        except OSError as exc:
            msg = f"cannot write the request into the sandbox eval dir {workdir}: {exc}"
            raise SandboxError(msg) from exc

    def _make_eval_dir(self, workdir: Path, user: str) -> None:
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

    def _replace_reason(
        self, slot: _Slot, run: _ExecRun, problem: str | None, traces: list[Trace]
    ) -> str | None:
        if run.timed_out:
            return "timeout"
        if run.exit_code != 0 or problem is not None:
            return f"runner crashed (exit {run.exit_code}, {problem or 'result written'})"
        logs = [run.log_tail, *(t.evaluation.log for t in traces if t.evaluation is not None)]
        if any(POISONED_CUDA.search(log) for log in logs):
            return "the log reports a CUDA error (possibly a poisoned context)"
        try:
            listing = self._processes(slot)
        except _LISTING_ERRORS as exc:
            return f"cannot list its processes ({exc})"
        hits_before, slot.limit_hits = slot.limit_hits, listing.limit_hits
        # The spare exec'd beside the candidate runs as the other uid, which the candidate's
        # processes can never have.
        spare = _numeric(slot.spare.user) if slot.spare is not None else None
        spare_uid = str(spare[0]) if spare is not None else None
        leftovers = {
            pid
            for pid, uid in listing.processes.items()
            if pid not in slot.baseline_pids and uid != spare_uid
        }
        if leftovers:
            return f"{len(leftovers)} process(es) outlived the runner"
        # The limit is the container's, not the uid's: a candidate that spent it (a fork bomb)
        # may have had the spare's own forks or threads refused while it imported torch.
        hit = None not in (hits_before, listing.limit_hits) and listing.limit_hits != hits_before
        if hit and slot.spare is not None:
            return "the candidate hit the pids limit while a spare runner started beside it"
        return None

    def _processes(self, slot: _Slot) -> _Listing:
        """pid -> uid of every process of the slot's container, as the container sees them
        (its pid namespace, its uids: the runners' numeric users), listed from inside, and the
        count of forks its pids limit refused (`_Listing`). The baseline and every later
        listing are taken this way, so their pids compare. (`docker top` filters the host's `ps`
        by the container's cgroup: on a host whose cgroup or /proc view does not match the
        engine's it lists nothing, and leftovers went unseen.)

        Raises:
            docker.errors.DockerException, OSError: the exec failed.
            _ListingError: the listing failed or came back empty (init and `sleep infinity`
                always run, so an empty listing is a blind one, never "no leftovers").
        """
        api = self._client.api
        command = [self.python, "-I", "-S", "-c", _LIST_PROCESSES]
        exec_id = api.exec_create(slot.container.id, command, user="0", workdir="/")["Id"]
        out, err = api.exec_start(exec_id, demux=True)
        code = self._exit_code(exec_id)
        if code != 0:
            tail = ((out or b"") + (err or b"")).decode(errors="replace").strip()[-300:]
            msg = f"the process listing exited with {code}: {tail}"
            raise _ListingError(msg)
        processes: dict[str, str] = {}
        limit_hits = None
        for line in (out or b"").decode(errors="replace").splitlines():
            pid, _, uid = line.partition(" ")
            if pid == "limit-hits" and uid.isdigit():
                limit_hits = int(uid)
                continue
            if not (pid.isdigit() and uid.isdigit()):
                msg = f"the process listing printed {line[:100]!r}"
                raise _ListingError(msg)
            processes[pid] = uid
        if not processes:
            msg = "the process listing is empty (blind: init and the keep-alive always run)"
            raise _ListingError(msg)
        return _Listing(processes, limit_hits)

    def _ensure_container(self, slot: _Slot, problem_dir: str | None, notes: list[str]) -> None:
        if slot.container is not None and slot.problem_dir == problem_dir:
            return
        if slot.container is not None:
            notes.append("container replaced: the problem dir changed")
            _drop_container(slot)
        started = time.monotonic()
        try:
            slot.pool_dir = make_owned_dir("pool", self._pool_root)  # swept if the host is killed
        except OSError as exc:
            msg = f"cannot create the sandbox pool dir in {self._pool_root}: {exc}"
            raise SandboxError(msg) from exc
        slot.pool_dir.chmod(0o711)  # the container user enters its own eval dir, lists nothing
        slot.problem_dir = problem_dir
        try:
            slot.container = self._client.containers.run(**self._container_options(slot))
            slot.container.reload()
            slot.image_id = str(slot.container.attrs["Image"])
            baseline = self._processes(slot)
            slot.baseline_pids = frozenset(baseline.processes)
            slot.limit_hits = baseline.limit_hits
        except _LISTING_ERRORS as exc:
            _drop_container(slot)
            msg = f"cannot start a sandbox container from image {self.image!r}: {exc}"
            raise SandboxError(msg) from exc
        notes.append(
            f"started container {slot.container.short_id} for {slot.key} "
            f"in {time.monotonic() - started:.2f} s"
        )

    def _container_options(self, slot: _Slot) -> dict[str, Any]:
        assert slot.pool_dir is not None
        volumes = {h: {"bind": c, "mode": "ro"} for h, c in self.extra_mounts.items()}
        volumes[str(slot.pool_dir)] = {"bind": EVAL_MOUNT, "mode": "rw"}
        for host_path, target in self._account_files(slot).items():
            volumes[host_path] = {"bind": target, "mode": "ro"}
        if slot.problem_dir is not None:
            volumes[str(Path(slot.problem_dir).resolve())] = {"bind": PROBLEM_MOUNT, "mode": "ro"}
        options: dict[str, Any] = {
            "image": self.image,
            "command": ["sleep", "infinity"],
            "detach": True,
            "init": True,  # reaps orphans, so leftovers are visible and zombies never pile up
            "name": f"kernelarc-sandbox-{slot.key.replace(':', '')}-{uuid.uuid4().hex[:8]}",
            "labels": {
                "kernelarc.sandbox": slot.key,
                "kernelarc.host_pid": str(os.getpid()),
                HOST_OWNER: host_owner(self._pool_root),
                OWNER: self._owner,
            },
            "network_mode": "bridge" if self.network else "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_size_mb}m,mode=1777"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": self.pids_limit,
            "ulimits": self._ulimits(),
            "user": self.user,
            "working_dir": EVAL_MOUNT,
            "volumes": volumes,
        }
        if self.memory_limit_gb is not None:
            limit = int(self.memory_limit_gb * 1024) * 1024**2
            options.update(mem_limit=limit, memswap_limit=limit)
            slot.memory_bytes = limit
        if self.cpus is not None:
            options["nano_cpus"] = int(self.cpus * 1e9)
        if slot.key.startswith("cuda:"):
            options["device_requests"] = [
                DeviceRequest(device_ids=[str(self.gpu)], capabilities=[["gpu"]])
            ]
        return options

    def _make_cache_dir(self, pool_dir: Path, user: str) -> None:
        """The numeric user's compile cache dir in the pool dir, its own (mode 0700)."""
        numeric = _numeric(user)
        if numeric is not None:
            give_to(identity_folder(pool_dir / CACHE_DIR, *numeric), *numeric)

    def _trim_cache(self, slot: _Slot, user: str) -> None:
        """Empty the user's cache dir if it grew too big (its runner has ended; the spare
        beside it, if any, is the other user)."""
        numeric = _numeric(user)
        if numeric is not None and slot.pool_dir is not None:
            trim(identity_folder(slot.pool_dir / CACHE_DIR, *numeric), self.cache_limit_bytes)

    def _read_image_databases(self) -> tuple[str, str] | None:
        """The image's /etc/passwd and /etc/group (read once, from a container created and
        removed without ever starting), or None when they cannot be read."""
        if self._image_databases is not None:
            return self._image_databases
        texts: list[str] = []
        container: Any = None
        try:
            # Labelled as pool containers are, so a killed host's sweep removes it too.
            labels = {HOST_OWNER: host_owner(self._pool_root), OWNER: self._owner}
            container = self._client.containers.create(self.image, command=["true"], labels=labels)
            for path in ("/etc/passwd", "/etc/group"):
                try:
                    chunks, _ = container.get_archive(path)
                except docker.errors.NotFound:
                    texts.append("")
                    continue
                with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                    member = tar.next()
                    handle = tar.extractfile(member) if member is not None else None
                    texts.append(handle.read().decode("utf-8", "replace") if handle else "")
        except (*_DOCKER_ERRORS, tarfile.TarError) as exc:  # OSError: also the host lock
            logger.warning("cannot read the accounts of image %s: %s", self.image, exc)
            return None
        finally:
            if container is not None:
                _remove_container(container)
        self._image_databases = (texts[0], texts[1])
        return self._image_databases

    def _account_files(self, slot: _Slot) -> dict[str, str]:
        """Host file -> container path of the passwd/group copies that give every numeric
        runner user an entry (none when the image has them all, or cannot be read); fills
        `slot.accounts` either way (USER/LOGNAME need only the name)."""
        assert slot.pool_dir is not None
        users = {u: n for u in self._users if (n := _numeric(u)) is not None}
        databases = self._read_image_databases() if users else None
        passwd, group = databases if databases is not None else ("", "")
        slot.accounts = {u: account_in(passwd, group, *n, EVAL_MOUNT) for u, n in users.items()}
        passwd_lines = [line for a in slot.accounts.values() for line in a.passwd_lines]
        group_lines = [line for a in slot.accounts.values() for line in a.group_lines]
        if databases is None or not (passwd_lines or group_lines):
            return {}
        folder = slot.pool_dir / ACCOUNTS_DIR
        try:
            folder.mkdir(mode=0o755)
            files = {}
            wanted = (("passwd", passwd, passwd_lines), ("group", group, group_lines))
            for name, text, lines in wanted:
                host_file = folder / name
                host_file.write_text(with_lines(text, lines), encoding="utf-8")
                host_file.chmod(0o644)
                files[str(host_file)] = f"/etc/{name}"
        except OSError as exc:
            logger.warning("cannot write the runner accounts for %s: %s", slot.key, exc)
            return {}
        return files

    def _ulimits(self) -> list[Ulimit]:
        limits = [Ulimit(name="core", soft=0, hard=0)]
        if self.max_file_size_bytes is not None:
            size = self.max_file_size_bytes
            limits.append(Ulimit(name="fsize", soft=size, hard=size))
        return limits

    def _exec_env(self, slot: _Slot, workdir: str, device: str, user: str) -> dict[str, str]:
        """The runner's environment: its dirs, its account's name, its identity's caches."""
        numeric = _numeric(user)
        cache = f"{workdir}/cache"
        if numeric is not None:
            cache = f"{EVAL_MOUNT}/{CACHE_DIR}/{numeric[0]}-{numeric[1]}"
        env = {
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            **cache_env(cache),
        }
        account = slot.accounts.get(user)
        if account is not None:
            env.update(account_env(account))
        elif numeric is None:  # a name: the image has its entry (docker resolved it there)
            name = user.partition(":")[0]
            env.update(USER=name, LOGNAME=name)
        if device != "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ""  # the cuda slot's one GPU is its device 0
        env.update(self.extra_env)
        return env

    def _start_runner(
        self, slot: _Slot, device: str, user: str, *, keep_container: bool = False
    ) -> _Runner:
        """Exec a runner as `user` in a fresh eval dir (its own) of the slot's container; it
        imports torch, then waits for `go` on the attached stdin.

        Raises:
            SandboxError: the dir or the exec failed (the container is dropped unless
                `keep_container`: gone or broken, the next evaluation starts a fresh one).
        """
        assert slot.pool_dir is not None
        name = uuid.uuid4().hex
        self._make_eval_dir(slot.pool_dir / name, user)
        self._make_cache_dir(slot.pool_dir, user)
        workdir = f"{EVAL_MOUNT}/{name}"
        command = [self.python, "-P", "-m", "kernelarc.runner", "--device", device]
        command += ["request.json", "result.json"]
        api = self._client.api
        try:
            exec_id = api.exec_create(
                slot.container.id,
                command,
                stdin=True,
                user=user,
                workdir=workdir,
                environment=self._exec_env(slot, workdir, device, user),
            )["Id"]
            raw = api.exec_start(exec_id, socket=True)
        except _DOCKER_ERRORS as exc:
            msg = f"cannot exec the runner in container {slot.container.short_id}: {exc}"
            if keep_container:
                shutil.rmtree(slot.pool_dir / name, ignore_errors=True)
            else:
                _drop_container(slot)
            raise SandboxError(msg) from exc
        slot.last_user = user
        return _Runner(exec_id, raw, getattr(raw, "_sock", raw), name, device, user)

    def _run(self, slot: _Slot, runner: _Runner, timeout_s: float, key: bytes) -> _ExecRun:
        """Send `go <timeout>` and the key, then read the runner's output until it ends."""
        started = time.monotonic()
        stream = AttachStream()
        try:
            runner.conn.sendall(go_line(timeout_s) + key.hex().encode("ascii") + b"\n")
        except OSError as exc:  # the runner died at once; its missing result says the rest
            logger.warning("cannot give the runner its go line and key: %s", exc)
        ended = pump_until(runner.conn, stream, started + timeout_s + HOST_GRACE_S)
        exit_code = self._exit_code(runner.exec_id) if ended else None
        elapsed = time.monotonic() - started
        timed_out = not ended or (exit_code in (124, 137) and elapsed >= timeout_s)
        return _ExecRun(exit_code=exit_code, timed_out=timed_out, log_tail=stream.log())

    def _exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + 5.0
        while True:
            try:
                info = self._client.api.exec_inspect(exec_id)
            except _DOCKER_ERRORS as exc:
                logger.warning("cannot inspect exec %s: %s", exec_id[:12], exc)
                return None
            if not info.get("Running") or time.monotonic() > deadline:
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.02)


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
