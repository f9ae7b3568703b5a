"""Hostile problems for the FUSE_SDPA rewrite (`attention_sdpa.py`, `causal_mask.py`): 16-bit
attentions written as model code writes them, checked at FUSE_SDPA=1 against their reference
under Triton's interpreter, and counted: which attentions become one
`scaled_dot_product_attention` call, and which of those pass `is_causal`.

Causal masks the call must take in other spellings (`i >= j`, `~(j > i)`, `j - i <= 0`,
`j < i + 1`, `triu(ones, 1)` masked in, an additive `full(-inf).triu(1)`, nanoGPT's
`tril(ones) == 0`, `tril(ones).bool()`, GQA by expand + reshape, 3-d inputs, a V head dim of
its own, an fp16 softmax, a broadcast key head) and near misses it must not take (a diagonal
offset, a strict mask, an anti-causal mask from swapped views or transposed scores, causal
ANDed with a padding bound, positions that overflow int32, float positions, a batch-dependent
offset, a bottom-right aligned mask with fewer queries than keys, a negative scale, a
soft-cap; probabilities transposed or permuted along the batch, or rounded through float8,
before P @ V; scores rounded through the other 16-bit type).
"""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, _definition, _t, _w, generate_problem, traced_problems
from reference_check import assert_match_reference

RunChecks = Callable[[list[dict[str, Any]], str], dict[str, Any]]

_BF16 = {"max_atol": 2e-2, "max_rtol": 2e-2, "required_matched_ratio": 1.0}
_F16 = {"max_atol": 5e-3, "max_rtol": 5e-3, "required_matched_ratio": 1.0}
_BHLD = ["B", "H", "L", "D"]
_IMPORTS = "import torch\nimport torch.nn.functional as F\n\n"
#: What every problem's body starts with: positions, -inf.
_PRE = "    n = q.shape[-2]\n    i = torch.arange(n, device=q.device)\n    inf = float('inf')\n"
_CALL = "torch.ops.aten.scaled_dot_product_attention.default("
_CAUSAL = ", True, scale="


def _attn(scale: float, scores: str) -> str:
    """An attention of its own scores (`s`), masked by `scores` (an expression of s), softmax
    in float32, probabilities cast back to V's dtype."""
    return (
        f"    s = (q @ k.transpose(-1, -2)) * {scale}\n"
        f"    outs.append(torch.softmax(({scores}).float(), -1).to(v.dtype) @ v)\n"
    )


