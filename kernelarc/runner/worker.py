"""The solution worker: the only process that imports and runs candidate code.

Forked from the zygote (`kernelarc.runner.zygote`) before the judge knows its candidate (on
CUDA it creates its CUDA context at once and, while no candidate waits, imports Triton, so a
pre-started worker is ready when the candidate comes), it waits for the judge's `setup` message
(the request as JSON in the blob), installs
the reward-hack probes (`hack_checks`), stages and imports the candidate from `src/`, answers
`ready` (or `import_error`/`compile_error`), then serves the judge's requests until the socket
closes:

- `run` (inputs in the blob): call the candidate once, synchronize, report the output types,
  which inputs it changed and the probes; the outputs go back as a blob;
- `time`: time the candidate on shifted copies of the last `run`'s inputs
  (`memory_pool.ShiftingInputPool`, `timing.measure_latency`) and report the median;
- `time_block`: one block of the interleaved timing (`interleaved.py`): the same, with the
  judge's clock method, on a pool kept across the workload's blocks (every call of the stage at
  its own address), and report the samples.

Nothing here is trusted by the judge for a pass: it recomputes the verdict from the outputs it
receives and checks the reported latency against its own clock.
"""

import logging
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelarc.runner import (
    channel,
    correctness,
    cuda_ipc,
    hack_checks,
    inputs,
    memory_pool,
    timing,
)
from kernelarc.runner.channel import (
    Blob,
    ChannelClosed,
    WorkerReply,
    recv_message,
    send_message,
)
from kernelarc.runner.correctness import OutputFormatError, collect_outputs
from kernelarc.runner.hack_checks import Guards, ThreadMonitor, ban_cpp_extension, same_bits
from kernelarc.runner.inputs import allocate_outputs
from kernelarc.runner.memory_limit import apply_address_space
from kernelarc.runner.memory_pool import ShiftingInputPool
from kernelarc.runner.outcome import cap_log
from kernelarc.runner.result_key import set_dumpable
from kernelarc.runner.staging import BuildError, build_solution, load_entry, write_sources
from kernelarc.runner.worker_warmup import create_cuda_context, preload_triton, setup_waiting
from kernelarc.schema import EvalRequest, Workload
from kernelarc.schema.solution import PYTHON_LANGUAGES

logger = logging.getLogger(__name__)

# Requests come from the judge, which is trusted; inputs can be large (GPU workloads).
_MAX_REQUEST_BLOB = 1 << 40


@dataclass
class _Worker:
    sock: socket.socket
    request: EvalRequest
    monitor: ThreadMonitor
    guards: Guards
    entry: Any = None
    last_inputs: list[Any] = field(default_factory=list)
    last_workload: Workload | None = None
    shared_out: list[Any] = field(default_factory=list)
    """Outputs the judge is reading by IPC: kept alive until its next request."""
    block_pool: ShiftingInputPool | None = None
    """The interleaved blocks' pool for the last run's inputs (made by the first block)."""
    start_times: dict[str, float] = field(default_factory=dict)
    """Where its start went before its candidate came (`context_s`, `idle_s`), for its start
    reply."""
    setup_at: float = 0.0
    """When its `setup` was received (time.monotonic): the start of its reply's `import_s`."""


def worker_main(sock: socket.socket, device: str, root: Path) -> None:
    """Serve one judge connection, then end the process (never returns)."""
    code = 0
    forked = time.monotonic()
    try:
        if device == "cuda":
            create_cuda_context()
        made = time.monotonic()
        if device == "cuda" and not setup_waiting(sock):
            preload_triton()
        # Not dumpable (as forked from the judge) until its candidate comes: a worker forked
        # ahead lives beside the previous candidate, which must not reach into it (ptrace,
        # /proc/PID/mem); its scheduling is watched by the judge (`sched_state.py`).
        request = _receive_setup(sock)
        received = time.monotonic()
        # The request's address-space limit (CPU): forked before it was known (a spare's head
        # start, a worker forked ahead), the worker lowers its own before the candidate loads.
        apply_address_space(request)
        set_dumpable(True)  # the candidate's own /proc/self stays usable; the judge stays closed
        worker = _install(sock, request)
        worker.start_times = {"context_s": made - forked, "idle_s": received - made}
        worker.setup_at = received
        if _start(worker, root):
            _serve(worker)
    except ChannelClosed:
        pass
    except BaseException:  # the worker's own failure; the judge sees a closed socket
        logger.exception("solution worker failed")
        code = 70
    sys.stderr.flush()
    os._exit(code)


