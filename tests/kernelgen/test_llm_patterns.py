"""LLM-style references: `chunk` / `split` / `unbind`, two multi-output torch calls, fp8
quantisation and dequantisation, scatters. The parts of a split are views the kernels read
through (no torch call, no copy); the generated solution's variables stay distinct when output 1
of node `topk` and node `topk_1` would share the name `b_topk_1`; a cast to fp8 (no Triton dtype
here) is a torch call after a fused kernel instead of a refused problem, and under the
interpreter (which cannot cast to fp8) so is a cast from fp8; a scatter into a buffer a kernel of
the plan wrote and nothing else reads (a KV-cache update's clone) is done in place; `baddbmm`
with unit factors is a GEMM with its bias in the epilogue. Small
problems written here, traced once per module, checked against their reference under Triton's
interpreter."""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, _definition, _t, _w, generate_problem, traced_problems
from reference_check import assert_match_reference

RunChecks = Callable[[list[dict[str, Any]], str], dict[str, Any]]

_IMPORTS = "import torch\nimport torch.nn.functional as F\n\n"
_BF16 = {"max_atol": 3e-2, "max_rtol": 3e-2, "required_matched_ratio": 1.0}
_EXACT = {"max_atol": 1e-4, "max_rtol": 1e-4, "required_matched_ratio": 1.0}
#: fp8 outputs: within one e4m3 step (relative 2^-3) of the reference.
_FP8 = {"max_atol": 1e-3, "max_rtol": 0.125, "required_matched_ratio": 1.0}
_MM = {"max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 1.0}


def _ws(tol: dict[str, Any], *workloads: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**w, "tolerance": tol} for w in workloads]


def _custom_ws(*names: str) -> list[dict[str, Any]]:
    custom = {n: {"type": "custom"} for n in names}
    return [_w("t3", {"T": 3}, **custom), _w("t17", {"T": 17}, **custom)]


def _t_ws(tol: dict[str, Any]) -> list[dict[str, Any]]:
    return _ws(tol, _w("t3", {"T": 3}), _w("t17", {"T": 17}))


PROBLEMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # NeoX rotate-half through `chunk`, on the query and on the cos/sin table's halves.
    "rope_chunk": (
        _definition(
            "rope_chunk",
            {"T": {"type": "var"}, "H": {"type": "const", "value": 2}},
            {"q": _t(["T", "H", 16], "bfloat16"), "cos_sin": _t(["T", 16])},
            {"q_out": _t(["T", "H", 16], "bfloat16")},
            _IMPORTS + "def run(q, cos_sin):\n"
            "    cos, sin = cos_sin.chunk(2, dim=-1)\n"
            "    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)\n"
            "    x1, x2 = q.float().chunk(2, dim=-1)\n"
            "    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)\n"
            "    return out.to(q.dtype)\n",
        ),
        _t_ws(_BF16),
    ),
    # A fused QKV projection's output split in unequal parts, a part returned as it is (a view
    # as an output), and a stacked pair unbound.
    "qkv_split_unbind": (
        _definition(
            "qkv_split_unbind",
            {"T": {"type": "var"}},
            {"qkv": _t(["T", 24]), "pair": _t([2, "T", 8])},
            {"s": _t(["T", 8]), "v": _t(["T", 8]), "d": _t(["T", 8])},
            _IMPORTS + "def run(qkv, pair):\n"
            "    q, k, v = torch.split(qkv, [8, 8, 8], dim=-1)\n"
            "    a, b = pair.unbind(0)\n"
            "    return q * k, v, a - b\n",
        ),
        _t_ws(_EXACT),
    ),
    # DeepSeek-style group-limited routing: two `topk` calls (multi-output torch calls), the
    # first one's indices read after the second call.
    "two_topk": (
        _definition(
            "two_topk",
            {"T": {"type": "var"}},
            {"router_logits": _t(["T", 16])},
            {
                "weights": _t(["T", 2]),
                "ids": _t(["T", 2], "int64"),
                "group_idx": _t(["T", 2], "int64"),
            },
            _IMPORTS + "def run(router_logits):\n"
            "    scores = router_logits.sigmoid()\n"
            "    group_scores = scores.view(-1, 4, 4).amax(dim=-1)\n"
            "    group_idx = torch.topk(group_scores, k=2, dim=-1)[1]\n"
            "    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)\n"
            "    score_mask = group_mask.unsqueeze(-1).expand(-1, 4, 4).reshape(-1, 16)\n"
            "    masked = scores.masked_fill(score_mask == 0, 0.0)\n"
            "    weights, ids = torch.topk(masked, k=2, dim=-1)\n"
            "    return weights / weights.sum(dim=-1, keepdim=True), ids, group_idx\n",
        ),
        _t_ws(_EXACT),
    ),
    # Dynamic per-tensor fp8 quantisation: an fp8 output and a 0-d scale.
    "fp8_quant": (
        _definition(
            "fp8_quant",
            {"T": {"type": "var"}},
            {"x": _t(["T", 32], "bfloat16")},
            {"q": _t(["T", 32], "float8_e4m3fn"), "scale": _t([])},
            _IMPORTS + "def run(x):\n"
            "    xf = x.float()\n"
            "    scale = xf.abs().max().clamp(min=1e-12) / 448.0\n"
            "    q = (xf / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)\n"
            "    return q, scale\n",
        ),
        _ws(_FP8, _w("t3", {"T": 3}), _w("t17", {"T": 17})),
    ),
    # w8a8 dequantisation before a matmul: fp8 operands with per-row scales.
    "fp8_dequant_mm": (
        _definition(
            "fp8_dequant_mm",
            {"T": {"type": "var"}},
            {
                "a": _t(["T", 16], "float8_e4m3fn"),
                "b": _t([8, 16], "float8_e4m3fn"),
                "scale_a": _t(["T", 1]),
                "scale_b": _t([8, 1]),
            },
            {"out": _t(["T", 8])},
            _IMPORTS + "def run(a, b, scale_a, scale_b):\n"
            "    return (a.float() * scale_a) @ (b.float() * scale_b).t()\n",
        ),
        _ws(_MM, _w("t3", {"T": 3}), _w("t17", {"T": 17})),
    ),
    # vLLM's reshape_and_cache as a functional update: the cache cloned, new rows put at slots.
    "kv_cache_update": (
        _definition(
            "kv_cache_update",
            {"T": {"type": "var"}},
            {"key": _t(["T", 2, 8]), "key_cache": _t([32, 2, 8]), "slots": _t(["T"], "int64")},
            {"key_cache_out": _t([32, 2, 8])},
            _IMPORTS + "def make_inputs(axes, device):\n"
            "    t = axes['T']\n"
            "    return {'key': torch.randn(t, 2, 8, device=device),\n"
            "            'key_cache': torch.randn(32, 2, 8, device=device),\n"
            "            'slots': torch.randperm(32, device=device)[:t]}\n\n"
            "def run(key, key_cache, slots):\n"
            "    out = key_cache.clone()\n"
            "    out[slots] = key\n"
            "    return out\n",
            custom_inputs_entrypoint="make_inputs",
        ),
        _ws(_EXACT, *_custom_ws("key", "key_cache", "slots")),
    ),
    # The scattered-into buffer is read again afterwards: the scatter must not be in place.
    # A per-expert GEMM with its bias (`baddbmm`, MoE code) in bfloat16, and one with
    # beta != 1, which stays a torch call.
    "expert_baddbmm": (
        _definition(
            "expert_baddbmm",
            {"T": {"type": "var"}},
            {
                "x": _t([4, "T", 32], "bfloat16"),
                "w": _t([4, 32, 16], "bfloat16"),
                "b": _t([4, 1, 16], "bfloat16"),
            },
            {"y": _t([4, "T", 16], "bfloat16"), "z": _t([4, "T", 16], "bfloat16")},
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.silu(torch.baddbmm(b, x, w))\n"
            "    z = torch.baddbmm(b, x, w, beta=0.5)\n"
            "    return y, z\n",
        ),
        _t_ws(_BF16),
    ),
    "scatter_source_reused": (
        _definition(
            "scatter_source_reused",
            {"T": {"type": "var"}},
            {"x": _t(["T", 8]), "idx": _t(["T", 2], "int64")},
            {"out": _t(["T", 8]), "base_plus": _t(["T", 8])},
            _IMPORTS + "def make_inputs(axes, device):\n"
            "    t = axes['T']\n"
            "    return {'x': torch.randn(t, 8, device=device),\n"
            "            'idx': torch.randint(0, 8, (t, 2), device=device)}\n\n"
            "def run(x, idx):\n"
            "    base = x * 2.0\n"
            "    out = base.scatter(1, idx, 0.0)\n"
            "    return out, base + 1.0\n",
            custom_inputs_entrypoint="make_inputs",
        ),
        _ws(_EXACT, *_custom_ws("x", "idx")),
    ),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    return traced_problems(tmp_path_factory.mktemp("llm_splits"), PROBLEMS)


