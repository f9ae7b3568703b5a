"""What a resident judge keeps across the requests of one problem: inputs, reference outputs,
reference latencies.

Place in the flow: `resident.py` keeps one `ProblemCache` per problem (a request for another
problem replaces it) and hands it to `evaluate.evaluate_request`; `reference_side.py` asks it
before drawing inputs, running the reference or timing it. Nothing here runs candidate code, and
nothing cached is ever given to a worker: a worker gets clones (`inputs_of`), so a candidate that
writes into its inputs (by CUDA IPC they are the judge's memory) cannot change what the next
candidate is judged on, and reference outputs never leave the judge.

Keys. Inputs depend on the RNG stream: the official flow seeds once per request and draws every
round from one continuing stream. A draw's key is a hash chain, the seed and then every
(workload, axes) drawn since (`chain`), so a key names exactly the stream position the draw was
made at, whatever the request; with the draw the cache keeps the RNG states after it (Python,
NumPy when loaded, torch CPU and CUDA) and restores them on a hit, so the stream continues as if
drawn. The reference's outputs are keyed by the same key (they are a function of the inputs: the
flow already assumes a deterministic reference). Its latency is keyed by workload and timing
settings: measured again once `RETIME_EVERY` requests used it or `RETIME_AFTER_S` passed, and
reported as the median of the last `KEEP_SAMPLES` measurements, with their spread in the trace.

Memory: inputs and reference outputs together stay under `byte_budget` (least recently used
first out; on CUDA 3 % of the device's memory, at most 4 GiB, since the timed slot's judge and
its screens' share a GPU); an entry larger than the budget is not kept, a copy the device has no
memory for empties the cache instead of failing, and the judge gives the allocator's free
blocks back to the device after every request (`release_device_memory`).
"""

import gc
import hashlib
import json
import logging
import random
import statistics
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelarc.runner.inputs import Value
from kernelarc.schema import TimingConfig, Workload

logger = logging.getLogger(__name__)

#: Inputs and reference outputs kept per problem, in bytes: on CUDA at most this share of the
#: device's memory (several judges share a GPU: the timed slot's and its screens'), and at most
#: `MAX_BYTES`; on the CPU `MAX_BYTES`.
CUDA_MEMORY_SHARE = 0.03
MAX_BYTES = 4 << 30
CPU_BYTES = 1 << 30


def byte_budget_for(device: str) -> int:
    """The default budget of a cache on `device` (see `CUDA_MEMORY_SHARE`)."""
    if device != "cuda":
        return CPU_BYTES
    try:
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    except Exception:  # no device to ask: the cap
        return MAX_BYTES
    return min(MAX_BYTES, int(CUDA_MEMORY_SHARE * total))


#: A cached reference latency is measured again after this many uses ...
RETIME_EVERY = 8
#: ... or this many seconds after its last measurement.
RETIME_AFTER_S = 120.0
#: How many of the latest measurements the reported median is taken over.
KEEP_SAMPLES = 5


def seed_key(kind: str, seed: int) -> str:
    """The stream key right after seeding (`kind`: the request's stream, or a probe's)."""
    return hashlib.sha256(f"{kind}|{seed}".encode()).hexdigest()


def chain(key: str, workload: Workload) -> str:
    """The stream key after drawing one round of `workload` at stream position `key`."""
    axes = json.dumps(workload.axes, sort_keys=True, default=str)
    return hashlib.sha256(f"{key}|{workload.uuid}|{axes}".encode()).hexdigest()


def release_device_memory(device: str) -> None:
    """Collect garbage and return the CUDA caching allocator's free blocks to the device: a
    resident judge lives on between candidates, and the blocks a request freed must not stay
    reserved beside the next candidate (and the other judges on the GPU)."""
    if device != "cuda":
        return
    gc.collect()
    torch.cuda.empty_cache()


def _nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


