"""The Docker sandbox's pool containers: their options, start, memory limit and removal.

Place in the flow: `DockerSandbox.evaluate` (and `prepare`) call `ContainerPool.ensure` for the
device slot, then `fit_memory` for the request. A pool container runs `sleep infinity` under
docker's init: no network, read-only root, a tmpfs /tmp, no capabilities, no-new-privileges,
pids/memory/CPU limits, RLIMIT_FSIZE, a non-root user; the problem dir is mounted read-only at
PROBLEM_MOUNT, the slot's pool dir (named for the host process, `owned_dirs.py`) read-write at
EVAL_MOUNT, the runner users' passwd/group copies (`accounts.py`) read-only over the image's.
Its processes are listed once at its start (`processes.py`: the baseline). A container is
started again for another problem dir, and dropped (`drop_container`) when an evaluation says
it cannot be trusted; `remove_all` is the sandbox's `close()` and exit finalizer, and
`remove_dead_hosts_containers` what a new sandbox's sweep removes of a killed host's.
"""

import contextlib
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest, Ulimit

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.docker.accounts import account_files, image_databases, numeric
from kernelarc.sandboxes.docker.engine import (
    DOCKER_ERRORS,
    EVAL_MOUNT,
    HOST_OWNER,
    OWNER,
    PROBLEM_MOUNT,
    remove_container,
)
from kernelarc.sandboxes.docker.processes import LISTING_ERRORS, list_processes
from kernelarc.sandboxes.docker.slot import Slot
from kernelarc.sandboxes.memory_need import GIB
from kernelarc.sandboxes.owned_dirs import host_owner, make_owned_dir
from kernelarc.sandboxes.request_limits import memory_limits
from kernelarc.schema import EvalRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContainerSpec:
    """What every pool container of one DockerSandbox is started with (its options)."""

    image: str
    gpu: int
    memory_limit_gb: float | None
    pids_limit: int
    cpus: float | None
    network: bool
    user: str
    users: tuple[str, ...]
    """The users runners alternate between (`accounts.runner_users`)."""
    python: str
    tmpfs_size_mb: int
    max_file_size_bytes: int | None
    extra_mounts: dict[str, str]
    pool_root: Path
    owner: str
    """The sandbox's `OWNER` label value."""


