"""Deterministic input generation, name heuristics and safetensors loading, in process."""

import json
import math
import struct
from pathlib import Path

import pytest
import torch

from kernelarc.runner.dtypes import (
    E2M1_MAGNITUDES,
    e2m1_codes,
    e2m1_to_float,
    fp4x2_to_float,
    quantize_fp4x2,
    unpack_e2m1,
)
from kernelarc.runner.input_heuristics import heuristic_tensor, matching_rule
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
    x[0] = 99.0  # a candidate mutating its input must not poison the next round
    (again,) = generate_inputs(d, workload(x=spec), "cpu", problem_dir=str(tmp_path))
    assert torch.equal(again, expected)
    (tmp_path / "sub").mkdir()
    escaping = {"type": "safetensors", "path": "../blob.safetensors", "tensor_key": "t"}
    with pytest.raises(ValueError, match="may not leave"):
        generate_inputs(d, workload(x=escaping), "cpu", problem_dir=str(tmp_path / "sub"))


def test_custom_inputs_come_from_the_entrypoint() -> None:
    d = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    w = workload(x={"type": "custom"})

    def make(axes: dict[str, object], device: torch.device) -> dict[str, object]:
        return {"x": torch.full((int(axes["N"]),), float(axes["K"]), device=device)}

    (x,) = generate_inputs(d, w, "cpu", custom=make)
    assert torch.equal(x, torch.full((8,), 64.0))


def test_custom_entrypoint_gets_all_axes_and_scalars_and_runs_every_round() -> None:
    d = Definition.model_validate(
        {
            "name": "c",
            "axes": {
                "N": {"type": "var"},
                "K": {"type": "const", "value": 4},
                "T": {"type": "expr", "expression": "N * K"},
            },
            "inputs": {
                "x": {"shape": ["T"], "dtype": "float32"},
                "alpha": {"shape": None, "dtype": "float32"},
            },
            "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
            "custom_inputs_entrypoint": "make",
            "reference": "def run(x, alpha):\n    return x\ndef make(c, d):\n    return {}\n",
        }
    )
    seen: list[dict[str, object]] = []

    def make(ctx: dict[str, object], device: torch.device) -> dict[str, object]:
        seen.append(dict(ctx))
        return {"x": torch.rand(int(ctx["T"])), "alpha": 3}  # type: ignore[call-overload]

    custom_w = Workload.model_validate(
        {
            "uuid": "c",
            "axes": {"N": 2},
            "inputs": {"x": {"type": "custom"}, "alpha": {"type": "custom"}},
        }
    )
    x, alpha = generate_inputs(d, custom_w, "cpu", custom=make)
    assert x.shape == (8,) and alpha == 3
    assert list(seen[0].items()) == [("K", 4), ("N", 2), ("T", 8)]
    # A workload without custom inputs still calls the entrypoint (its draws move the stream,
    # as upstream), and sees the workload's scalars.
    plain_w = Workload.model_validate(
        {"uuid": "p", "axes": {"N": 2}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}}}
    )
    seed_everything(5)
    with_custom = generate_inputs(d, plain_w, "cpu", custom=make)
    assert seen[-1]["alpha"] == 0.5 and with_custom[1] == 0.5
    seed_everything(5)
    without = generate_inputs(d, plain_w, "cpu")
    assert not torch.equal(with_custom[0], without[0])


def test_custom_inputs_without_an_entrypoint_fail() -> None:
    d = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    with pytest.raises(ValueError, match="custom_inputs_entrypoint"):
        generate_inputs(d, workload(x={"type": "custom"}), "cpu")


