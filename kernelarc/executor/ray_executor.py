"""RayExecutor: evaluations as calls on Ray actors, each owning a warm sandbox (the only module
that imports ray).

Timed actors reserve one GPU each (`num_gpus=1`; on the CPU `num_cpus=1`), correctness actors a
share of the GPUs held back for them, so Ray's own resource accounting keeps timed evaluations
off each other's GPUs. Requests and results cross as JSON. When an actor or its node dies
mid-evaluation (or the call outlives its timeout), the actor is replaced and the evaluation is
run again, at most `executor.ray.max_retries` times: the campaign loop gets one result or one
SandboxError for one evaluation, so an attempt is never lost and never counted twice.
"""

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray
import ray.exceptions

from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.errors import ConfigError, KernelarcError, SandboxError
from kernelarc.executor.accounting import eval_timing
from kernelarc.executor.pooled import Pool, PooledExecutor, Turn, check_admission
from kernelarc.executor.slot_plan import plan_actors
from kernelarc.executor.turn_order import GUARD_PRIORITY, Priority, TurnOrder
from kernelarc.sandboxes import make_sandbox
from kernelarc.schema import EvalRequest, EvalResult

logger = logging.getLogger(__name__)

#: Seconds past the sandbox's own timeout before a silent actor counts as lost.
RESULT_GRACE_S = 60.0
#: A call that ended this way lost its actor (or node): replace the actor and run it again.
ACTOR_LOST = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.GetTimeoutError,
)


class EvalActor:
    """Ray actor body: one warm sandbox, pinned to the GPU Ray assigned to this actor."""

    def __init__(self, sandbox_kind: str, sandbox_options: dict[str, Any], device: str) -> None:
        """Build the sandbox (on CUDA pinned to `ray.get_gpu_ids()[0]`, a physical index)."""
        options = dict(sandbox_options)
        self.gpu: int | None = None
        if device == "cuda":
            ids = ray.get_gpu_ids()
            if ids:
                self.gpu = int(ids[0])
                options["gpu"] = self.gpu
        self.sandbox = make_sandbox(sandbox_kind, **options)
        self.device = device

    def prepare(self, timeout_s: float, problem_dir: str | None) -> None:
        """Start the sandbox's spare runner (and container) now (`Sandbox.prepare`)."""
        self.sandbox.prepare(self.device, timeout_s, problem_dir)

    def describe(self) -> dict[str, Any]:
        """Where this actor runs: pid, node address and GPU."""
        node: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return {"pid": os.getpid(), "node": node, "gpu": self.gpu}

    def evaluate(self, request_json: str, timeout_s: float) -> tuple[str, str]:
        """(`ok`, EvalResult JSON) or (`error`, message) when the sandbox itself failed."""
        request = EvalRequest.model_validate_json(request_json)
        try:
            result = self.sandbox.evaluate(request, timeout_s=timeout_s)
        except KernelarcError as exc:
            return "error", f"{type(exc).__name__}: {exc}"
        return "ok", result.model_dump_json()

    def close(self) -> None:
        """Release the sandbox (its spare runner, a Docker pool's container); an actor killed
        instead takes its spare along (its parent-death signal, EOF on its stdin)."""
        self.sandbox.close()


@dataclass
class _Actor:
    handle: Any
    pid: int
    node: str
    gpu: int | None


