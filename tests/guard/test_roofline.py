"""Speed-of-light bounds for known shapes: bytes from shapes and dtype sizes, FLOPs for matmuls."""

import pytest

from kernelarc.guard.roofline import Ceiling, below_speed_of_light, matmul_flops, roofline_bound
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.schema import Definition, Workload
from kernelarc.schema.guard_record import RooflineBound

H200 = Ceiling(copy_bytes_per_s=4.3e12, matmul_flops_per_s=7.9e14)


def test_rmsnorm_bound_is_bytes_over_bandwidth() -> None:
    definition = resolve_problem("rmsnorm", "workload.jsonl").definition
    workload = Workload(uuid="w", axes={"T": 4096, "H": 4096})
    bound = roofline_bound(definition, workload, H200)
    expected_bytes = 4096 * 4096 * 2 * 2 + 4096 * 2  # x and out [T, H] bf16, weight [H] bf16
    assert bound.bytes == expected_bytes
    assert bound.flops == 0
    assert bound.bound_ms == pytest.approx(expected_bytes / 4.3e12 * 1e3)


def test_gemm_bound_is_flops_over_rate() -> None:
    definition = resolve_problem("gemm_bias_gelu", "workload.jsonl").definition
    workload = Workload(uuid="w", axes={"M": 8192, "N": 14336, "K": 4096})
    bound = roofline_bound(definition, workload, H200)
    flops = 2 * 8192 * 14336 * 4096
    assert bound.flops == flops
    assert bound.bytes == (8192 * 4096 + 14336 * 4096 + 14336 + 8192 * 14336) * 2
    assert bound.bound_ms == pytest.approx(flops / 7.9e14 * 1e3)  # compute-bound: ~1.22 ms


def _definition(reference: str, dtype: str = "bfloat16", op_type: str | None = None) -> Definition:
    return Definition.model_validate(
        {
            "name": "d",
            "op_type": op_type,
            "axes": {
                "M": {"type": "var"},
                "N": {"type": "const", "value": 64},
                "K": {"type": "const", "value": 32},
            },
            "inputs": {
                "a": {"shape": ["M", "K"], "dtype": dtype},
                "b": {"shape": ["N", "K"], "dtype": dtype},
            },
            "outputs": {"c": {"shape": ["M", "N"], "dtype": "bfloat16"}},
            "reference": reference,
        }
    )


def test_matmul_detection_and_fp4_bytes() -> None:
    matmul = _definition("def run(a, b):\n    return a @ b.T\n")
    axes = matmul.resolve_axes({"M": 128})
    assert matmul_flops(matmul, axes) == 2 * 128 * 64 * 32
    decorated = _definition(
        "import triton\n@triton.jit\ndef k():\n    pass\ndef run(a, b):\n    return a\n"
    )
    assert matmul_flops(decorated, axes) == 0  # a decorator is not a matmul
    fp4 = _definition("def run(a, b):\n    return a\n", dtype="float4_e2m1fn_x2")
    bound = roofline_bound(fp4, Workload(uuid="w", axes={"M": 128}), H200)
    assert bound.bytes == (128 * 32 + 64 * 32) * 0.5 + 128 * 64 * 2


def test_slack() -> None:
    bound = RooflineBound(workload="w", bound_ms=1.0, bytes=0, flops=0)
    assert below_speed_of_light(0.79, bound, slack=0.2)
    assert not below_speed_of_light(0.81, bound, slack=0.2)