def test_trace_dir_lookup_strips_leading_components(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = tmp_path / "trace"
    (blobs / "workloads" / "gemm").mkdir(parents=True)
    _write_safetensors(blobs / "workloads" / "gemm" / "b.safetensors", "t", torch.ones(8))
    problem = tmp_path / "problem"
    problem.mkdir()
    monkeypatch.setenv("FLASHINFER_TRACE_DIR", str(blobs))
    d = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    spec = {
        "type": "safetensors",
        "path": "flashinfer-trace/workloads/gemm/b.safetensors",
        "tensor_key": "t",
    }
    (x,) = generate_inputs(d, workload(x=spec), "cpu", problem_dir=str(problem))
    assert torch.equal(x, torch.ones(8))
    # The problem dir is tried first.
    (problem / "workloads" / "gemm").mkdir(parents=True)
    _write_safetensors(problem / "workloads" / "gemm" / "b.safetensors", "t", torch.zeros(8))
    (x,) = generate_inputs(d, workload(x=spec), "cpu", problem_dir=str(problem))
    assert torch.equal(x, torch.zeros(8))


def test_safetensors_shape_and_dtype_are_checked(tmp_path: Path) -> None:
    _write_safetensors(tmp_path / "b.safetensors", "t", torch.ones(5))
    spec = {"type": "safetensors", "path": "b.safetensors", "tensor_key": "t"}
    wrong_shape = definition({"x": {"shape": ["N"], "dtype": "float32"}})
    with pytest.raises(ValueError, match="shape"):
        generate_inputs(wrong_shape, workload(x=spec), "cpu", problem_dir=str(tmp_path))
    wrong_dtype = definition({"x": {"shape": ["5"], "dtype": "float16"}})
    with pytest.raises(ValueError, match="dtype"):
        generate_inputs(wrong_dtype, workload(x=spec), "cpu", problem_dir=str(tmp_path))


# -- dtype generators ---------------------------------------------------------------------------


def test_float_generators_are_standard_normal_and_ints_cover_their_range() -> None:
    d = definition(
        {
            "a": {"shape": ["N", "K"], "dtype": "float32"},
            "i16": {"shape": ["N", "K"], "dtype": "int16"},
            "i64": {"shape": ["N", "K"], "dtype": "int64"},
            "i8": {"shape": ["N", "K"], "dtype": "int8"},
            "b": {"shape": ["N", "K"], "dtype": "bool"},
            "e5": {"shape": ["N", "K"], "dtype": "float8_e5m2"},
        }
    )
    seed_everything(7)
    a, i16, i64, i8, b, e5 = generate_inputs(d, Workload(uuid="w", axes={"N": 512}), "cpu")
    assert abs(float(a.mean())) < 0.02 and abs(float(a.std()) - 1.0) < 0.02
    for t in (i16, i64):
        assert int(t.min()) == -1024 and int(t.max()) == 1023
    assert int(i8.min()) == -128 and int(i8.max()) == 127
    assert 0.45 < float(b.float().mean()) < 0.55
    assert float(e5.float().abs().max()) <= 2.0 and e5.dtype == torch.float8_e5m2


def test_float64_without_a_heuristic_fails_and_with_one_works() -> None:
    with pytest.raises(ValueError, match="no random generator"):
        generate_inputs(definition({"x": {"shape": ["N"], "dtype": "float64"}}), workload(), "cpu")
    with pytest.raises(ValueError, match="no random generator"):
        generate_inputs(definition({"s": {"shape": None, "dtype": "float64"}}), workload(), "cpu")
    (w,) = generate_inputs(
        definition({"rms_norm_weight": {"shape": ["K"], "dtype": "float64"}}), workload(), "cpu"
    )
    assert w.dtype == torch.float64 and torch.equal(w, torch.ones(64, dtype=torch.float64))


def test_random_scalars_have_python_types() -> None:
    d = definition(
        {
            "f": {"shape": None, "dtype": "bfloat16"},
            "i": {"shape": None, "dtype": "int64"},
            "b": {"shape": None, "dtype": "bool"},
            "z": {"shape": [], "dtype": "float32"},
        }
    )
    f, i, b, z = generate_inputs(d, workload(), "cpu")
    assert type(f) is float and type(i) is int and type(b) is bool
    assert isinstance(z, torch.Tensor) and z.shape == ()


def test_sampling_probs_are_softmaxed_rows() -> None:
    d = Definition.model_validate(
        {
            "name": "s",
            "op_type": "sampling",
            "axes": {"B": {"type": "var"}, "V": {"type": "const", "value": 32}},
            "inputs": {"probs": {"shape": ["B", "V"], "dtype": "float32"}},
            "outputs": {"out": {"shape": ["B"], "dtype": "int64"}},
            "reference": "def run(probs):\n    return None\n",
        }
    )
    (probs,) = generate_inputs(d, Workload(uuid="w", axes={"B": 4}), "cpu")
    assert torch.allclose(probs.sum(-1), torch.ones(4)) and bool((probs > 0).all())


# -- fp4 ----------------------------------------------------------------------------------------


def test_e2m1_quantisation_rounds_to_nearest_even_and_saturates() -> None:
    values = torch.tensor(
        [0.0, 0.25, 0.26, 0.75, 1.25, 1.3, 1.75, 2.5, 2.6, 3.5, 5.0, 5.1, 100.0, float("nan")]
    )
    expected = [0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 7, 0]
    assert e2m1_codes(values).tolist() == expected
    assert e2m1_codes(-values[1:13]).tolist() == [c + 8 for c in expected[1:13]]
    assert e2m1_codes(torch.tensor([-0.0, -0.1])).tolist() == [0, 8]
    grid = torch.tensor(E2M1_MAGNITUDES)
    assert torch.equal(e2m1_to_float(e2m1_codes(grid)), grid)
    assert torch.equal(e2m1_to_float(e2m1_codes(-grid[1:])), -grid[1:])


def test_fp4_packing_puts_even_elements_in_the_low_nibble_and_round_trips() -> None:
    packed = quantize_fp4x2(torch.tensor([[0.5, 6.0, -1.0, 0.0]]))
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (1, 2)
    assert packed.view(torch.uint8).tolist() == [[0x71, 0x0A]]
    assert unpack_e2m1(packed).tolist() == [[1, 7, 10, 0]]
    assert fp4x2_to_float(packed).tolist() == [[0.5, 6.0, -1.0, 0.0]]
    with pytest.raises(ValueError, match="even last dim"):
        quantize_fp4x2(torch.ones(3))


def test_fp4_inputs_are_packed_randn_with_the_last_dim_halved() -> None:
    d = definition({"q": {"shape": ["N", "K"], "dtype": "float4_e2m1fn_x2"}})
    seed_everything(11)
    (q,) = generate_inputs(d, workload(), "cpu")
    seed_everything(11)
    expected = quantize_fp4x2(torch.randn(8, 64))
    assert q.shape == (8, 32) and torch.equal(q.view(torch.uint8), expected.view(torch.uint8))
    assert float(fp4x2_to_float(q).abs().max()) <= 6.0


# -- name heuristics ----------------------------------------------------------------------------

RULE_CASES = [
    ("rms_norm_weight", (4, 4), None, "norm_weight"),
    ("input_layernorm_weight", (4,), None, "norm_weight"),
    ("norm1_weight", (4,), None, "norm_weight"),
    ("RMSNorm_weight", (4, 4), None, "weight_matrix"),  # case-sensitive
    ("ln_weight", (4,), None, None),
    ("layer_norm_bias", (4,), None, "norm_bias"),
    ("attention_mask", (2, 4, 4), None, "causal_mask"),
    ("attention_mask", (2, 4, 5), None, "binary_mask"),
    ("causal_mask", (4, 5), None, None),
    ("scores", (4, 4), "Causal attention mask", "causal_mask"),
    ("pad_mask", (4,), "1.0 for valid tokens", "binary_mask"),
    ("pad_mask", (4,), None, None),
    ("x_mask", (4,), None, "binary_mask"),
    ("cos", (4, 4), None, "rope"),
    ("rope_sin", (4,), None, "rope"),
    ("cosine", (4,), None, None),
    ("rstd", (4,), None, "positive"),
    ("x_variance", (4,), None, "positive"),
    ("x_variance2", (4,), None, None),  # upstream quirk: no `_variance` after stripping digits
    ("x_var2", (4,), None, "positive"),
    ("var", (4, 4), None, "positive"),
    ("A", (4, 4), None, "ssm_decay"),
    ("A_log", (4,), None, "ssm_decay"),
    ("a", (4,), None, None),
    ("routing_weights", (4, 4), None, "softmax"),
    ("logits", (4,), "Softmax output of the gate", "softmax"),
    ("weight", (4, 4), None, "weight_matrix"),
    ("weight", (4,), None, None),
    ("q_proj2", (4, 4), None, "weight_matrix"),
    ("expert_weight_matrix", (2, 4, 4), None, "weight_matrix"),
    ("w1", (4, 4), None, None),
]


@pytest.mark.parametrize(("name", "shape", "description", "rule"), RULE_CASES)
def test_heuristic_rule_selection_and_precedence(
    name: str, shape: tuple[int, ...], description: str | None, rule: str | None
) -> None:
    assert matching_rule(name, shape, torch.float32, description) == rule


def test_heuristics_skip_non_float_fp8_and_fp4() -> None:
    for dtype in (torch.int32, torch.bool, torch.float8_e4m3fn, torch.float4_e2m1fn_x2):
        assert matching_rule("rms_norm_weight", (4, 4), dtype) is None


def test_heuristic_values_and_ranges() -> None:
    dev = torch.device("cpu")
    torch.manual_seed(0)

    def make(name: str, shape: tuple[int, ...], desc: str | None = None) -> torch.Tensor:
        made = heuristic_tensor(name, shape, torch.float32, dev, desc)
        assert made is not None
        return made

    mask = make("causal_mask", (2, 3, 3))
    lowest = torch.finfo(torch.float32).min
    assert mask[0].tolist() == [[0.0, lowest, lowest], [0.0, 0.0, lowest], [0.0, 0.0, 0.0]]
    assert set(make("x_mask", (1000,)).unique().tolist()) == {0.0, 1.0}
    cos = make("cos", (1000,))
    assert float(cos.min()) >= -1.0 and float(cos.max()) <= 1.0
    assert float(make("rstd", (1000,)).min()) >= 0.1
    a_log = make("A_log", (1000,))
    assert float(a_log.min()) >= -5.0 and float(a_log.max()) <= -1.0
    a = make("A", (1000,))
    assert float(a.min()) >= -1.0 and float(a.max()) <= -0.001
    g = make("g", (1000,))
    assert float(g.min()) >= -5.0 and float(g.max()) <= 0.0
    cumsum = make("A_cumsum", (4, 50))
    assert bool((cumsum.diff(dim=-1) <= 0).all()) and float(cumsum.min()) >= -5.0
    soft = make("attn_weights", (3, 7))
    assert torch.allclose(soft.sum(-1), torch.ones(3))
    proj = make("o_proj", (256, 400))
    assert float(proj.std()) == pytest.approx(1 / math.sqrt(400), rel=0.05)
