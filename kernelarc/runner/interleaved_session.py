"""The judge's side of the interleaved timing (`interleaved.py`): it times the reference blocks
itself and asks the solution worker for the solution blocks, alternating in ABBA order.

Place in the flow: `evaluate.py` calls `time_interleaved` after the official timing of both
sides. The solution never runs in the judge: a solution block is a `time_block` request to the
worker, which answers with its samples while the judge waits (the two processes never time at
once). Both sides use the clock the worker's official timing used, the same L2 flush, block
sizes and core (`TimingConfig.timing_core`), and a shifting input pool made once per workload
for every call of the stage. A failed block (either side, or clocks that differ) ends the stage
without an interval and says why; the official numbers and the verdict stand. Tampering seen in
a worker reply is checked by the caller's `check` (REWARD_HACK there).
"""

from collections.abc import Callable

from kernelarc.runner.channel import WorkerReply
from kernelarc.runner.inputs import Value
from kernelarc.runner.interleaved import (
    Side,
    SpeedupInterval,
    block_budget_s,
    block_calls,
    interleaved_calls,
    run_blocks,
)
from kernelarc.runner.judge_state import Judge
from kernelarc.runner.memory_pool import ShiftingInputPool
from kernelarc.runner.outcome import exception_log
from kernelarc.runner.timing import measure_latency
from kernelarc.runner.worker_client import WorkerClient


class BlockFailed(Exception):
    """One block could not be timed as asked; the stage ends without an interval."""


def time_interleaved(
    judge: Judge,
    worker: WorkerClient,
    inputs: list[Value],
    clock: str,
    check: Callable[[WorkerReply], None],
) -> tuple[SpeedupInterval | None, str]:
    """The interval, or None and a note saying why there is none.

    Raises what `check` raises, and the worker client's WorkerDied / WorkerTimedOut.
    """
    config = judge.request.timing
    if not (config.interleave and config.time_reference):
        return None, ""
    pool = ShiftingInputPool(inputs, [], interleaved_calls(config))

    def time_block(side: Side, pair: int) -> list[float]:
        if side == "solution":
            reply = worker.time_block(config, clock, first=pair == 0)
            check(reply)
            if reply.error:
                raise BlockFailed(reply.error)
            samples, used = list(reply.samples_ms), reply.timing_method
        else:
            try:
                measured = measure_latency(
                    judge.reference,
                    pool.next_args,
                    device=judge.request.device,
                    warmup=config.block_warmup,
                    iterations=block_calls(config),
                    flush_l2=config.flush_l2,
                    method=clock,
                    budget_s=block_budget_s(config),
                    core=config.timing_core,
                )
            except Exception:
                raise BlockFailed(exception_log("timing a reference block failed")) from None
            samples, used = measured.samples_ms, measured.method
        if used != clock:
            why = f"the {side} block was timed with {used!r}, not {clock!r}"
            raise BlockFailed(why)
        if not samples:
            why = f"the {side} block returned no samples"
            raise BlockFailed(why)
        return samples

    try:
        return run_blocks(time_block, config, clock), ""
    except BlockFailed as exc:
        return None, f"interleaved timing skipped, no speedup interval: {exc}"