class _ActorPool:
    """Actors of one pool; a member whose replacement cannot be placed is retired."""

    def __init__(
        self,
        name: str,
        size: int,
        options: dict[str, Any],
        args: tuple[Any, ...],
        startup_timeout_s: float,
    ) -> None:
        self.name = name
        self._options = options
        self._args = args
        self._startup_timeout_s = startup_timeout_s
        self._cond = threading.Condition()
        self._turns = TurnOrder(self._cond)
        self._idle: list[_Actor] = []
        self._prepare: tuple[float, str | None] | None = None
        """`EvalActor.prepare`'s arguments once the executor was prepared (replacements too)."""
        self.members: list[_Actor] = []
        started = self._start(size)
        self.members.extend(started)
        self._idle.extend(started)

    def _start(self, count: int) -> list[_Actor]:
        if count == 0:
            return []
        remote: Any = ray.remote(EvalActor)
        remote = remote.options(**self._options)
        handles: list[Any] = [remote.remote(*self._args) for _ in range(count)]
        try:
            infos = ray.get([h.describe.remote() for h in handles], timeout=self._startup_timeout_s)
        except ray.exceptions.GetTimeoutError as exc:
            for handle in handles:
                ray.kill(handle, no_restart=True)
            msg = (
                f"{count} {self.name} actor(s) with {self._options} were not placed within "
                f"{self._startup_timeout_s:g} s (cluster: {_available()}); free or "
                "add resources, or raise executor.ray.startup_timeout_s"
            )
            raise SandboxError(msg) from exc
        except ray.exceptions.RayError as exc:
            for handle in handles:
                ray.kill(handle, no_restart=True)
            msg = f"{self.name} actors failed to start: {exc}"
            raise SandboxError(msg) from exc
        pairs = zip(handles, infos, strict=True)
        return [_Actor(h, i["pid"], i["node"], i["gpu"]) for h, i in pairs]

    def acquire(self, priority: Priority = GUARD_PRIORITY) -> _Actor:
        """An idle actor, once every waiter before this one (`TurnOrder`) was served."""
        with self._cond:
            self._turns.wait_turn(priority, lambda: bool(self._idle) or not self.members)
            if not self.members:
                msg = f"every {self.name} actor was lost and none could be replaced"
                raise SandboxError(msg)
            return self._idle.pop()

    def release(self, actor: _Actor) -> None:
        with self._cond:
            if actor in self.members:
                self._idle.append(actor)
            self._cond.notify_all()

    def replace(self, actor: _Actor) -> _Actor:
        """Kill `actor` (if still alive) and start a fresh one in its place.

        Raises:
            SandboxError: the new actor could not be placed; `actor` is retired from the pool.
        """
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(actor.handle, no_restart=True)
        try:
            fresh = self._start(1)[0]
        except SandboxError:
            with self._cond:
                self.members.remove(actor)
                self._cond.notify_all()
            raise
        if self._prepare is not None:  # queued before the evaluation that comes next
            fresh.handle.prepare.remote(*self._prepare)
        with self._cond:
            self.members[self.members.index(actor)] = fresh
        logger.info(
            "replaced %s actor pid %d on %s with pid %d on %s (gpu %s)",
            self.name,
            actor.pid,
            actor.node,
            fresh.pid,
            fresh.node,
            fresh.gpu,
        )
        return fresh

    def prepare(self, timeout_s: float, problem_dir: str | None) -> None:
        """Prepare every member's sandbox now, and every replacement's when it starts."""
        self._prepare = (timeout_s, problem_dir)
        calls = [a.handle.prepare.remote(timeout_s, problem_dir) for a in self.members]
        try:
            ray.get(calls, timeout=self._startup_timeout_s)
        except ray.exceptions.RayError as exc:  # a lost actor is replaced by its next evaluation
            logger.warning("cannot prepare the %s actors' sandboxes: %s", self.name, exc)

    def close(self) -> None:
        for actor in self.members:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(actor.handle.close.remote(), timeout=30)
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.kill(actor.handle, no_restart=True)
        self.members.clear()