class ContainerPool:
    """Starts, resizes and drops the pool containers of one DockerSandbox's slots."""

    def __init__(self, client: Any, spec: ContainerSpec) -> None:
        """Containers on `client`'s engine, as `spec` says."""
        self.client = client
        self.spec = spec
        self._image_databases: tuple[str, str] | None = None
        self._engine_memory: int | None = None

    def ensure(self, slot: Slot, problem_dir: str | None, notes: list[str]) -> None:
        """The slot's container, mounting `problem_dir`: kept when it already does, else
        started (replacing one of another problem dir); notes say so.

        Raises:
            SandboxError: the pool dir or the container cannot be made, or its processes
                cannot be listed (it is dropped then).
        """
        if slot.container is not None and slot.problem_dir == problem_dir:
            return
        if slot.container is not None:
            notes.append("container replaced: the problem dir changed")
            drop_container(slot)
        started = time.monotonic()
        pool_root = self.spec.pool_root
        try:
            slot.pool_dir = make_owned_dir("pool", pool_root)  # swept if the host is killed
        except OSError as exc:
            msg = f"cannot create the sandbox pool dir in {pool_root}: {exc}"
            raise SandboxError(msg) from exc
        slot.pool_dir.chmod(0o711)  # the container user enters its own eval dir, lists nothing
        slot.problem_dir = problem_dir
        try:
            slot.container = self.client.containers.run(**self._options(slot))
            slot.container.reload()
            slot.image_id = str(slot.container.attrs["Image"])
            baseline = list_processes(self.client.api, slot.container, self.spec.python)
            slot.baseline_pids = frozenset(baseline.processes)
            slot.limit_hits = baseline.limit_hits
        except LISTING_ERRORS as exc:
            drop_container(slot)
            msg = f"cannot start a sandbox container from image {self.spec.image!r}: {exc}"
            raise SandboxError(msg) from exc
        notes.append(
            f"started container {slot.container.short_id} for {slot.key} "
            f"in {time.monotonic() - started:.2f} s"
        )

    def fit_memory(self, slot: Slot, request: EvalRequest, notes: list[str]) -> None:
        """Raise the container's memory limit to what the request's judge and worker hold
        together beyond `memory_limit_gb` (memory_need.py), at most the engine host's memory.

        Raises:
            SandboxError: the reference alone needs more than the engine host has, or the
                engine refused the new limit.
        """
        if self.spec.memory_limit_gb is None or slot.memory_bytes is None:
            return
        if self._engine_memory is None:
            with contextlib.suppress(*DOCKER_ERRORS, KeyError, TypeError, ValueError):
                self._engine_memory = int(self.client.info()["MemTotal"])
        base = int(self.spec.memory_limit_gb * GIB)
        ceiling = max(self._engine_memory, base) if self._engine_memory else None
        wanted = memory_limits(
            request, base, ceiling, "the Docker engine host's memory"
        ).container_bytes
        if wanted <= slot.memory_bytes:
            return
        try:
            slot.container.update(mem_limit=wanted, memswap_limit=wanted)
        except DOCKER_ERRORS as exc:
            msg = f"cannot raise container {slot.container.short_id}'s memory limit: {exc}"
            raise SandboxError(msg) from exc
        notes.append(
            f"container memory limit raised from {slot.memory_bytes / GIB:.3g} to "
            f"{wanted / GIB:.3g} GiB for the problem's data"
        )
        slot.memory_bytes = wanted

    def remove_dead_hosts_containers(self, owner: str) -> bool:
        """Remove the containers a dead host process `owner` left on this engine (called by
        the sweep of its pool dirs); False, keeping its dirs for a later sweep, when the
        engine cannot list them."""
        try:
            found = self.client.containers.list(
                all=True, filters={"label": f"{HOST_OWNER}={owner}"}
            )
        except DOCKER_ERRORS as exc:
            logger.warning("cannot list the containers of dead host %s: %s", owner, exc)
            return False
        for container in found:
            logger.info("removing container %s of dead host %s", container.short_id, owner)
            remove_container(container)
        return True

    def _options(self, slot: Slot) -> dict[str, Any]:
        spec = self.spec
        assert slot.pool_dir is not None
        volumes = {h: {"bind": c, "mode": "ro"} for h, c in spec.extra_mounts.items()}
        volumes[str(slot.pool_dir)] = {"bind": EVAL_MOUNT, "mode": "rw"}
        for host_path, target in self._account_files(slot).items():
            volumes[host_path] = {"bind": target, "mode": "ro"}
        if slot.problem_dir is not None:
            volumes[str(Path(slot.problem_dir).resolve())] = {"bind": PROBLEM_MOUNT, "mode": "ro"}
        options: dict[str, Any] = {
            "image": spec.image,
            "command": ["sleep", "infinity"],
            "detach": True,
            "init": True,  # reaps orphans, so leftovers are visible and zombies never pile up
            "name": f"kernelarc-sandbox-{slot.key.replace(':', '')}-{uuid.uuid4().hex[:8]}",
            "labels": {
                "kernelarc.sandbox": slot.key,
                "kernelarc.host_pid": str(os.getpid()),
                HOST_OWNER: host_owner(spec.pool_root),
                OWNER: spec.owner,
            },
            "network_mode": "bridge" if spec.network else "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_size_mb}m,mode=1777"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": spec.pids_limit,
            "ulimits": self._ulimits(),
            "user": spec.user,
            "working_dir": EVAL_MOUNT,
            "volumes": volumes,
        }
        if spec.memory_limit_gb is not None:
            limit = int(spec.memory_limit_gb * 1024) * 1024**2
            options.update(mem_limit=limit, memswap_limit=limit)
            slot.memory_bytes = limit
        if spec.cpus is not None:
            options["nano_cpus"] = int(spec.cpus * 1e9)
        if slot.key.startswith("cuda:"):
            options["device_requests"] = [
                DeviceRequest(device_ids=[str(spec.gpu)], capabilities=[["gpu"]])
            ]
        return options

    def _ulimits(self) -> list[Ulimit]:
        limits = [Ulimit(name="core", soft=0, hard=0)]
        if self.spec.max_file_size_bytes is not None:
            size = self.spec.max_file_size_bytes
            limits.append(Ulimit(name="fsize", soft=size, hard=size))
        return limits

    def _account_files(self, slot: Slot) -> dict[str, str]:
        """Host file -> container path of the passwd/group copies that give every numeric
        runner user an entry (none when the image has them all, or cannot be read); fills
        `slot.accounts` either way (USER/LOGNAME need only the name)."""
        assert slot.pool_dir is not None
        users = {u: n for u in self.spec.users if (n := numeric(u)) is not None}
        databases = self._databases() if users else None
        slot.accounts, files = account_files(slot.pool_dir, slot.key, users, databases)
        return files

    def _databases(self) -> tuple[str, str] | None:
        """The image's /etc/passwd and /etc/group, read once (None when they cannot be)."""
        if self._image_databases is None:
            # Labelled as pool containers are, so a killed host's sweep removes it too.
            labels = {HOST_OWNER: host_owner(self.spec.pool_root), OWNER: self.spec.owner}
            self._image_databases = image_databases(self.client, self.spec.image, labels)
        return self._image_databases


def drop_container(slot: Slot) -> None:
    """Remove the slot's container, its spare and its pool dir; the slot is cold again."""
    container, pool_dir, spare = slot.container, slot.pool_dir, slot.spare
    slot.container, slot.pool_dir, slot.baseline_pids = None, None, frozenset()
    slot.limit_hits = None
    slot.memory_bytes = None
    slot.spare = None
    if spare is not None:
        spare.close()
    if container is not None:
        remove_container(container)
    if pool_dir is not None:
        shutil.rmtree(pool_dir, ignore_errors=True)


def remove_all(client: Any, slots: dict[str, Slot], owner: str) -> None:
    """Remove every pool container and its eval dir (close() and the exit finalizer), then any
    container of this sandbox an earlier removal left behind (found by its `owner` label)."""
    for slot in slots.values():
        drop_container(slot)
    with contextlib.suppress(*DOCKER_ERRORS):
        for container in client.containers.list(all=True, filters={"label": f"{OWNER}={owner}"}):
            remove_container(container)
    with contextlib.suppress(*DOCKER_ERRORS):
        client.close()