@dataclass(frozen=True)
class RngState:
    """Every RNG the input generators use, as it stood after a draw."""

    python: Any
    numpy: Any
    torch_cpu: torch.Tensor
    torch_cuda: list[torch.Tensor] | None

    @classmethod
    def capture(cls, device: str) -> "RngState":
        """The current states (CUDA's only on `cuda`)."""
        numpy = sys.modules.get("numpy")
        return cls(
            python=random.getstate(),
            numpy=numpy.random.get_state() if numpy is not None else None,
            torch_cpu=torch.get_rng_state(),
            torch_cuda=torch.cuda.get_rng_state_all() if device == "cuda" else None,
        )

    def restore(self) -> None:
        """Make every RNG stand where it stood at capture."""
        random.setstate(self.python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy is not None:
            numpy.random.set_state(self.numpy)
        torch.set_rng_state(self.torch_cpu)
        if self.torch_cuda is not None:
            torch.cuda.set_rng_state_all(self.torch_cuda)


@dataclass
class _Draw:
    inputs: list[Value]
    rng: RngState
    nbytes: int


@dataclass
class ReferenceRun:
    """The reference's outputs on one draw, the inputs it changed, and its wall time (s)."""

    outputs: list[torch.Tensor]
    changed: set[str]
    seconds: float
    nbytes: int = 0


@dataclass
class _Timing:
    samples: list[float] = field(default_factory=list)
    """Median latencies (ms) measured, oldest first."""
    measured_at: float = 0.0
    uses: int = 0
    """Requests served from the cache since the last measurement."""


@dataclass
class CacheCounts:
    """Hits and misses per kind (the signed result's `cache`)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str) -> None:
        """Count one `name`."""
        self.counts[name] = self.counts.get(name, 0) + 1


class ProblemCache:
    """Inputs, reference outputs and reference latencies of one problem (module docstring)."""

    def __init__(self, identity: str, device: str, byte_budget: int | None = None) -> None:
        """An empty cache for the problem `identity` evaluated on `device`."""
        self.identity = identity
        self.device = device
        self.byte_budget = byte_budget_for(device) if byte_budget is None else byte_budget
        self._entries: OrderedDict[tuple[str, str], _Draw | ReferenceRun] = OrderedDict()
        self._bytes = 0
        self._timings: dict[str, _Timing] = {}
        self.reference: Any = None
        """The loaded reference module's `run` and the custom-inputs function (set once)."""
        self.custom: Any = None
        self.counts = CacheCounts()
        """Of the current request (reset by `begin_request`)."""

    def begin_request(self) -> None:
        """Start counting a new request's hits and misses."""
        self.counts = CacheCounts()

    @property
    def bytes_held(self) -> int:
        """Bytes of inputs and reference outputs held."""
        return self._bytes

    def inputs_of(self, key: str) -> list[Value] | None:
        """Clones of the inputs drawn at stream key `key` (the RNGs then stand after that
        draw), or None (a miss)."""
        entry = self._entries.get(("draw", key))
        if not isinstance(entry, _Draw):
            self.counts.add("input_misses")
            return None
        self._entries.move_to_end(("draw", key))
        entry.rng.restore()
        self.counts.add("input_hits")
        return _clone(entry.inputs)

    def keep_inputs(self, key: str, inputs: list[Value]) -> None:
        """Keep a pristine copy of a draw just made at `key` (the RNG states now); nothing when
        it would not fit the budget or the device has no memory left for it (the cache is then
        emptied: keeping must never fail an evaluation)."""
        if _nbytes(inputs) > self.byte_budget:
            return
        try:
            rng = RngState.capture(self.device)
            pristine = _clone(inputs)
        except (torch.OutOfMemoryError, RuntimeError) as exc:  # the CPU's: a RuntimeError
            text = str(exc).lower()
            if not isinstance(exc, torch.OutOfMemoryError) and "alloc" not in text:
                raise
            self.drop(f"no memory left to keep inputs ({type(exc).__name__})")
            return
        self._put(("draw", key), _Draw(pristine, rng, _nbytes(pristine)))

    def drop(self, why: str) -> None:
        """Empty the cache (inputs and reference outputs; latencies stay) and give the memory
        back to the device."""
        self._entries.clear()
        self._bytes = 0
        self.counts.add("dropped")
        logger.warning("the judge's cache was emptied: %s", why)
        release_device_memory(self.device)

    def reference_run(self, key: str) -> ReferenceRun | None:
        """The reference's outputs on the draw at `key`, or None (a miss)."""
        entry = self._entries.get(("reference", key))
        if not isinstance(entry, ReferenceRun):
            self.counts.add("reference_misses")
            return None
        self._entries.move_to_end(("reference", key))
        self.counts.add("reference_hits")
        return entry

    def keep_reference_run(self, key: str, run: ReferenceRun) -> None:
        """Keep the reference's outputs on the draw at `key`."""
        run.nbytes = _nbytes(list(run.outputs))
        self._put(("reference", key), run)

    def _put(self, key: tuple[str, str], entry: "_Draw | ReferenceRun") -> None:
        if entry.nbytes > self.byte_budget:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._entries[key] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.byte_budget and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes

    @staticmethod
    def timing_key(workload: Workload, timing: TimingConfig) -> str:
        """A reference latency's key: the workload and the timing settings."""
        return chain(timing.model_dump_json(), workload)

    def latency(self, key: str, now: float | None = None) -> tuple[float, str] | None:
        """The cached reference latency (ms) and its note, or None when it is due for a
        measurement (`RETIME_EVERY`, `RETIME_AFTER_S`)."""
        now = time.monotonic() if now is None else now
        timing = self._timings.get(key)
        if timing is None or not timing.samples:
            self.counts.add("reference_timings")
            return None
        if timing.uses >= RETIME_EVERY or now - timing.measured_at >= RETIME_AFTER_S:
            self.counts.add("reference_timings")
            return None
        timing.uses += 1
        self.counts.add("reference_timing_hits")
        return self._report(timing, now, fresh=False)

    def record_latency(
        self, key: str, median_ms: float, now: float | None = None
    ) -> tuple[float, str]:
        """Record a measurement; the latency to report (the median of the latest) and note."""
        now = time.monotonic() if now is None else now
        timing = self._timings.setdefault(key, _Timing())
        timing.samples = [*timing.samples, median_ms][-KEEP_SAMPLES:]
        timing.measured_at, timing.uses = now, 0
        return self._report(timing, now, fresh=True)

    @staticmethod
    def _report(timing: _Timing, now: float, *, fresh: bool) -> tuple[float, str]:
        samples = timing.samples
        value = statistics.median(samples)
        if len(samples) == 1 and fresh:
            return value, ""
        low, high = min(samples), max(samples)
        spread = high / low if low > 0 else float("inf")
        how = "measured now" if fresh else f"last measured {now - timing.measured_at:.0f} s ago"
        note = (
            f"reference latency: median of the judge's last {len(samples)} measurements "
            f"({', '.join(f'{s:.4g}' for s in samples)} ms; max/min {spread:.3f}; {how})"
        )
        return value, note
