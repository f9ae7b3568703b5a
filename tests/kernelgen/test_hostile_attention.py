"""Hostile problems for the attention kernel (`attention.py`, `attention_emit.py`,
`attention_mask.py`, knob FLASH): small problems written here (not added to gen_problems.py),
traced once per module as conftest.py's `gen_problems` does, generated at several knob settings
and checked against their reference under Triton's interpreter; plus which matmuls the matcher
takes for an attention, which of those get a position mask (a bounded key loop) and which keep
the stored-scores plan.

Each problem has what the matcher or the emitter could get wrong: Q and K given transposed,
query and key lengths that differ, head dims that are no power of two, a V head dim other than
Q's, float16 and bfloat16 tensors widened to float32, grouped heads (repeat_interleave,
enable_gqa, a broadcast key head), a +inf mask that a negative tensor scale turns into -inf, a
negative SDPA scale, a mask after and before a tanh soft-cap, a mask from an input, a finite
-1e9 mask with rows that have no key, a per-head window, two additive masks, rows without keys
under SDPA's guard, epilogues (heads merged, a residual, a cast, a flip, a sum, an attention of
an attention), Q = K = V, and references that are no attention the kernel could compute (the
row statistics also returned; probabilities permuted along the batch; transposed scores).
"""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, _definition, _t, _w, generate_problem, traced_problems
from reference_check import assert_match_reference

from kernelarc.kernelgen import relevant_knobs
from kernelarc.kernelgen.attention import attention_space
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import Kind
from kernelarc.kernelgen.space import AttentionSpace

RunChecks = Callable[[list[dict[str, Any]], str], dict[str, Any]]

#: float32 outputs: every element within 1e-3 (a lost key block or a wrong mask is far off).
_F32 = {"max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 1.0}
#: float16 outputs: a few ulps, every element.
_F16 = {"max_atol": 5e-3, "max_rtol": 5e-3, "required_matched_ratio": 1.0}
#: bfloat16 outputs: a few ulps, every element.
_BF16 = {"max_atol": 2e-2, "max_rtol": 2e-2, "required_matched_ratio": 1.0}

_IMPORTS = "import torch\nimport torch.nn.functional as F\n\n"


def _ws(tol: dict[str, Any], *workloads: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**w, "tolerance": tol} for w in workloads]


def _const(**values: int) -> dict[str, Any]:
    return {k: {"type": "const", "value": v} for k, v in values.items()}


def _var(*names: str) -> dict[str, Any]:
    return {n: {"type": "var"} for n in names}


def _qkv(dtype: str = "float32", kv_heads: str | int = "H") -> dict[str, Any]:
    return {
        "q": _t(["B", "H", "L", "D"], dtype),
        "k": _t(["B", kv_heads, "L", "D"], dtype),
        "v": _t(["B", kv_heads, "L", "D"], dtype),
    }


_BHLD = ["B", "H", "L", "D"]

PROBLEMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # Q and K given transposed ([B, H, D, M], [B, H, D, N]: the score matmul's operands are
    # strided views), M != N, head dims 40 (Q, K) and 24 (V), float16 widened to float32; the
    # heads merged back, a residual added, cast back to float16.
    "ha_layout": (
        _definition(
            "ha_layout",
            {**_var("B", "M", "N"), **_const(H=2, D=40, E=24)},
            {
                "qt": _t(["B", "H", "D", "M"], "float16"),
                "kt": _t(["B", "H", "D", "N"], "float16"),
                "v": _t(["B", "H", "N", "E"], "float16"),
                "res": _t(["B", "M", 48], "float16"),
            },
            {"o": _t(["B", "M", 48], "float16")},
            _IMPORTS + "def run(qt, kt, v, res):\n"
            "    b, h, d, m = qt.shape\n"
            "    s = (qt.float().transpose(-1, -2) @ kt.float()) / d ** 0.5\n"
            "    o = torch.softmax(s, -1) @ v.float()\n"
            "    o = o.transpose(1, 2).reshape(b, m, h * v.shape[-1])\n"
            "    return (o + res.float()).half()\n",
        ),
        _ws(_F16, _w("b1", {"B": 1, "M": 19, "N": 45}), _w("b2", {"B": 2, "M": 33, "N": 7})),
    ),
    # Grouped heads: K and V repeated (2 -> 4 heads) for a causal SDPA; SDPA's enable_gqa.
    # float16, head dim 24; 29 keys (a ragged key block) and 32 (whole 16-key blocks).
    "ha_gqa": (
        _definition(
            "ha_gqa",
            {**_var("L"), **_const(B=1, H=4, G=2, D=24)},
            _qkv("float16", "G"),
            {"o": _t(_BHLD, "float16"), "o2": _t(_BHLD, "float16")},
            _IMPORTS + "def run(q, k, v):\n"
            "    kk = k.repeat_interleave(2, dim=1)\n"
            "    vv = v.repeat_interleave(2, dim=1)\n"
            "    o = F.scaled_dot_product_attention(q, kk, vv, is_causal=True)\n"
            "    o2 = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)\n"
            "    return o, o2\n",
        ),
        _ws(_F16, _w("l29", {"L": 29}), _w("l32", {"L": 32})),
    ),
    # A causal mask written with +inf that a negative per-head scale (an input) turns into
    # -inf after the mask: no position mask may be assumed (every key block visited). SDPA with
    # a negative scale and a causal bool mask (its math path: an additive -inf mask, bounded).
    "ha_neg_scale": (
        _definition(
            "ha_neg_scale",
            {**_var("B"), **_const(H=2, L=37, D=24)},
            {**_qkv(), "t": _t(["H", 1, 1])},
            {"o": _t(_BHLD), "o2": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v, t):\n"
            "    n = q.shape[2]\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    s = (q @ k.transpose(-1, -2)).masked_fill(i[None, :] > i[:, None], float('inf'))\n"
            "    o = torch.softmax(s * -(t.abs() + 0.5) * 0.2, -1) @ v\n"
            "    j = torch.arange(n, device=q.device)\n"
            "    keep = j[None, :] <= j[:, None]\n"
            "    o2 = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=-0.3)\n"
            "    return o, o2\n",
        ),
        _ws(_F32, _w("b1", {"B": 1}), _w("b2", {"B": 2})),
    ),
    # A tanh soft-cap, then a causal mask (a position mask: bounded), and a causal mask, then
    # the soft-cap (tanh(-inf) = -1: the masked keys weigh exp(-2 - m), no bound may apply).
    "ha_softcap": (
        _definition(
            "ha_softcap",
            {**_var("L"), **_const(B=1, H=2, D=32)},
            _qkv(),
            {"after": _t(_BHLD), "before": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v):\n"
            "    n = q.shape[2]\n"
            "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
            "    s = (q @ k.transpose(-1, -2)) * 32 ** -0.5\n"
            "    a = (2.0 * torch.tanh(s / 2.0)).masked_fill(~keep, float('-inf'))\n"
            "    keep2 = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
            "    s2 = (q @ k.transpose(-1, -2)) * 32 ** -0.5\n"
            "    b = 2.0 * torch.tanh(s2.masked_fill(~keep2, float('-inf')) / 2.0)\n"
            "    return torch.softmax(a, -1) @ v, torch.softmax(b, -1) @ v\n",
        ),
        _ws(_F32, _w("l45", {"L": 45}), _w("l48", {"L": 48})),
    ),
    # A mask read from an input (bool, broadcast over heads: not a position mask); a causal mask
    # with an offset filled with -1e9 (finite: the first 25 rows have no key and average V).
    "ha_input_mask": (
        _definition(
            "ha_input_mask",
            {**_var("B"), **_const(H=2, L=40, D=16)},
            {**_qkv(), "keepm": _t(["B", 1, "L", "L"], "bool")},
            {"o": _t(_BHLD), "o2": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v, keepm):\n"
            "    n = q.shape[2]\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    o = torch.softmax(s.masked_fill(~keepm, float('-inf')), -1) @ v\n"
            "    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-25)\n"
            "    s2 = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    o2 = torch.softmax(s2.masked_fill(~causal, -1e9), -1) @ v\n"
            "    return o, o2\n",
        ),
        _ws(_F32, _w("b2", {"B": 2})),
    ),
    # A window whose width depends on the head (positions and the head index only), and two
    # additive position masks (causal and a window's lower bound: the bound uses one of them).
    "ha_head_window": (
        _definition(
            "ha_head_window",
            {**_var("L"), **_const(B=1, H=3, D=16)},
            _qkv(),
            {"o": _t(_BHLD), "o2": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v):\n"
            "    h, n = q.shape[1], q.shape[2]\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    w = (torch.arange(h, device=q.device) + 1) * 12\n"
            "    keep = (i[None, None, :] <= i[None, :, None])"
            " & (i[None, None, :] > i[None, :, None] - w[:, None, None])\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    o = torch.softmax(torch.where(keep, s, float('-inf')), -1) @ v\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    a1 = torch.zeros(n, n, device=q.device)"
            ".masked_fill(i[None, :] > i[:, None], float('-inf'))\n"
            "    a2 = torch.zeros(n, n, device=q.device)"
            ".masked_fill(i[None, :] <= i[:, None] - 20, float('-inf'))\n"
            "    o2 = torch.softmax(s + a1 + a2, -1) @ v\n"
            "    return o, o2\n",
        ),
        _ws(_F32, _w("l70", {"L": 70}), _w("l64", {"L": 64})),
    ),
    # SDPA whose first 20 rows have no key (its math path's guard gives them 0): a position
    # mask (programs whose rows have no key skip the loop), and the same rows ANDed with a mask
    # from an input (every block visited).
    "ha_sdpa_rows": (
        _definition(
            "ha_sdpa_rows",
            {**_var("L"), **_const(B=1, H=2, D=16)},
            {**_qkv(), "keepm": _t(["B", 1, "L", "L"], "bool")},
            {"o": _t(_BHLD), "o2": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v, keepm):\n"
            "    n = q.shape[2]\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    keep = i[None, :] <= i[:, None] - 20\n"
            "    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)\n"
            "    j = torch.arange(n, device=q.device)\n"
            "    keep2 = keepm & (j[None, :] <= j[:, None] - 20)\n"
            "    o2 = F.scaled_dot_product_attention(q, k, v, attn_mask=keep2)\n"
            "    return o, o2\n",
        ),
        _ws(_F32, _w("l50", {"L": 50}), _w("l64", {"L": 64})),
    ),
    # float16 throughout (scores and softmax in float16), 3-d bmm, head dim 8, M != N, one query
    # row, whole key blocks.
    # bfloat16 end to end, as model code writes it: grouped heads by repeat_interleave, the
    # scale first (`0.25 * s`), a causal mask from arange comparisons, softmax in float32, heads
    # merged and a residual added (FUSE_SDPA: one is_causal call, the epilogue a kernel).
    "ha_bf16_gqa_causal": (
        _definition(
            "ha_bf16_gqa_causal",
            {**_var("B", "L"), **_const(H=4, D=16)},
            {
                "q": _t(_BHLD, "bfloat16"),
                "k": _t(["B", 2, "L", "D"], "bfloat16"),
                "v": _t(["B", 2, "L", "D"], "bfloat16"),
                "res": _t(["B", "L", 64], "bfloat16"),
            },
            {"o": _t(["B", "L", 64], "bfloat16")},
            _IMPORTS + "def run(q, k, v, res):\n"
            "    b, h, n, d = q.shape\n"
            "    k = k.repeat_interleave(2, dim=1)\n"
            "    v = v.repeat_interleave(2, dim=1)\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    s = 0.25 * (q @ k.transpose(-1, -2))\n"
            "    s = s.masked_fill(i[None, :] > i[:, None], float('-inf'))\n"
            "    p = torch.softmax(s.float(), dim=-1).to(q.dtype)\n"
            "    o = (p @ v).transpose(1, 2).reshape(b, n, h * d)\n"
            "    return o + res\n",
        ),
        _ws(_BF16, _w("b1l33", {"B": 1, "L": 33}), _w("b2l64", {"B": 2, "L": 64})),
    ),
    "ha_fp16_plain": (
        _definition(
            "ha_fp16_plain",
            {**_var("M", "N"), **_const(Z=3, D=8)},
            {
                "q": _t(["Z", "M", "D"], "float16"),
                "k": _t(["Z", "N", "D"], "float16"),
                "v": _t(["Z", "N", "D"], "float16"),
            },
            {"o": _t(["Z", "M", "D"], "float16")},
            _IMPORTS + "def run(q, k, v):\n"
            "    return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.4, -1), v)\n",
        ),
        _ws(
            _F16,
            _w("m17n31", {"M": 17, "N": 31}),
            _w("m1n80", {"M": 1, "N": 80}),
            _w("m32n64", {"M": 32, "N": 64}),
        ),
    ),
    # Q = K = V from one input, with pointwise prologues on Q (a scale) and V (a ReLU).
    "ha_self": (
        _definition(
            "ha_self",
            {**_var("L"), **_const(Z=3, D=40)},
            {"x": _t(["Z", "L", "D"])},
            {"o": _t(["Z", "L", "D"])},
            _IMPORTS + "def run(x):\n"
            "    s = torch.bmm(x * 0.5, x.transpose(1, 2)) * 40 ** -0.5\n"
            "    return torch.bmm(torch.softmax(s, -1), torch.relu(x))\n",
        ),
        _ws(_F32, _w("l33", {"L": 33})),
    ),
    # Epilogues: the output read flipped along its rows (stored, then a pointwise kernel), summed
    # over the head dim, and an attention whose Q is another attention's output.
    "ha_epilogues": (
        _definition(
            "ha_epilogues",
            {**_var("L"), **_const(B=1, H=2, D=16)},
            _qkv(),
            {"f": _t(_BHLD), "r": _t(["B", "H", "L"]), "c": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v):\n"
            "    o = torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v\n"
            "    f = o + o.flip(-2)\n"
            "    o2 = torch.softmax(q @ k.transpose(-1, -2) * 0.3, -1) @ v\n"
            "    r = o2.sum(-1)\n"
            "    o3 = torch.softmax(q @ k.transpose(-1, -2) * 0.2, -1) @ v\n"
            "    c = torch.softmax(o3 @ k.transpose(-1, -2) * 0.25, -1) @ v\n"
            "    return f, r, c\n",
        ),
        _ws(_F32, _w("l37", {"L": 37})),
    ),
    # One key head broadcast over three query heads (matmul broadcasting), bfloat16 widened; the
    # same by einsum with an additive causal mask from triu of a -inf tensor.
    "ha_mqa": (
        _definition(
            "ha_mqa",
            {**_var("L"), **_const(B=2, H=3, D=32)},
            _qkv("bfloat16", 1),
            {"o": _t(_BHLD, "bfloat16"), "o2": _t(_BHLD, "bfloat16")},
            _IMPORTS + "def run(q, k, v):\n"
            "    s = (q.float() @ k.float().transpose(-1, -2)) * 32 ** -0.5\n"
            "    o = (torch.softmax(s, -1) @ v.float()).bfloat16()\n"
            "    s2 = torch.einsum('bhqd,bzkd->bhqk', q.float(), k.float()) * 0.2\n"
            "    n = q.shape[2]\n"
            "    s2 = s2 + torch.full((n, n), float('-inf'), device=q.device).triu(1)\n"
            "    o2 = torch.einsum('bhqk,bzkd->bhqd', torch.softmax(s2, -1), v.float())\n"
            "    return o, o2.bfloat16()\n",
        ),
        _ws(_BF16, _w("l41", {"L": 41})),
    ),
    # No attention kernel: the row maximum and sum of a hand-written softmax are also read by
    # a logsumexp output; a softmax's scores also read by torch.logsumexp.
    "ha_lse": (
        _definition(
            "ha_lse",
            {**_var("B"), **_const(H=2, L=40, D=16)},
            _qkv(),
            {
                "o": _t(_BHLD),
                "lse": _t(["B", "H", "L"]),
                "o2": _t(_BHLD),
                "lse2": _t(["B", "H", "L"]),
            },
            _IMPORTS + "def run(q, k, v):\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    m = s.amax(-1, keepdim=True)\n"
            "    e = torch.exp(s - m)\n"
            "    l = e.sum(-1, keepdim=True)\n"
            "    o = (e / l) @ v\n"
            "    s2 = (q @ k.transpose(-1, -2)) * 0.5\n"
            "    o2 = torch.softmax(s2, -1) @ v\n"
            "    return o, (m + torch.log(l)).squeeze(-1), o2, torch.logsumexp(s2, -1)\n",
        ),
        _ws(_F32, _w("b1", {"B": 1})),
    ),
    # No attention kernel either: the probabilities permuted along the batch dims before @ V,
    # and scores computed as K @ Q^T, transposed before the softmax (square: the shapes fit).
    "ha_perm": (
        _definition(
            "ha_perm",
            {**_var("L"), **_const(B=2, H=3, D=16)},
            _qkv(),
            {"o": _t(_BHLD), "o2": _t(_BHLD)},
            _IMPORTS + "def run(q, k, v):\n"
            "    p = torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1)\n"
            "    o = (p.transpose(0, 1) @ v.transpose(0, 1)).transpose(0, 1)\n"
            "    st = k @ q.transpose(-1, -2) * 0.25\n"
            "    o2 = torch.softmax(st.transpose(-1, -2), -1) @ v\n"
            "    return o, o2\n",
        ),
        _ws(_F32, _w("l21", {"L": 21})),
    ),
    # Two layers of attention with one causal mask (made once, read by both): both are
    # attention kernels, the mask recomputed in each; a third reads the second's scores too
    # (they are an output): not an attention.
    "ha_shared_mask": (
        _definition(
            "ha_shared_mask",
            {**_var("B"), **_const(H=2, L=40, D=16)},
            _qkv(),
            {"o": _t(_BHLD), "s2": _t(["B", "H", "L", "L"])},
            _IMPORTS + "def run(q, k, v):\n"
            "    n = q.shape[2]\n"
            "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    h = torch.softmax(s.masked_fill(~keep, float('-inf')), -1) @ v\n"
            "    s = (h @ k.transpose(-1, -2)) * 0.25\n"
            "    h = torch.softmax(s.masked_fill(~keep, float('-inf')), -1) @ v\n"
            "    s2 = (h @ k.transpose(-1, -2)) * 0.25\n"
            "    return torch.softmax(s2, -1) @ v, s2\n",
        ),
        _ws(_F32, _w("b1", {"B": 1})),
    ),
    # Four things that look like a softmax but are not one (review of 2026-12-06: each was
    # taken for an attention and computed wrongly): a sum plus one, a temperature after the
    # maximum, a numerator of unmasked scores beside a masked maximum, and a guard whose
    # fallback is not 0. Each output has scores of its own.
    "ha_not_softmax": (
        _definition(
            "ha_not_softmax",
            {**_var("B"), **_const(H=2, L=40, D=16)},
            _qkv(),
            {f"o{i}": _t(_BHLD) for i in range(4)},
            _IMPORTS + "def run(q, k, v):\n"
            "    n = q.shape[2]\n"
            "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    e = torch.exp(s - s.amax(-1, keepdim=True))\n"
            "    o0 = (e / (e.sum(-1, keepdim=True) + 1.0)) @ v\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    e = torch.exp((s - s.amax(-1, keepdim=True)) * 2.0)\n"
            "    o1 = (e / e.sum(-1, keepdim=True)) @ v\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    m = s.masked_fill(~keep, float('-inf')).amax(-1, keepdim=True)\n"
            "    e = torch.exp(s - m)\n"
            "    o2 = (e / e.sum(-1, keepdim=True)) @ v\n"
            "    s = (q @ k.transpose(-1, -2)) * 0.25\n"
            "    s = s.masked_fill(~keep.tril(-20), float('-inf'))\n"
            "    ok = torch.any(s != float('-inf'), -1, keepdim=True)\n"
            "    o3 = torch.where(ok, torch.softmax(s, -1), 0.25) @ v\n"
            "    return o0, o1, o2, o3\n",
        ),
        _ws(_F32, _w("b1", {"B": 1})),
    ),
    # A guard negated with `~` (bitwise_not): still the finite-row guard (a review found the
    # loop's value of the guard rendered as `~True`, the Python int -2, zeroing every row).
    # A V scaled far past float16's range: kept float32 in the dot (FLASH_DOT16 rounds only
    # widenings and scalings by at most 1). A matmul whose operand divides by a tensor along
    # K: padded lanes are 0 for the dot, not 0 / 0.
    "ha_guards_and_ranges": (
        _definition(
            "ha_guards_and_ranges",
            {**_var("B"), **_const(H=2, L=40, D=16)},
            _qkv("float16"),
            {"o": _t(_BHLD), "big": _t(_BHLD), "g": _t(["B", "H", "D", "D"])},
            _IMPORTS + "def run(q, k, v):\n"
            "    n = q.shape[2]\n"
            "    s = (q.float() @ k.float().transpose(-1, -2)) * 0.25\n"
            "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-20)\n"
            "    s = s.masked_fill(~keep, float('-inf'))\n"
            "    dead = ~torch.any(s != float('-inf'), -1, keepdim=True)\n"
            "    o = torch.where(dead, 0.0, torch.softmax(s, -1)) @ v.float()\n"
            "    t = (q.float() @ k.float().transpose(-1, -2)) * 0.25\n"
            "    big = torch.softmax(t, -1) @ (v.float() * 1e5)\n"
            "    d = k.float()[..., 0] * 0.0\n"
            "    g = (q.float().transpose(-1, -2) / (d[:, :, None, :] + 1.0)) @ v.float()\n"
            "    return o, big * 1e-5, g\n",
        ),
        # Probabilities in float16 for the dots (FLASH_DOT16): float16's tolerance.
        _ws(_F16, _w("b1", {"B": 1})),
    ),
}

