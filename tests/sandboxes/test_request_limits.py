"""Memory limits sized from the problem, and what a sandbox writes into a runner's request."""

import pytest
from vector_add_request import vector_add_request

from kernelarc.errors import SandboxError
from kernelarc.sandboxes.memory_need import GIB, memory_need
from kernelarc.sandboxes.request_limits import memory_limits, runner_request
from kernelarc.schema import EvalRequest


def _request(n: int, device: str = "cpu") -> EvalRequest:
    base = vector_add_request("def run(x, y):\n    return x + y\n", first_workload_only=False)
    big = base.workloads[0].model_copy(update={"uuid": "big", "axes": {"N": n}})
    return base.model_copy(update={"workloads": [*base.workloads, big], "device": device})


def test_the_need_is_the_largest_workloads_data_times_the_copies() -> None:
    need = memory_need(_request(1024**3 // 4))  # 1 GiB per fp32 tensor
    assert need.workload == "big"
    assert (need.input_bytes, need.output_bytes) == (2 * GIB, GIB)
    assert need.reference_bytes == 5 * GIB  # inputs, the reference's copies, its output
    assert need.judge_bytes > need.reference_bytes and need.worker_bytes > need.reference_bytes
    assert memory_need(_request(1024**3 // 4, device="cuda")).judge_bytes == 0  # on the GPU


def test_limits_grow_from_the_base_and_stop_at_the_ceiling() -> None:
    request = _request(1024**3 // 4)
    need = memory_need(request)
    free = memory_limits(request, 16 * GIB, None, "unbounded")
    assert free.per_process_bytes == 16 * GIB + max(need.judge_bytes, need.worker_bytes)
    assert free.container_bytes == 16 * GIB + need.judge_bytes + need.worker_bytes
    capped = memory_limits(request, 16 * GIB, 20 * GIB, "this machine's memory")
    assert capped.per_process_bytes == capped.container_bytes == 20 * GIB
    with pytest.raises(SandboxError, match=r"more than this machine's memory \(4 GiB\)"):
        memory_limits(request, GIB, 4 * GIB, "this machine's memory")


def test_the_runner_request_carries_the_overall_timeout_and_the_cpu_limit() -> None:
    request = _request(16)
    written = runner_request(request, 90.0, 3 * GIB)
    assert written.overall_timeout_s == 90.0 and written.address_space_bytes == 3 * GIB
    shorter = request.model_copy(update={"overall_timeout_s": 30.0})
    assert runner_request(shorter, 90.0).overall_timeout_s == 30.0
    assert runner_request(_request(16, "cuda"), 90.0, GIB).address_space_bytes is None
