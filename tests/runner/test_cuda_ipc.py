"""CUDA IPC between judge and worker: descriptor checks (CPU) and real sharing (GPU machine).

The descriptor checks run before any CUDA call, so a hostile worker's malformed descriptor is
refused here without a GPU. The `gpu` tests share real device memory between forked processes
and run a whole evaluation whose runner log must say the values went by IPC.
"""

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import torch
from vector_add_request import sample_kernel, vector_add_request

from kernelarc.runner.cuda_ipc import (
    SharedValue,
    SharingUnavailable,
    StagingPool,
    describe,
    open_values,
    sharing_supported,
)
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalRequest, EvalStatus, TimingConfig

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
_STORAGE = [0, {"hex": "00" * 64}, 64, 0, {"hex": "2f746f726368"}, 0, None, False]


def _tensor_desc(**update: Any) -> SharedValue:
    fields: dict[str, Any] = {
        "kind": "tensor",
        "dtype": "float32",
        "shape": [4, 4],
        "stride": [4, 1],
        "offset": 0,
        "storage": _STORAGE,
    }
    fields.update(update)
    return SharedValue.model_validate(fields)


def test_scalars_round_trip_without_cuda() -> None:
    descs = describe([3, 2.5, True])
    assert [d.kind for d in descs] == ["int", "float", "bool"]
    assert open_values(descs, copy=True) == [3, 2.5, True]


def test_cpu_tensors_and_other_objects_are_not_shared() -> None:
    with pytest.raises(SharingUnavailable):
        describe([torch.ones(3)])
    with pytest.raises(SharingUnavailable):
        describe(["text"])


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"dtype": "complex128"}, "unknown dtype"),
        ({"stride": [4]}, "differ in length"),
        ({"stride": [-4, 1]}, "negative"),
        ({"shape": [4, 5]}, "past its 64-byte storage"),
        ({"offset": 1}, "past its 64-byte storage"),
        ({"storage": _STORAGE[:5]}, "malformed storage descriptor"),
        ({"storage": [0, {"hex": "zz"}, 64, 0, None, 0, None, False]}, "non-hexadecimal"),
        ({"storage": [0, {"hex": "00"}, -1, 0, None, 0, None, False]}, "storage size"),
    ],
)
def test_malformed_descriptors_are_refused_before_any_cuda_call(
    update: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        open_values([_tensor_desc(**update)], copy=True)


def test_scalar_descriptor_must_hold_its_kind() -> None:
    with pytest.raises(ValueError, match="holds NoneType"):
        open_values([SharedValue(kind="int", scalar=None)], copy=True)
    bad = SharedValue.model_construct(kind="float", scalar="1.0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="holds str"):
        open_values([bad], copy=True)


def _child(descs: list[dict[str, Any]], queue: "multiprocessing.Queue[Any]") -> None:
    values = open_values([SharedValue.model_validate(d) for d in descs], copy=False)
    seen = values[0].sum().item()
    values[0].add_(1)  # writes land in the judge's staged copy, not in its originals
    torch.cuda.synchronize()
    queue.put((seen, values[1]))


@pytest.mark.gpu
def test_staged_inputs_are_shared_with_another_process() -> None:
    assert sharing_supported()
    original = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    pool = StagingPool()
    staged, descs = pool.stage([original, 7])
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[Any] = ctx.Queue()
    proc = ctx.Process(target=_child, args=([d.model_dump(mode="json") for d in descs], queue))
    proc.start()
    seen, scalar = queue.get(timeout=120)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    assert seen == original.sum().item() and scalar == 7
    assert torch.equal(staged[0], original + 1)  # the child wrote the staged copy ...
    assert torch.equal(original, torch.arange(1 << 20, device="cuda", dtype=torch.float32))


def _vector_add_request(kernel: str, *, dps: bool) -> EvalRequest:
    return vector_add_request(
        sample_kernel(kernel),
        name=kernel,
        device="cuda",
        language="triton" if "triton" in kernel else "pytorch",
        dps=dps,
        correctness_rounds=3,
        timing=TimingConfig(warmup=2, iterations=5),
        first_workload_only=False,
    )


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("kernel", "dps", "status"),
    [
        ("add_return", False, EvalStatus.PASSED),
        ("add_triton", True, EvalStatus.PASSED),
        ("add_wrong", False, EvalStatus.INCORRECT_NUMERICAL),
    ],
)
def test_cuda_evaluation_moves_values_by_ipc(kernel: str, dps: bool, status: EvalStatus) -> None:
    result = LocalSandbox().evaluate(_vector_add_request(kernel, dps=dps), timeout_s=300)
    logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
    assert {t.evaluation.status for t in result.traces if t.evaluation} == {status}, logs
    if status == EvalStatus.PASSED:
        assert "by CUDA IPC" in result.stderr_tail, result.stderr_tail[-3000:]
        assert "by copy" not in result.stderr_tail
        assert not any("sent by copy" in log or "repeated with copies" in log for log in logs)