class RayExecutor(PooledExecutor):
    """Timed and correctness pools of EvalActors on a Ray instance or cluster."""

    def __init__(
        self,
        cfg: ExecutorConfig,
        sandbox: SandboxConfig,
        requested_device: str,
        max_timed: int | None,
    ) -> None:
        """Join or start Ray, plan the actors from the cluster's resources and start them.

        The cluster's GPUs, not this machine's, decide what `auto` means.

        Raises:
            ConfigError: the cluster has too few GPUs/CPUs, or device=cuda and it has no GPU.
            SandboxError: no Ray cluster at the address, or the actors cannot be placed.
        """
        self._max_retries = cfg.ray.max_retries
        self._started_ray = _connect(cfg)
        try:
            resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
            gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
            device = _cluster_device(requested_device, gpus)
            plan = plan_actors(
                device,
                gpus,
                cpus,
                cfg.ray.timed_actors,
                len(cfg.correctness_gpus),
                cfg.correctness_slots,
                max_timed,
            )
            super().__init__("ray", device, plan.timed, plan.correctness, cfg.screen)
            args = (sandbox.kind, sandbox.options(), device)
            timed_options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0}
            check_options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0}
            if device == "cuda":
                timed_options["num_gpus"] = 1
                check_options["num_gpus"] = plan.correctness_gpu_share
            self._pools: dict[Pool, _ActorPool] = {}
            timeout = cfg.ray.startup_timeout_s
            self._pools["timed"] = _ActorPool("timed", plan.timed, timed_options, args, timeout)
            self._pools["correctness"] = _ActorPool(
                "correctness", plan.correctness, check_options, args, timeout
            )
        except BaseException:
            self.close()
            raise
        logger.info(
            "executor ray on %s: %d GPUs, %d CPUs; timed actors %s, correctness actors %s",
            device,
            gpus,
            cpus,
            [(a.node, a.pid, a.gpu) for a in self._pools["timed"].members],
            [(a.node, a.pid, a.gpu) for a in self._pools["correctness"].members],
        )

    def actors(self, pool: Pool) -> list[tuple[int, str, int | None]]:
        """(pid, node, gpu) of each live actor of `pool` (for logs and diagnostics)."""
        return [(a.pid, a.node, a.gpu) for a in self._pools[pool].members]

    def _run(
        self,
        pool: Pool,
        request: EvalRequest,
        timeout_s: float,
        stage: str,
        turn: Turn | None = None,
    ) -> EvalResult:
        turn = turn or Turn()
        actors = self._pools[pool]
        payload = request.model_dump_json()
        submitted = time.monotonic()
        actor = actors.acquire(turn.priority)
        check_admission(turn.admit, lambda: actors.release(actor))
        started = time.monotonic()
        retries = 0
        result: EvalResult | None = None
        try:
            while True:
                try:
                    call = actor.handle.evaluate.remote(payload, timeout_s)
                    status, body = ray.get(call, timeout=timeout_s + RESULT_GRACE_S)
                except ACTOR_LOST as exc:
                    logger.warning(
                        "%s actor pid %d on %s lost during an evaluation (%s); infrastructure "
                        "retry %d of %d on a fresh actor",
                        pool,
                        actor.pid,
                        actor.node,
                        type(exc).__name__,
                        retries + 1,
                        self._max_retries,
                    )
                    actor = actors.replace(actor)
                    retries += 1
                    if retries > self._max_retries:
                        msg = (
                            f"{pool} evaluation lost its actor {retries} times (last: "
                            f"{type(exc).__name__}); giving up (executor.ray.max_retries)"
                        )
                        raise SandboxError(msg) from exc
                    continue
                except ray.exceptions.RayError as exc:
                    msg = f"{pool} actor pid {actor.pid} failed: {exc}"
                    raise SandboxError(msg) from exc
                if status != "ok":
                    raise SandboxError(body)
                result = EvalResult.model_validate_json(body)
                return result
        finally:
            actors.release(actor)
            self.meter.record(
                eval_timing(
                    pool,
                    stage,
                    queue_wait_s=started - submitted,
                    slot_s=time.monotonic() - started,
                    result=result,
                    retries=retries,
                )
            )

    def prepare(self, *, timeout_s: float, problem_dir: str | None) -> None:
        """Start every actor's spare runner (and Docker container) now; a replacement actor
        is prepared the same way when it starts."""
        for pool in self._pools.values():
            pool.prepare(timeout_s, problem_dir)

    def close(self) -> None:
        """Stop the actors, and the Ray instance if this executor started it."""
        for pool in getattr(self, "_pools", {}).values():
            pool.close()
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False


def _connect(cfg: ExecutorConfig) -> bool:
    """Start or join Ray; True if this call initialized it (so close() shuts it down)."""
    if ray.is_initialized():
        return False
    common: dict[str, Any] = {
        "namespace": cfg.ray.namespace,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }
    try:
        if cfg.ray.address == "local":
            ray.init(
                address="local",
                num_cpus=cfg.ray.num_cpus,
                num_gpus=cfg.ray.num_gpus,
                include_dashboard=False,
                **common,
            )
        else:
            ray.init(address=cfg.ray.address, **common)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        msg = (
            f"executor.ray.address={cfg.ray.address}: cannot start or join Ray ({exc}); start a "
            "cluster with `ray start --head` (then address=auto) or use address=local"
        )
        raise SandboxError(msg) from exc
    return True


def _cluster_device(requested: str, cluster_gpus: int) -> str:
    """`auto` is cuda iff the cluster has GPUs; `cuda` on a cluster without GPUs is an error."""
    if requested == "cuda" and cluster_gpus == 0:
        msg = "device=cuda but the Ray cluster has no GPU; use device=cpu or auto"
        raise ConfigError(msg)
    if requested == "auto":
        return "cuda" if cluster_gpus > 0 else "cpu"
    return requested


def _available() -> dict[str, float]:
    """The cluster's free resources, for error messages."""
    free: dict[str, float] = ray.available_resources()  # type: ignore[no-untyped-call]
    return free