def _receive_setup(sock: socket.socket) -> EvalRequest:
    """The judge's first message: `setup`, the request as JSON in the blob.

    Raises:
        ChannelClosed: the judge closed the socket first (a pre-started worker not needed).
    """
    header, blob = recv_message(sock, max_blob=_MAX_REQUEST_BLOB)
    if header.get("kind") != "setup":
        msg = f"expected a setup message, got {header.get('kind')!r}"
        raise ChannelClosed(msg)
    return EvalRequest.model_validate_json(bytes(blob))


def _install(sock: socket.socket, request: EvalRequest) -> _Worker:
    monitor = ThreadMonitor()
    python = bool(set(request.solution.spec.languages) & PYTHON_LANGUAGES)
    if python:
        ban_cpp_extension()
    ours = sys.modules[__name__]
    modules = [ours, channel, correctness, cuda_ipc, hack_checks, inputs, memory_pool, timing]
    guards = Guards(modules, cpp_banned=python)
    return _Worker(sock=sock, request=request, monitor=monitor, guards=guards)


def _reply(worker: _Worker, kind: str, blob: Blob = b"", **fields: Any) -> None:
    if "error" in fields:
        fields["error"] = cap_log(str(fields["error"]))
    reply = WorkerReply.model_validate(
        {
            "kind": kind,
            "tampered": worker.guards.tampered(),
            "threads_started": worker.monitor.started,
            "threads_alive": worker.monitor.alive(),
            **fields,
        }
    )
    send_message(worker.sock, reply.model_dump(mode="json"), blob)


def _start(worker: _Worker, root: Path) -> bool:
    solution = worker.request.solution
    try:
        src = write_sources(solution, root)
        build_solution(solution, src)
        worker.entry = load_entry(solution, src)
    except BuildError as exc:
        _reply(worker, "compile_error", error=str(exc), **_start_times(worker))
        return False
    except BaseException:  # SystemExit at import is a failed import, not a worker exit
        _reply(worker, "import_error", error=traceback.format_exc(), **_start_times(worker))
        return False
    _reply(worker, "ready", **_start_times(worker))
    return True


def _start_times(worker: _Worker) -> dict[str, Any]:
    """The start reply's `context_s`, `idle_s` and `import_s` (seconds, never negative)."""
    times = {**worker.start_times, "import_s": time.monotonic() - worker.setup_at}
    return {k: max(0.0, v) for k, v in times.items()}


def _serve(worker: _Worker) -> None:
    while True:
        header, blob = recv_message(worker.sock, max_blob=_MAX_REQUEST_BLOB)
        worker.shared_out = []  # the judge has copied them before sending anything new
        kind = header.get("kind")
        if kind == "run":
            _handle_run(worker, int(header["workload"]), blob, header.get("shared"))
        elif kind == "time":
            _handle_time(worker, header)
        elif kind == "time_block":
            _handle_time_block(worker, header)
        else:
            return


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _call(worker: _Worker, workload: Workload, args: list[Any]) -> list[Any]:
    req = worker.request
    if req.solution.spec.destination_passing_style:
        outputs: list[Any] = allocate_outputs(req.definition, workload, req.device)
        worker.entry(*args, *outputs)
    else:
        outputs = collect_outputs(worker.entry(*args), req.definition, req.device)
    _sync(req.device)
    return outputs


def _receive_args(worker: _Worker, blob: Blob, shared: Any) -> list[Any] | None:
    """The call's inputs: mapped from the judge's IPC descriptors, or unpacked from the blob."""
    if shared is None:
        return channel.unpack_values(blob, worker.request.device)
    try:
        descs = [cuda_ipc.SharedValue.model_validate(d) for d in shared]
        return cuda_ipc.open_values(descs, copy=False)
    except Exception as exc:  # the judge falls back to sending copies
        _reply(worker, "run", error=f"{type(exc).__name__}: {exc}", ipc_failed=True)
        return None


def _send_outputs(worker: _Worker, outputs: list[Any], shared_in: bool, **fields: Any) -> None:
    """Outputs by IPC when the judge shared the inputs (and they can be shared), else a blob."""
    if shared_in:
        try:
            descs = cuda_ipc.describe(outputs)
        except cuda_ipc.SharingUnavailable:
            pass
        else:
            worker.shared_out = outputs
            _reply(worker, "run", shared=[d.model_dump(mode="json") for d in descs], **fields)
            return
    _reply(worker, "run", channel.pack_values(outputs), **fields)