#: Problems the attention kernel must serve, and how many attentions each has.
ATTENTIONS = {
    "ha_layout": 1,
    "ha_gqa": 2,
    "ha_neg_scale": 2,
    "ha_softcap": 2,
    "ha_input_mask": 2,
    "ha_head_window": 2,
    "ha_sdpa_rows": 2,
    "ha_fp16_plain": 1,
    "ha_bf16_gqa_causal": 1,
    "ha_self": 1,
    "ha_epilogues": 4,
    "ha_mqa": 2,
    "ha_guards_and_ranges": 2,
    "ha_shared_mask": 2,
}
#: Problems no attention kernel may serve (ha_perm's matmuls pass the matcher, the emitter
#: refuses them: the probabilities are read at other indices than the score tile's).
NO_ATTENTION = ("ha_lse", "ha_perm", "ha_not_softmax")

#: The knob settings checked: the default, the stored-scores plan, 16 x 16 tiles (several key
#: blocks per row, programs whose rows have no key, whole key blocks at 32, 48 and 64 keys),
#: float32 dots on widened 16-bit tensors.
VARIANTS: dict[str, dict[str, int]] = {
    "default": {},
    "no-flash": {"FLASH": 0},
    "tiles16": {"FLASH_M": 16, "FLASH_N": 16},
    "dot32": {"FLASH_DOT16": 0},
    "sdpa": {"FUSE_SDPA": 1},
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    root = tmp_path_factory.mktemp("hostile_attention")
    return traced_problems(root, PROBLEMS)


def _attention_spaces(traced: Traced, name: str) -> list[AttentionSpace]:
    """The attention of every matmul of the first workload's graph that anchors one, in graph
    order (as the scheduler asks before anything is stored)."""
    op_graph = traced[name][1].workloads[0].graph
    assert op_graph is not None, traced[name][1].workloads[0].error
    graph = build_graph(op_graph)
    spaces = [
        attention_space(graph, node, set())
        for node in list(graph.nodes.values())
        if node.kind == Kind.MATMUL
    ]
    return [s for s in spaces if s is not None]


def test_attention_problems_match_the_reference(hostile: Traced, run_checks: RunChecks) -> None:
    assert set(PROBLEMS) == set(ATTENTIONS) | set(NO_ATTENTION)
    sources: dict[tuple[str, str], str] = {}
    for name in PROBLEMS:
        for label, knobs in VARIANTS.items():
            generated = generate_problem(hostile, name, knobs)
            flash = knobs.get("FLASH", 1) == 1 and name in ATTENTIONS
            if label != "sdpa":
                assert ("attention" in generated.kinds) == flash, (name, label, generated.kinds)
            sources[(name, label)] = generated.source
    assert_match_reference(hostile, run_checks, "cpu", sources)


def test_which_matmuls_are_attentions(hostile: Traced) -> None:
    for name, count in ATTENTIONS.items():
        assert len(_attention_spaces(hostile, name)) == count, name
    # The row statistics are read by another output: the matcher refuses.
    assert _attention_spaces(hostile, "ha_lse") == []
    # Every attention of one workload's plan is one kernel, nothing else is launched.
    for name in ("ha_layout", "ha_gqa", "ha_softcap", "ha_sdpa_rows", "ha_fp16_plain"):
        generated = generate_problem(hostile, name, {})
        assert generated.kinds == frozenset({"attention"}), name
        assert (generated.kernels, generated.externs) == (ATTENTIONS[name], ()), name
    [layout] = _attention_spaces(hostile, "ha_layout")
    assert (layout.m, layout.k, layout.d, layout.n) == (19, 45, 40, 24)


def test_which_attentions_bound_their_key_loop(hostile: Traced) -> None:
    def masked(name: str) -> list[bool]:
        return [bool(s.mask) for s in _attention_spaces(hostile, name)]

    # The mask after the soft-cap bounds the loop; before it, tanh(-inf) is finite.
    assert masked("ha_softcap") == [True, False]
    # -inf only after a negative tensor scale: no bound; SDPA's -inf mask, a negative scale on
    # Q and K (before the mask): bounded.
    assert masked("ha_neg_scale") == [False, True]
    # A mask from an input, a finite mask: every key block.
    assert masked("ha_input_mask") == [False, False]
    assert masked("ha_head_window") == [True, True]
    assert masked("ha_mqa") == [False, True]
    # SDPA's guard (rows without a key give 0) is recognised for both masks.
    rows = _attention_spaces(hostile, "ha_sdpa_rows")
    assert [bool(s.mask) for s in rows] == [True, False]
    assert all(s.row_any for s in rows)
    # Both of each workload's plan (two workloads).
    bounded = generate_problem(hostile, "ha_head_window", {"FLASH_M": 16, "FLASH_N": 16}).source
    assert bounded.count("for k0 in range(k_lo, ") == 2 * 2
    # And split: the blocks the window keeps whole run without the mask, between masked ones.
    assert bounded.count("for k0 in range(f_lo, f_hi, KBLOCK)") == 2 * 2
    assert bounded.count("for k0 in range(f_hi, k_hi, KBLOCK)") == 2 * 2


def test_which_attentions_become_one_sdpa_call(hostile: Traced) -> None:
    """FUSE_SDPA: only a 16-bit attention `scaled_dot_product_attention` computes exactly is that
    call (scaling by positive constants, at most a mask that keeps exactly the keys at or before
    each query); float32 or widened 16-bit operands, a soft-cap, a bias, a window, a mask from
    an input, a mask with an offset or written with +inf keep the generated kernel."""
    calls = {}
    for name in PROBLEMS:
        generated = generate_problem(hostile, name, {"FUSE_SDPA": 1})
        source = generated.source
        calls[name] = source.count("torch.ops.aten.scaled_dot_product_attention.default(")
        if calls[name]:
            assert "FUSE_SDPA" in relevant_knobs(generated), name
            assert "attention" not in generated.kinds, name
    # Over all workloads' plans, the attentions that are exactly the call.
    assert {name: count for name, count in calls.items() if count} == {
        "ha_fp16_plain": 3,
        "ha_bf16_gqa_causal": 2,
    }
    causal = generate_problem(hostile, "ha_bf16_gqa_causal", {"FUSE_SDPA": 1}).source
    assert causal.count(", None, 0.0, True, scale=0.25)") == 2
