"""The resident judge's cache (kernelarc/runner/resident_cache.py), on CPU tensors: a cached draw
continues the RNG stream exactly as drawing would, what a worker gets is never the kept copy,
the byte budget holds, and the reference latency is measured again on its schedule."""

import random

import pytest
import torch

from kernelarc.runner.resident_cache import (
    KEEP_SAMPLES,
    RETIME_AFTER_S,
    RETIME_EVERY,
    ProblemCache,
    ReferenceRun,
    chain,
    seed_key,
)
from kernelarc.schema import TimingConfig, Workload


def _workload(uuid: str, n: int) -> Workload:
    return Workload.model_validate({"uuid": uuid, "axes": {"N": n}, "inputs": {}})


def _draw(n: int) -> list[torch.Tensor]:
    return [torch.randn(n), torch.rand(n)]


def test_a_cached_draw_leaves_the_stream_where_drawing_would() -> None:
    first, second = _workload("a", 8), _workload("b", 5)
    torch.manual_seed(3)
    random.seed(3)
    drawn = _draw(8)
    after_draw = (_draw(5), random.random())

    cache = ProblemCache("p", "cpu")
    torch.manual_seed(3)
    random.seed(3)
    key = chain(seed_key("request", 3), first)
    cache.keep_inputs(key, _draw(8))
    torch.manual_seed(99)  # the stream is elsewhere now
    random.seed(99)
    hit = cache.inputs_of(key)
    assert hit is not None
    assert all(torch.equal(a, b) for a, b in zip(hit, drawn, strict=True))
    again = (_draw(5), random.random())
    assert all(torch.equal(a, b) for a, b in zip(again[0], after_draw[0], strict=True))
    assert again[1] == after_draw[1]
    assert cache.inputs_of(chain(key, second)) is None  # another position: a miss
    assert cache.counts.counts == {"input_hits": 1, "input_misses": 1}


def test_what_a_worker_gets_is_a_copy() -> None:
    cache = ProblemCache("p", "cpu")
    cache.keep_inputs("k", [torch.ones(4), 2.5])
    given = cache.inputs_of("k")
    assert given is not None
    given[0].mul_(7)  # a candidate writing into its inputs (by IPC: the judge's memory)
    again = cache.inputs_of("k")
    assert again is not None
    assert torch.equal(again[0], torch.ones(4)) and again[1] == 2.5


def test_the_byte_budget_evicts_the_least_recently_used() -> None:
    cache = ProblemCache("p", "cpu", byte_budget=3 * 400)  # three draws of 100 float32
    for name in "abc":
        cache.keep_inputs(name, [torch.zeros(100)])
    assert cache.inputs_of("a") is not None  # now the most recent
    cache.keep_inputs("d", [torch.zeros(100)])
    assert cache.bytes_held == 1200
    assert cache.inputs_of("b") is None  # the least recently used went
    assert all(cache.inputs_of(k) is not None for k in "acd")
    cache.keep_inputs("huge", [torch.zeros(1000)])  # larger than the budget: not kept
    assert cache.inputs_of("huge") is None and cache.bytes_held == 1200


def test_reference_runs_are_kept_per_draw() -> None:
    cache = ProblemCache("p", "cpu")
    cache.keep_reference_run("k", ReferenceRun([torch.arange(3.0)], {"x"}, 0.01))
    kept = cache.reference_run("k")
    assert kept is not None and kept.changed == {"x"} and kept.nbytes == 12
    assert cache.reference_run("other") is None


def test_the_reference_latency_is_measured_again_on_its_schedule() -> None:
    cache = ProblemCache("p", "cpu")
    key = cache.timing_key(_workload("a", 8), TimingConfig())
    assert cache.latency(key, now=0.0) is None  # never measured
    value, note = cache.record_latency(key, 2.0, now=0.0)
    assert (value, note) == (2.0, "")
    for use in range(RETIME_EVERY):
        cached = cache.latency(key, now=1.0 + use)
        assert cached is not None and cached[0] == 2.0 and "last measured" in cached[1]
    assert cache.latency(key, now=20.0) is None  # used RETIME_EVERY times
    value, note = cache.record_latency(key, 4.0, now=20.0)
    assert value == 3.0 and "max/min 2.000" in note
    assert cache.latency(key, now=20.0 + RETIME_AFTER_S) is None  # too old
    for sample in range(KEEP_SAMPLES + 2):
        value, _ = cache.record_latency(key, 10.0 + sample, now=200.0)
    assert value == 10.0 + (KEEP_SAMPLES + 1) - KEEP_SAMPLES // 2  # median of the last five


def test_a_copy_the_memory_cannot_hold_empties_the_cache_instead_of_failing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = ProblemCache("p", "cpu")
    cache.keep_inputs("a", [torch.zeros(10)])

    def no_memory(values: list[object]) -> list[object]:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr("kernelarc.runner.resident_cache._clone", no_memory)
    cache.keep_inputs("b", [torch.zeros(10)])  # does not raise
    assert cache.bytes_held == 0 and cache.counts.counts.get("dropped") == 1
    monkeypatch.undo()
    assert cache.inputs_of("a") is None


def test_the_cuda_budget_is_a_share_of_the_device_capped() -> None:
    from kernelarc.runner.resident_cache import CPU_BYTES, byte_budget_for

    assert byte_budget_for("cpu") == CPU_BYTES
    assert 0 < byte_budget_for("cuda") <= 4 << 30  # without a GPU: the cap
