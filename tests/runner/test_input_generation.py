"""Deterministic input generation, name heuristics and safetensors loading, in process."""

import json
import math
import struct
from pathlib import Path

import pytest
import torch

from kernelarc.runner.inputs import allocate_outputs, generate_inputs, seed_everything
from kernelarc.runner.safetensors_reader import load_tensor
from kernelarc.schema import Definition, Workload


def definition(
    inputs: dict[str, dict[str, object]], axes: dict[str, object] | None = None
) -> Definition:
    names = ", ".join(inputs)
    return Definition.model_validate(
        {
            "name": "gen",
            "axes": axes or {"N": {"type": "var"}, "K": {"type": "const", "value": 64}},
            "inputs": inputs,
            "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
            "reference": f"def run({names}):\n    return None\n",
        }
    )


def workload(**inputs: dict[str, object]) -> Workload:
    return Workload.model_validate({"uuid": "w", "axes": {"N": 8}, "inputs": inputs})


MIXED = {
    "x": {"shape": ["N", "K"], "dtype": "bfloat16"},
    "idx": {"shape": ["N"], "dtype": "int32"},
    "flags": {"shape": ["N"], "dtype": "bool"},
    "q": {"shape": ["N"], "dtype": "int8"},
    "f8": {"shape": ["N"], "dtype": "float8_e4m3fn"},
    "eps": {"shape": None, "dtype": "float32"},
}


def test_same_seed_same_inputs_and_stream_continues() -> None:
    d, w = definition(MIXED), workload()
    seed_everything(200)
    first = generate_inputs(d, w, "cpu")
    second = generate_inputs(d, w, "cpu")
    seed_everything(200)
    again = generate_inputs(d, w, "cpu")
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert not torch.equal(first[0], second[0])  # the next round draws fresh data


def test_dtype_generators_respect_ranges_and_types() -> None:
    seed_everything(1)
    x, idx, flags, q, f8, eps = generate_inputs(definition(MIXED), workload(), "cpu")
    assert x.shape == (8, 64) and x.dtype == torch.bfloat16
    assert idx.dtype == torch.int32 and int(idx.min()) >= -1024 and int(idx.max()) < 1024
    assert flags.dtype == torch.bool
    assert q.dtype == torch.int8
    assert f8.dtype == torch.float8_e4m3fn and float(f8.float().abs().max()) <= 2.0
    assert isinstance(eps, float)


def test_scalar_values_and_expr_axes() -> None:
    d = definition(
        {"x": {"shape": ["M"], "dtype": "float32"}, "alpha": {"shape": None, "dtype": "float32"}},
        axes={"N": {"type": "var"}, "M": {"type": "expr", "expression": "N * 2 + 1"}},
    )
    x, alpha = generate_inputs(d, workload(alpha={"type": "scalar", "value": 0.25}), "cpu")
    assert x.shape == (17,)
    assert alpha == 0.25


def test_name_heuristics() -> None:
    d = definition(
        {
            "rms_norm_weight": {"shape": ["K"], "dtype": "float32"},
            "layer_norm_bias": {"shape": ["K"], "dtype": "float32"},
            "cos": {"shape": ["N", "K"], "dtype": "float32"},
            "up_proj": {"shape": ["N", "K"], "dtype": "float32"},
        }
    )
    seed_everything(3)
    weight, bias, cos, proj = generate_inputs(d, workload(), "cpu")
    assert torch.equal(weight, torch.ones(64))
    assert torch.equal(bias, torch.zeros(64))
    assert float(cos.abs().max()) <= 1.0
    assert float(proj.std()) == pytest.approx(1 / math.sqrt(64), rel=0.3)


def test_dps_outputs_are_zeroed_buffers() -> None:
    (out,) = allocate_outputs(definition(MIXED), workload(), "cpu")
    assert out.shape == (8,) and out.dtype == torch.float32 and not bool(out.any())


def _write_safetensors(path: Path, name: str, tensor: torch.Tensor) -> None:
    raw = tensor.contiguous().numpy().tobytes()
    header = json.dumps(
        {name: {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [0, len(raw)]}}
    ).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + raw)


def test_safetensors_inputs_load_from_the_problem_dir(tmp_path: Path) -> None:
    expected = torch.arange(8, dtype=torch.float32)
    _write_safetensors(tmp_path / "blob.safetensors", "t", expected)
    assert torch.equal(load_tensor(tmp_path / "blob.safetensors", "t"), expected)
    d = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    spec = {"type": "safetensors", "path": "blob.safetensors", "tensor_key": "t"}
    (x,) = generate_inputs(d, workload(x=spec), "cpu", problem_dir=str(tmp_path))
    assert torch.equal(x, expected)
    escaping = {"type": "safetensors", "path": "../blob.safetensors", "tensor_key": "t"}
    with pytest.raises(ValueError, match="leaves the problem dir"):
        generate_inputs(d, workload(x=escaping), "cpu", problem_dir=str(tmp_path / "sub"))


def test_custom_inputs_come_from_the_entrypoint() -> None:
    d = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    w = workload(x={"type": "custom"})

    def make(axes: dict[str, object], device: torch.device) -> dict[str, object]:
        return {"x": torch.full((int(axes["N"]),), float(axes["K"]), device=device)}

    (x,) = generate_inputs(d, w, "cpu", custom=make)
    assert torch.equal(x, torch.full((8,), 64.0))