@pytest.mark.parametrize("name", ["rope_chunk", "qkv_split_unbind"])
def test_split_parts_are_views_not_torch_calls(traced: Traced, name: str) -> None:
    generated = generate_problem(traced, name, {})
    assert not any("split" in e or "unbind" in e for e in generated.externs), generated.externs
    assert generated.kernels >= 1


def test_an_fp8_cast_is_a_torch_call_after_a_fused_kernel(traced: Traced) -> None:
    generated = generate_problem(traced, "fp8_quant", {})
    assert generated.kernels >= 1
    assert list(generated.externs) == ["prims.convert_element_type.default"]


def test_baddbmm_with_unit_factors_is_a_gemm_with_the_bias_fused(traced: Traced) -> None:
    generated = generate_problem(traced, "expert_baddbmm", {"FUSE_GEMM": 1})
    assert "gemm" in generated.kinds
    assert list(generated.externs) == ["aten.baddbmm.default"]  # the beta=0.5 one alone


@pytest.mark.parametrize(
    ("name", "in_place"), [("kv_cache_update", True), ("scatter_source_reused", False)]
)
def test_a_scatter_into_a_buffer_read_by_nothing_else_is_in_place(
    traced: Traced, name: str, in_place: bool
) -> None:
    source = generate_problem(traced, name, {}).source
    plan = source[source.index("def _kg_plan0") : source.index("_KG_PLANS = ")]
    assert ("_.default(" in plan or "_.value(" in plan) == in_place, plan


@pytest.mark.parametrize(("device", "narrow"), [("cpu", False), ("cuda", True)])
def test_fp8_operands_are_read_by_kernels_on_a_gpu_only(
    traced: Traced, device: str, narrow: bool
) -> None:
    generated = generate_problem(traced, "fp8_dequant_mm", {}, device)
    casts = "prims.convert_element_type.default" in generated.externs
    assert casts != narrow, generated.externs


def test_every_problem_matches_the_reference_under_the_interpreter(
    traced: Traced, run_checks: RunChecks
) -> None:
    sources = {(name, "default"): generate_problem(traced, name, {}).source for name in PROBLEMS}
    assert_match_reference(traced, run_checks, "cpu", sources)