def _handle_run(worker: _Worker, index: int, blob: Blob, shared: Any = None) -> None:
    req = worker.request
    workload = req.workloads[index]
    args = _receive_args(worker, blob, shared)
    if args is None:
        return
    pristine = _clone(args)
    worker.last_inputs, worker.last_workload = pristine, workload
    worker.block_pool = None
    try:
        outputs = _call(worker, workload, args)
    except OutputFormatError as exc:
        _reply(worker, "run", error=f"solution output: {exc}")
        return
    except BaseException:  # SystemExit/KeyboardInterrupt from the candidate too
        _reply(worker, "run", error=f"solution failed\n{traceback.format_exc()}")
        return
    types = [_type_name(out) for out in outputs]
    if any(type(out) is not torch.Tensor for out in outputs):
        _reply(worker, "run", output_types=types)  # the judge rules; nothing lazy is touched
        return
    wanted = torch.device(req.device).type
    for name, out in zip(req.definition.outputs, outputs, strict=True):
        if out.device.type != wanted:
            message = f"solution output: {name!r} is on {out.device}, expected {req.device}"
            _reply(worker, "run", error=message)
            return
    names = list(req.definition.inputs)
    mutated = [
        name
        for name, before, after in zip(names, pristine, args, strict=True)
        if not same_bits(before, after)
    ]
    _send_outputs(worker, outputs, shared is not None, output_types=types, mutated_inputs=mutated)


def _input_pool(worker: _Worker, workload: Workload, calls: int) -> ShiftingInputPool:
    """Shifted copies of the last run's inputs for `calls` timed or warm-up calls, each at its own
    address, so no call reads what an earlier one left in cache; a destination-passing solution
    also gets its outputs allocated here once, outside the timed calls. Shared by `time` and
    `time_block` so both time the candidate on the same kind of pool."""
    req = worker.request
    outputs = (
        allocate_outputs(req.definition, workload, req.device)
        if req.solution.spec.destination_passing_style
        else []
    )
    return ShiftingInputPool(worker.last_inputs, outputs, calls)


def _measure(
    worker: _Worker,
    pool: ShiftingInputPool,
    header: dict[str, Any],
    *,
    warmup: int,
    iterations: int,
    method: str | None = None,
    core: int | None = None,
) -> timing.LatencySamples:
    """Time the candidate on `pool` with the judge's L2-flush and CPU time-budget settings from
    the request `header`; `time` and `time_block` differ only in what they pass here (the
    block's clock method and timing core; a plain `time` lets `measure_latency` choose)."""
    return timing.measure_latency(
        worker.entry,
        pool.next_args,
        device=worker.request.device,
        warmup=warmup,
        iterations=iterations,
        flush_l2=bool(header["flush_l2"]),
        method=method,
        budget_s=header.get("budget_s"),
        core=core,
    )


def _handle_time(worker: _Worker, header: dict[str, Any]) -> None:
    workload = worker.last_workload
    if workload is None:
        _reply(worker, "time", error="timing requested before any run")
        return
    warmup, iterations = int(header["warmup"]), int(header["iterations"])
    try:
        pool = _input_pool(worker, workload, warmup + iterations)
        measured = _measure(worker, pool, header, warmup=warmup, iterations=iterations)
    except BaseException:
        _reply(worker, "time", error=f"timing the solution failed\n{traceback.format_exc()}")
        return
    _reply(
        worker,
        "time",
        latency_ms=measured.median_ms,
        timing_method=measured.method,
        timing_note=measured.note,
    )


def _handle_time_block(worker: _Worker, header: dict[str, Any]) -> None:
    workload = worker.last_workload
    if workload is None:
        _reply(worker, "time_block", error="timing requested before any run")
        return
    warmup, calls = int(header["warmup"]), int(header["calls"])
    try:
        if worker.block_pool is None or bool(header["first"]):
            worker.block_pool = None  # the previous pool's memory goes before the new one's
            worker.block_pool = _input_pool(worker, workload, int(header["pool_calls"]))
        measured = _measure(
            worker,
            worker.block_pool,
            header,
            warmup=warmup,
            iterations=calls,
            method=str(header["method"]),
            core=header.get("core"),
        )
    except BaseException:
        error = f"interleaved timing of the solution failed\n{traceback.format_exc()}"
        _reply(worker, "time_block", error=error)
        return
    _reply(
        worker,
        "time_block",
        samples_ms=measured.samples_ms,
        timing_method=measured.method,
        timing_note=measured.note,
    )