def _problem(
    name: str,
    bodies: list[str],
    *,
    dtype: str = "bfloat16",
    inputs: dict[str, Any] | None = None,
    out_shape: list[str] | None = None,
    axes: dict[str, Any] | None = None,
    workloads: list[dict[str, Any]] | None = None,
    args: str = "q, k, v",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A problem of several attentions, one output each."""
    tol = _BF16 if dtype == "bfloat16" else _F16
    outputs = {f"o{n}": _t(out_shape or _BHLD, dtype) for n in range(len(bodies))}
    reference = (
        _IMPORTS + f"def run({args}):\n" + _PRE + "    outs = []\n" + "".join(bodies)
    ) + "    return tuple(outs)\n"
    definition = _definition(
        name,
        axes
        or {"L": {"type": "var"}, **{a: {"type": "const", "value": 2} for a in "BH"}}
        | {"D": {"type": "const", "value": 16}},
        inputs or {x: _t(_BHLD, dtype) for x in ("q", "k", "v")},
        outputs,
        reference,
    )
    loads = workloads or [_w("l19", {"L": 19}), _w("l32", {"L": 32})]
    return definition, [{**w, "tolerance": tol} for w in loads]


_NANO = (
    "    s = (q @ k.transpose(-1, -2)) * 0.2\n"
    "    mask = torch.tril(torch.ones(n, n, device=q.device)).view(1, 1, n, n)\n"
    "    outs.append(torch.softmax(s.masked_fill(mask == 0, -inf).float(), -1).to(v.dtype) @ v)\n"
)
_TRIL_BOOL = (
    "    s = (q @ k.transpose(-1, -2)) * 0.15\n"
    "    keep = torch.tril(torch.ones(n, n, device=q.device)).bool()\n"
    "    outs.append(torch.softmax(s.masked_fill(~keep, -inf).float(), -1).to(v.dtype) @ v)\n"
)
_ONES = "torch.ones(n, n, dtype=torch.bool, device=q.device)"

PROBLEMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # Causal in other spellings: each must be one is_causal call.
    "hs_causal_forms": _problem(
        "hs_causal_forms",
        [
            _attn(0.25, "torch.where(i[:, None] >= i[None, :], s, -inf)"),
            _attn(0.3, "torch.where(~(i[None, :] > i[:, None]), s, -inf)"),
            _attn(0.2, "torch.where((i[None, :] - i[:, None]) <= 0, s, -inf)"),
            _attn(0.35, f"s.masked_fill(torch.triu({_ONES}, 1), -inf)"),
            _attn(0.15, "s + torch.full((n, n), -inf, device=q.device).triu(1)"),
            _attn(0.4, "torch.where(i.view(1, n) < i.view(n, 1) + 1, s, -inf)"),
            _attn(0.45, "(s / 2.0).masked_fill(i[None, :] > i[:, None], -inf) * 0.5"),
        ],
    ),
    # The causal masks nanoGPT-style code writes: float tril of ones compared with 0 / cast.
    "hs_tril_float": _problem("hs_tril_float", [_NANO, _TRIL_BOOL]),
    # Near misses: none is causal (every row keeps a key: no NaN rows in the reference).
    "hs_near_misses": _problem(
        "hs_near_misses",
        [
            _attn(0.25, f"s.masked_fill(~{_ONES}.tril(1), -inf)"),
            _attn(0.3, "torch.where(i.view(n, 1) <= i.view(1, n), s, -inf)"),
            _attn(0.2, "torch.where((i[None, :] <= i[:, None]) & (i[None, :] < 12), s, -inf)"),
            _attn(0.35, "s.transpose(-1, -2).masked_fill(i[None, :] > i[:, None], -inf).mT"),
            _attn(0.15, "torch.where(i.float()[None, :] <= i.float()[:, None], s, -inf)"),
            _attn(0.4, "s * -0.5"),
            _attn(0.45, "30.0 * torch.tanh(s.masked_fill(i[None, :] > i[:, None], -inf) / 30.0)"),
        ],
    ),
    # Positions times 2**30 in int32 (and 2**62 in int64) wrap around: `j * c <= i * c` is an
    # affine form of causal's but keeps other keys.
    "hs_overflow": _problem(
        "hs_overflow",
        [
            "    w = torch.arange(n, dtype=torch.int32, device=q.device) * (2 ** 30)\n"
            + _attn(0.25, "torch.where(w[None, :] <= w[:, None], s, -inf)"),
            "    w = torch.arange(n, device=q.device) * (2 ** 62)\n"
            + _attn(0.3, "torch.where(w[None, :] <= w[:, None], s, -inf)"),
        ],
    ),
    # A causal mask whose offset is the batch index (batch 0 causal, batch 1 one more key).
    "hs_batch_mask": _problem(
        "hs_batch_mask",
        [
            "    b = torch.arange(q.shape[0], device=q.device)[:, None, None, None]\n"
            + _attn(0.25, "torch.where(i[None, :] <= i[:, None] + b, s, -inf)"),
        ],
    ),
    # M queries, N keys: top-left causal (the call's), bottom-right (decode with a cache: not
    # the call unless M == N), and plain.
    "hs_offsets": _problem(
        "hs_offsets",
        [
            "    j = torch.arange(k.shape[-2], device=q.device)\n"
            + _attn(0.25, "torch.where(j[None, :] <= i[:, None], s, -inf)"),
            _attn(0.3, "torch.where(j[None, :] <= i[:, None] + (k.shape[-2] - n), s, -inf)"),
        ],
        inputs={
            "q": _t(["B", "H", "M", "D"], "bfloat16"),
            "k": _t(["B", "H", "N", "D"], "bfloat16"),
            "v": _t(["B", "H", "N", "D"], "bfloat16"),
        },
        out_shape=["B", "H", "M", "D"],
        axes={"M": {"type": "var"}, "N": {"type": "var"}}
        | {"B": {"type": "const", "value": 1}, "H": {"type": "const", "value": 2}}
        | {"D": {"type": "const", "value": 16}},
        workloads=[_w("m9n21", {"M": 9, "N": 21}), _w("m21n21", {"M": 21, "N": 21})],
    ),
    # 3-d inputs without heads (torch.bmm), causal.
    "hs_3d": _problem(
        "hs_3d",
        [
            "    s = torch.bmm(q, k.transpose(1, 2)) * 0.25\n"
            "    s = s.masked_fill(i[None, :] > i[:, None], -inf)\n"
            "    outs.append(torch.bmm(torch.softmax(s.float(), -1).to(v.dtype), v))\n"
        ],
        inputs={x: _t(["Z", "L", "D"], "bfloat16") for x in ("q", "k", "v")},
        out_shape=["Z", "L", "D"],
        axes={"L": {"type": "var"}, "Z": {"type": "const", "value": 3}}
        | {"D": {"type": "const", "value": 16}},
    ),
    # float16 throughout: the softmax in float16, the default 1/sqrt(d) scale; V's head dim 24;
    # grouped heads by expand + reshape (causal); one key head broadcast over the query heads.
    "hs_fp16_shapes": _problem(
        "hs_fp16_shapes",
        [
            "    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5\n"
            "    outs.append(torch.softmax(s, -1) @ v)\n",
            "    s = (q @ k.transpose(-1, -2)) * 0.3\n"
            "    outs.append((torch.softmax(s, -1) @ v24)[..., :16])\n",
            "    b, g, l, d = kg.shape\n"
            "    kk = kg[:, :, None].expand(b, g, 2, l, d).reshape(b, 2 * g, l, d)\n"
            "    vv = vg[:, :, None].expand(b, g, 2, l, d).reshape(b, 2 * g, l, d)\n"
            "    s = (q @ kk.transpose(-1, -2)) * 0.25\n"
            "    s = s.masked_fill(i[None, :] > i[:, None], -inf)\n"
            "    outs.append(torch.softmax(s.float(), -1).half() @ vv)\n",
            "    s = (q @ kg[:, :1].transpose(-1, -2)) * 0.2\n"
            "    outs.append(torch.softmax(s, -1) @ vg[:, :1])\n",
        ],
        dtype="float16",
        inputs={
            "q": _t(["B", 4, "L", "D"], "float16"),
            "k": _t(["B", 4, "L", "D"], "float16"),
            "v": _t(["B", 4, "L", "D"], "float16"),
            "v24": _t(["B", 4, "L", 24], "float16"),
            "kg": _t(["B", 2, "L", "D"], "float16"),
            "vg": _t(["B", 2, "L", "D"], "float16"),
        },
        out_shape=["B", 4, "L", "D"],
        args="q, k, v, v24, kg, vg",
    ),
    # Probabilities permuted along the batch dims before P @ V (B == H: the shapes fit).
    "hs_probs_batch_perm": _problem(
        "hs_probs_batch_perm",
        [
            "    p = torch.softmax((q @ k.transpose(-1, -2)).float() * 0.25, -1).to(v.dtype)\n"
            "    outs.append((p.transpose(0, 1) @ v.transpose(0, 1)).transpose(0, 1))\n"
        ],
    ),
    # Probabilities transposed (P^T @ V: square scores).
    "hs_probs_transposed": _problem(
        "hs_probs_transposed",
        [
            "    p = torch.softmax((q @ k.transpose(-1, -2)).float() * 0.25, -1).to(v.dtype)\n"
            "    outs.append(p.transpose(-1, -2) @ v)\n"
        ],
    ),
    # Probabilities rounded through float8 before P @ V.
    "hs_probs_fp8": _problem(
        "hs_probs_fp8",
        [
            "    p = torch.softmax((q @ k.transpose(-1, -2)).float() * 0.25, -1)\n"
            "    outs.append(p.to(torch.float8_e4m3fn).to(v.dtype) @ v)\n"
        ],
    ),
    # float16 scores rounded through bfloat16 (8 bits of mantissa) before the softmax.
    "hs_scores_bf16": _problem(
        "hs_scores_bf16",
        [
            "    s = ((q * 4.0) @ k.transpose(-1, -2)).bfloat16().float() * 0.5\n"
            "    outs.append(torch.softmax(s, -1).half() @ v)\n"
        ],
        dtype="float16",
    ),
}

#: How many attentions of each problem's plans (all workloads) are one call, and how many of
#: those are causal.
CALLS: dict[str, tuple[int, int]] = {
    "hs_causal_forms": (14, 14),
    "hs_tril_float": (4, 4),
    "hs_near_misses": (0, 0),
    "hs_overflow": (0, 0),
    "hs_batch_mask": (0, 0),
    # Top-left causal in both workloads; bottom-right only where M == N.
    "hs_offsets": (3, 3),
    "hs_3d": (2, 2),
    # The broadcast key head (a sliced input) is one call too.
    "hs_fp16_shapes": (8, 2),
    "hs_probs_batch_perm": (0, 0),
    "hs_probs_transposed": (0, 0),
    "hs_probs_fp8": (0, 0),
    "hs_scores_bf16": (0, 0),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    return traced_problems(tmp_path_factory.mktemp("hostile_sdpa"), PROBLEMS)


def _calls(source: str) -> tuple[int, int]:
    return source.count(_CALL), source.count(_CAUSAL)


def test_which_attentions_become_one_sdpa_call(hostile: Traced) -> None:
    assert set(CALLS) == set(PROBLEMS)
    found = {
        name: _calls(generate_problem(hostile, name, {"FUSE_SDPA": 1}).source) for name in PROBLEMS
    }
    assert found == CALLS


def test_sdpa_problems_match_the_reference(hostile: Traced, run_checks: RunChecks) -> None:
    sources = {
        (name, "sdpa"): generate_problem(hostile, name, {"FUSE_SDPA": 1}).source
        for name in PROBLEMS
    }
    assert_match_reference(hostile, run_checks, "cpu", sources)
