"""LocalExecutor: sandboxes on this machine, one per slot, in a timed and a correctness pool.

Each slot owns its own sandbox pinned to its GPU (a Docker sandbox keeps its warm container per
slot), so timed evaluations never share a GPU and a screen never waits behind timing. Where
correctness slots share a device with a timed slot (the CPU; a GPU without dedicated correctness
GPUs), a `DeviceGate` keeps screens off the device while the guard times there, and a
candidate's timed run that had screens beside it says so in its sandbox notes.
"""

import logging
import time
from dataclasses import dataclass

from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.executor.accounting import eval_timing
from kernelarc.executor.device_gate import DeviceGate
from kernelarc.executor.pooled import Pool, PooledExecutor, Turn, check_admission
from kernelarc.executor.slot_plan import plan_slots, visible_gpus
from kernelarc.executor.turn_order import SlotQueue
from kernelarc.sandboxes import Sandbox, make_sandbox
from kernelarc.schema import EvalRequest, EvalResult

logger = logging.getLogger(__name__)


def beside_screens_note(screens: int, gpu: int | None) -> str:
    """The sandbox note of a candidate's timed run that `screens` screens ran beside."""
    where = "the CPU" if gpu is None else f"GPU {gpu}"
    return (
        f"timed while {screens} correctness screen(s) of other candidates ran on {where} "
        "(compiling, checking); the guard's re-timing runs alone there"
    )


@dataclass
class _Slot:
    sandbox: Sandbox
    gpu: int | None


class LocalExecutor(PooledExecutor):
    """Slots of local sandboxes; `evaluate` blocks until a slot of the pool is free."""

    def __init__(
        self, cfg: ExecutorConfig, sandbox: SandboxConfig, device: str, max_timed: int | None
    ) -> None:
        """Plan the slots for `device` (already resolved) and build one sandbox per slot.

        Raises:
            ConfigError: GPU lists that do not fit the visible GPUs, bad sandbox options.
            SandboxError: a sandbox cannot start (no Docker engine).
        """
        visible = visible_gpus() if device == "cuda" else []
        plan = plan_slots(
            device,
            visible,
            cfg.gpus,
            cfg.correctness_gpus,
            cfg.correctness_slots,
            max_timed,
            cfg.screens_per_timed_gpu,
        )
        super().__init__("local", device, len(plan.timed), len(plan.correctness), cfg.screen)
        self._all: list[_Slot] = []
        self._pools: dict[Pool, SlotQueue[_Slot]] = {}
        self._gates = {gpu: DeviceGate() for gpu in set(plan.timed) & set(plan.correctness)}
        try:
            for pool, gpus in (("timed", plan.timed), ("correctness", plan.correctness)):
                self._pools[pool] = SlotQueue()
                for gpu in gpus:
                    options = sandbox.options()
                    if gpu is not None:
                        options["gpu"] = gpu
                    slot = _Slot(make_sandbox(sandbox.kind, **options), gpu)
                    self._all.append(slot)
                    self._pools[pool].put(slot)
        except BaseException:
            self.close()
            raise
        logger.info(
            "executor local on %s: timed slots on %s, correctness slots on %s, screen %s",
            device,
            list(plan.timed),
            list(plan.correctness),
            self.screens,
        )

    def _run(
        self,
        pool: Pool,
        request: EvalRequest,
        timeout_s: float,
        stage: str,
        turn: Turn | None = None,
    ) -> EvalResult:
        turn = turn or Turn()
        slots = self._pools[pool]
        submitted = time.monotonic()
        slot = slots.get(turn.priority)
        check_admission(turn.admit, lambda: slots.put(slot))
        started = time.monotonic()
        result: EvalResult | None = None
        gate = self._gates.get(slot.gpu)
        gate_wait_s = 0.0
        beside = 0
        try:
            if gate is None:
                result = slot.sandbox.evaluate(request, timeout_s=timeout_s)
            elif pool == "correctness":
                with gate.shared():
                    gate_wait_s = time.monotonic() - started
                    result = slot.sandbox.evaluate(request, timeout_s=timeout_s)
            elif stage == "guard":
                with gate.exclusive():
                    gate_wait_s = time.monotonic() - started
                    result = slot.sandbox.evaluate(request, timeout_s=timeout_s)
            else:
                with gate.watched() as overlap:
                    result = slot.sandbox.evaluate(request, timeout_s=timeout_s)
                beside = overlap.screens
                result = _noted(result, beside, slot.gpu)
            return result
        finally:
            slots.put(slot)
            self.meter.record(
                eval_timing(
                    pool,
                    stage,
                    queue_wait_s=started - submitted,
                    slot_s=time.monotonic() - started,
                    result=result,
                    gate_wait_s=gate_wait_s,
                    beside_screens=beside,
                )
            )

    def screens_running(self) -> int:
        """Screens holding a device beside a timed slot now."""
        return sum(gate.holders() for gate in self._gates.values())

    def prepare(self, *, timeout_s: float, problem_dir: str | None) -> None:
        """Start every slot's spare runner (and Docker container) now; returns at once."""
        for slot in self._all:
            slot.sandbox.prepare(self.device, timeout_s, problem_dir)

    def close(self) -> None:
        """Close every sandbox (their spare runners, the Docker pool's containers)."""
        for slot in self._all:
            slot.sandbox.close()
        self._all.clear()


def _noted(result: EvalResult, screens: int, gpu: int | None) -> EvalResult:
    if not screens:
        return result
    notes = [*result.sandbox_notes, beside_screens_note(screens, gpu)]
    return result.model_copy(update={"sandbox_notes": notes})
