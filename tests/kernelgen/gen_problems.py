"""Small problems, written for these tests, that exercise each family the generator fuses.

Each entry is a SOL-ExecBench definition (as a dict) plus its workloads; `write_problem` puts one
in a directory. The references are plain PyTorch, as a problem author would write them; none of
them is matched by a hand-written Triton template.
"""

from pathlib import Path
from typing import Any

from problem_dirs import Problem, traced_problems, write_problem_dir

from kernelarc.kernelgen import Generated, default_knobs, generate
from kernelarc.problems.files import Problem as KernelarcProblem
from kernelarc.schema.op_graph import TraceSet

__all__ = ["PROBLEMS", "Problem", "Traced", "generate_problem", "traced_problems", "write_problem"]

#: Traced test problems by name: (the loaded problem, its traced graphs).
Traced = dict[str, tuple[KernelarcProblem, TraceSet]]


def _definition(
    name: str,
    axes: dict[str, Any],
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    reference: str,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "reference": reference,
        **extra,
    }


def _t(shape: list[str] | None, dtype: str = "float32") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype}


def _w(uuid: str, axes: dict[str, int], **inputs: Any) -> dict[str, Any]:
    return {"uuid": uuid, "axes": axes, "inputs": inputs}


#: Within about two float16 ulps on 99.5 % of elements.
_TIGHT = {"max_atol": 2e-3, "max_rtol": 2e-3, "required_matched_ratio": 0.995}

PROBLEMS: dict[str, Problem] = {
    # Pointwise chain with broadcasting (a per-channel bias along dim 1) and a scalar input that
    # becomes a kernel argument.
    "bias_gelu_scale": (
        _definition(
            "bias_gelu_scale",
            {"B": {"type": "var"}, "C": {"type": "const", "value": 8}, "H": {"type": "var"}},
            {"x": _t(["B", "C", "H"], "bfloat16"), "bias": _t(["C"]), "scale": _t(None)},
            {"y": _t(["B", "C", "H"], "bfloat16")},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, bias, scale):\n"
            "    h = x.float() + bias[None, :, None]\n"
            "    return (F.gelu(h, approximate='tanh') * scale).to(torch.bfloat16)\n",
        ),
        [
            _w("b2-h33", {"B": 2, "H": 33}, scale={"type": "scalar", "value": 0.5}),
            _w("b3-h64", {"B": 3, "H": 64}, scale={"type": "scalar", "value": 1.5}),
        ],
    ),
    # A norm over dim 1 of a 4-D tensor (not the last dim), with eps used by math.sqrt: the
    # trace has to bake it.
    "channel_rmsnorm": (
        _definition(
            "channel_rmsnorm",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 16},
                "S": {"type": "const", "value": 12},
            },
            {"x": _t(["N", "C", "S", "S"]), "eps": _t(None)},
            {"y": _t(["N", "C", "S", "S"])},
            "import math\nimport torch\n\n"
            "def run(x, eps):\n"
            "    rms = torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + math.sqrt(eps))\n"
            "    return x / rms\n",
        ),
        [
            _w("n2", {"N": 2}, eps={"type": "scalar", "value": 1e-6}),
            _w("n3", {"N": 3}, eps={"type": "scalar", "value": 1e-6}),
        ],
    ),
    # Residual add + LayerNorm with two outputs (the generator stores both from one kernel),
    # and a log-softmax output of the same rows.
    "add_layernorm_logsoftmax": (
        _definition(
            "add_layernorm_logsoftmax",
            {"T": {"type": "var"}, "D": {"type": "var"}},
            {"x": _t(["T", "D"]), "r": _t(["T", "D"]), "w": _t(["D"]), "b": _t(["D"])},
            {"h": _t(["T", "D"]), "y": _t(["T", "D"]), "p": _t(["T", "D"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, r, w, b):\n"
            "    h = x + r\n"
            "    y = F.layer_norm(h, (h.shape[-1],), w, b, 1e-5)\n"
            "    return h, y, torch.log_softmax(y, dim=-1)\n",
        ),
        [_w("t5-d100", {"T": 5, "D": 100}), _w("t9-d300", {"T": 9, "D": 300})],
    ),
    # Reductions to fewer dims: sum and max over dims (0, 2) of a 3-D tensor, argmax over the
    # last dim, and a mean of squares over everything (a scalar output).
    "reductions": (
        _definition(
            "reductions",
            {
                "A": {"type": "var"},
                "B": {"type": "const", "value": 6},
                "C": {"type": "const", "value": 40},
            },
            {"x": _t(["A", "B", "C"])},
            {"s": _t(["B"]), "m": _t(["B"]), "i": _t(["A", "B"], "int64"), "q": _t([])},
            "import torch\n\n"
            "def run(x):\n"
            "    return (x.sum(dim=(0, 2)), x.amax(dim=(0, 2)), x.argmax(dim=-1),\n"
            "            (x * x).mean())\n",
        ),
        [_w("a3", {"A": 3}), _w("a7", {"A": 7})],
    ),
    # BatchNorm in training mode: per-channel statistics over (N, H, W), few outputs and long
    # rows (split reductions; N=3 makes the split cut the H*W plane of a sample).
    "batch_stats": (
        _definition(
            "batch_stats",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 4},
                "S": {"type": "const", "value": 8},
            },
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["C"]), "b": _t(["C"])},
            {"y": _t(["N", "C", "S", "S"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    return F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)\n",
        ),
        [_w("n2", {"N": 2}), _w("n3", {"N": 3})],
    ),
    # Reductions of a whole bf16 tensor to scalars: two losses (computed in float32), a global
    # max and a sum in bf16, an integer count, an any() and an argmax (which is never split).
    "scalar_losses": (
        _definition(
            "scalar_losses",
            {"B": {"type": "var"}, "D": {"type": "const", "value": 48}},
            {"a": _t(["B", "D"], "bfloat16"), "t": _t(["B", "D"], "bfloat16")},
            {
                "mse": _t([], "bfloat16"),
                "huber": _t([]),
                "top": _t([], "bfloat16"),
                "total": _t([], "bfloat16"),
                "positive": _t([], "int64"),
                "outlier": _t([], "bool"),
                "where": _t([], "int64"),
            },
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(a, t):\n"
            "    return (F.mse_loss(a, t), F.smooth_l1_loss(a.float(), t.float()), a.amax(),\n"
            "            a.sum(), (a > 0).sum(), (a.abs() > 3).any(), a.argmax())\n",
        ),
        [_w("b5", {"B": 5}), _w("b8", {"B": 8})],
    ),
    # Reductions over a dim that is not the last (the column plan): a sum, a max with its
    # indices and an argmin over the middle dim (of rounded values: many ties, the first index
    # wins), and a variance over dim 0.
    "column_reductions": (
        _definition(
            "column_reductions",
            {
                "A": {"type": "var"},
                "R": {"type": "const", "value": 24},
                "C": {"type": "const", "value": 20},
            },
            {"x": _t(["A", "R", "C"])},
            {
                "s": _t(["A", 1, "C"]),
                "top": _t(["A", 1, "C"]),
                "where": _t(["A", 1, "C"], "int64"),
                "low": _t(["A", "C"], "int64"),
                "v": _t(["R", "C"]),
            },
            "import torch\n\n"
            "def run(x):\n"
            "    r = torch.round(x * 2)\n"
            "    top, where = r.max(dim=1, keepdim=True)\n"
            "    return x.sum(dim=1, keepdim=True), top, where, r.argmin(dim=1), x.var(dim=0)\n",
        ),
        [_w("a3", {"A": 3}), _w("a5", {"A": 5})],
    ),
    # BatchNorm1d in training mode and a mean over dim 0 of (N, D): per-feature statistics
    # over the strided axis, few outputs (split in two column stages).
    "feature_stats": (
        _definition(
            "feature_stats",
            {"N": {"type": "var"}, "D": {"type": "const", "value": 12}},
            {"x": _t(["N", "D"]), "w": _t(["D"]), "b": _t(["D"])},
            {"y": _t(["N", "D"]), "m": _t(["D"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    return F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5), x.mean(dim=0)\n",
        ),
        [_w("n40", {"N": 40}), _w("n64", {"N": 64})],
    ),
    # Rotary-style cat of two halves and a constant pad.
    "cat_pad": (
        _definition(
            "cat_pad",
            {
                "T": {"type": "var"},
                "D": {"type": "const", "value": 32},
                "E": {"type": "const", "value": 40},
            },
            {"x": _t(["T", "D"]), "c": _t(["T", "D"])},
            {"y": _t(["T", "D"]), "z": _t(["T", "E"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, c):\n"
            "    half = x.shape[-1] // 2\n"
            "    rot = torch.cat([-x[:, half:], x[:, :half]], dim=-1)\n"
            "    return x * c + rot, F.pad(x, (3, 5), value=0.25)\n",
        ),
        [_w("t4", {"T": 4}), _w("t11", {"T": 11})],
    ),
    # GEMM epilogues: Linear + bias + scale + SiLU in fp32, and a batched matmul with a
    # residual in bf16.
    "linear_silu": (
        _definition(
            "linear_silu",
            {
                "M": {"type": "var"},
                "K": {"type": "const", "value": 48},
                "N": {"type": "const", "value": 40},
            },
            {"x": _t(["M", "K"]), "w": _t(["N", "K"]), "b": _t(["N"])},
            {"y": _t(["M", "N"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    return F.silu(F.linear(x, w, b) * 0.5)\n",
        ),
        [_w("m7", {"M": 7}), _w("m33", {"M": 33})],
    ),
    "bmm_residual": (
        _definition(
            "bmm_residual",
            {
                "B": {"type": "var"},
                "M": {"type": "const", "value": 20},
                "K": {"type": "const", "value": 32},
                "N": {"type": "const", "value": 24},
            },
            {
                "a": _t(["B", "M", "K"], "bfloat16"),
                "b": _t(["B", "K", "N"], "bfloat16"),
                "r": _t(["B", "M", "N"], "bfloat16"),
            },
            {"y": _t(["B", "M", "N"], "bfloat16")},
            "import torch\n\ndef run(a, b, r):\n    return torch.bmm(a, b) + r\n",
        ),
        [_w("b2", {"B": 2}), _w("b3", {"B": 3})],
    ),
    # A convolution the generator leaves to torch, with its epilogue fused (bias, ReLU,
    # a per-channel scale held as a tensor constant).
    "conv_relu_scale": (
        _definition(
            "conv_relu_scale",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 3},
                "O": {"type": "const", "value": 4},
                "S": {"type": "const", "value": 10},
                "R": {"type": "const", "value": 8},
                "K": {"type": "const", "value": 3},
                "P": {"type": "const", "value": 4},
            },
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", "C", "K", "K"]), "b": _t(["O"])},
            {"y": _t(["N", "O", "R", "R"]), "pooled": _t(["N", "O", "P", "P"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    scale = torch.tensor([1.0, 0.5, 2.0, -1.0])\n"
            "    y = torch.relu(F.conv2d(x, w, b)) * scale.to(x.device)[None, :, None, None]\n"
            "    return y, F.avg_pool2d(torch.tanh(y), 2)\n",
        ),
        [_w("n1", {"N": 1}), _w("n2", {"N": 2})],
    ),
    # A convolution read across its channels (GroupNorm-style groups through a reshape): it
    # keeps the NCHW layout under LAYOUT_CONV.
    "conv_groups": (
        _definition(
            "conv_groups",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 3},
                "O": {"type": "const", "value": 4},
                "S": {"type": "const", "value": 6},
                "R": {"type": "const", "value": 4},
                "K": {"type": "const", "value": 3},
            },
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", "C", "K", "K"])},
            {"y": _t(["N", "O", "R", "R"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w):\n"
            "    g = F.conv2d(x, w).view(x.shape[0], 2, -1)\n"
            "    return (g - g.mean(dim=-1, keepdim=True)).view(x.shape[0], 4, 4, 4)\n",
        ),
        [_w("n2", {"N": 2})],
    ),
    # Reductions of a convolution's output, which LAYOUT_CONV makes channels-last (only
    # reductions read it): the kernels walk it in memory order (conv_layout.memory_order): a
    # mean of its GELU over H, W (the column plan over contiguous channels), a logsumexp over C
    # (the row plan), a sum over C, H, W, an argmax over C (its index counts C alone), a
    # variance over H, W, a min over C that is itself an output.
    "conv_reductions": (
        _definition(
            "conv_reductions",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 3},
                "O": {"type": "const", "value": 6},
                "S": {"type": "const", "value": 11},
                "R": {"type": "const", "value": 9},
                "K": {"type": "const", "value": 3},
                "one": {"type": "const", "value": 1},
            },
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", "C", "K", "K"]), "b": _t(["O"])},
            {
                "pooled": _t(["N", "O"]),
                "lse": _t(["N", "R", "R"]),
                "total": _t(["N"]),
                "best": _t(["N", "R", "R"], "int64"),
                "spread": _t(["N", "O", "one", "one"]),
                "low": _t(["N", "one", "R", "R"]),
            },
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    pooled = F.gelu(y).mean(dim=(2, 3))\n"
            "    lse = torch.logsumexp(y * 2.0, dim=1)\n"
            "    total = torch.tanh(y).sum(dim=(1, 2, 3))\n"
            "    best = torch.argmax(y, dim=1)\n"
            "    spread = torch.var(y, dim=(2, 3), keepdim=True)\n"
            "    low = torch.amin(y, dim=1, keepdim=True)\n"
            "    return pooled, lse, total, best, spread, low\n",
        ),
        [_w("n1", {"N": 1}), _w("n3", {"N": 3})],
    ),
    # Pooling as taps over the window (kernelarc/tracing/pool_decomp.py), fused with what
    # surrounds it: max pooling with padding and ceil mode between a ReLU and a tanh, average
    # pooling without counting the padding, max pooling whose indices are an output, 1-d max
    # pooling with dilation, 3-d average pooling of a view.
    "pooling": (
        _definition(
            "pooling",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 4},
                "H": {"type": "const", "value": 9},
                "P": {"type": "const", "value": 5},
                "Q": {"type": "const", "value": 10},
                "R": {"type": "const", "value": 4},
                "L": {"type": "const", "value": 25},
                "D": {"type": "const", "value": 2},
                "one": {"type": "const", "value": 1},
            },
            {"x": _t(["N", "C", "H", "H"])},
            {
                "a": _t(["N", "C", "P", "P"]),
                "b": _t(["N", "C", "Q", "Q"]),
                "v": _t(["N", "C", "R", "R"]),
                "i": _t(["N", "C", "R", "R"], "int64"),
                "m": _t(["N", "C", "L"]),
                "c": _t(["N", "one", "D", "P", "P"]),
            },
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x):\n"
            "    h = torch.relu(x) * 2.0\n"
            "    a = torch.tanh(F.max_pool2d(h, 3, stride=2, padding=1, ceil_mode=True)) + 1.0\n"
            "    b = F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)\n"
            "    v, i = F.max_pool2d(x, 2, return_indices=True)\n"
            "    m = F.max_pool1d(x.flatten(2), 4, stride=3, dilation=2)\n"
            "    c = F.avg_pool3d(x.view(x.shape[0], 1, 4, 9, 9), 3, stride=2, padding=1)\n"
            "    return a, b, v, i, m, c\n",
        ),
        [_w("n1", {"N": 1}), _w("n2", {"N": 2})],
    ),
    # Constants made from Python data on the input's device (KernelBench writes
    # `torch.tensor(0.0, device=x.device)`): the tracer's inputs are meta tensors, yet the
    # constants keep their values.
    "device_constants": (
        _definition(
            "device_constants",
            {"N": {"type": "var"}, "C": {"type": "const", "value": 3}},
            {"x": _t(["N", "C"])},
            {"y": _t(["N", "C"])},
            "import torch\n\n"
            "def run(x):\n"
            "    floor = torch.tensor(0.25, device=x.device)\n"
            "    scale = torch.tensor([1.0, -2.0, 0.5], device=x.device)\n"
            "    return torch.max(x, floor) * scale\n",
        ),
        [_w("n5", {"N": 5}), _w("n70", {"N": 70})],
    ),
    # A gated MLP in float16: the down projection's operand silu(x @ w1.T) * (x @ w3.T) is a
    # fused prologue of its GEMM, rounded to float16 as the reference's matmul receives it
    # (and so fed to the tensor cores in 16 bits on CUDA). Tight tolerance: float32 operands
    # there, or an unrounded accumulator before the epilogue, leave ~1 % of elements outside.
    "swiglu_f16": (
        _definition(
            "swiglu_f16",
            {
                "T": {"type": "var"},
                "D": {"type": "const", "value": 64},
                "F": {"type": "const", "value": 128},
            },
            {
                "x": _t(["T", "D"], "float16"),
                "w1": _t(["F", "D"], "float16"),
                "w3": _t(["F", "D"], "float16"),
                "w2": _t(["D", "F"], "float16"),
            },
            {"y": _t(["T", "D"], "float16")},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w1, w3, w2):\n"
            "    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T\n",
        ),
        [
            {**_w("t8", {"T": 8}), "tolerance": _TIGHT},
            {**_w("t30", {"T": 30}), "tolerance": _TIGHT},
        ],
    ),
    # Reads at a loaded index (kernelarc/kernelgen/gathers.py) fused with what surrounds them:
    # an embedding lookup and its scale, x[idx] on a middle dim with negative indices, an
    # index_select, a gather followed by a sum, a gather from a computed value (stored
    # first: a gather reads a buffer), one from an output a reduction kernel would otherwise
    # store itself.
    "gathers": (
        _definition(
            "gathers",
            {
                "B": {"type": "var"},
                "V": {"type": "const", "value": 11},
                "D": {"type": "const", "value": 6},
                "K": {"type": "const", "value": 4},
            },
            {"ids": _t(["B", "K"], "int64"), "table": _t(["V", "D"]), "x": _t(["B", "V", "D"])},
            {
                "e": _t(["B", "K", "D"]),
                "m": _t(["B", "K", "D"]),
                "s": _t(["B", "V", "K"]),
                "g": _t(["B"]),
                "c": _t(["B", "K", "D"]),
                "y": _t(["B", "V", "D"]),
                "h": _t(["B", "V"]),
            },
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(ids, table, x):\n"
            "    i = ids.abs() % 11\n"
            "    e = F.embedding(i, table) * 2.0\n"
            "    m = torch.tanh(x[:, i[0] - 11])\n"
            "    s = torch.index_select(x, 2, (i[0] % 6)) + 1.0\n"
            "    g = torch.gather(x, 1, (i % 11)[:, :, None].expand(-1, -1, 6)).sum(dim=(1, 2))\n"
            "    c = torch.gather(torch.exp(x), 1, i[:, :, None].expand(-1, -1, 6))\n"
            "    y = x * 2.0\n"
            "    h = torch.gather(y, 2, (i[:, :1, None] % 6).expand(-1, 11, 6)).sum(-1)\n"
            "    return e, m, s, g, c, y, h\n",
        ),
        [_w("b2", {"B": 2}), _w("b5", {"B": 5})],
    ),
    # Scans over the last dim on whole rows (Kind.SCAN): a cumsum with a prologue and an
    # epilogue, a cumprod, a reverse cumsum (flips as index maps), an int64 count of a mask,
    # scans of a value constant along the row (a broadcast, ones); a cumsum over the first dim
    # stays a torch call.
    "scans": (
        _definition(
            "scans",
            {"B": {"type": "var"}, "N": {"type": "const", "value": 37}},
            {"x": _t(["B", "N"], "bfloat16")},
            {
                "a": _t(["B", "N"], "bfloat16"),
                "p": _t(["B", "N"]),
                "r": _t(["B", "N"]),
                "c": _t(["B", "N"], "int64"),
                "d": _t(["B", "N"]),
                "e": _t(["B", "N"]),
                "o": _t(["B", "N"]),
                "f": _t(["B", "N"]),
                "g": _t(["B", "N"]),
                "h": _t(["B", "N"]),
            },
            "import torch\n\n"
            "def run(x):\n"
            "    xf = x.float()\n"
            "    f = torch.cat([torch.zeros_like(xf[:, :1]), xf[:, :-1].cumsum(-1)], dim=-1)\n"
            "    g = torch.cat([torch.ones_like(xf[:, :1]), (1 + xf[:, :-1] / 8).cumprod(1)], 1)\n"
            "    h = torch.cat([torch.full_like(xf[:, :1], 2.0), xf[:, :-1].cumsum(-1)], dim=-1)\n"
            "    a = (torch.cumsum(torch.exp(xf) * 0.5, dim=-1) - 1.0).to(torch.bfloat16)\n"
            "    p = torch.cumprod(1.0 + 0.01 * xf, dim=1)\n"
            "    r = torch.cumsum(xf.flip(-1), dim=-1).flip(-1)\n"
            "    c = (x > 0).long().cumsum(-1)\n"
            "    d = torch.cumsum(xf, dim=0)\n"
            "    e = torch.cumsum(xf[:, :1].expand(-1, 37) * 2.0, dim=-1)\n"
            "    o = torch.ones_like(xf).cumsum(-1) + xf\n"
            "    return a, p, r, c, d, e, o, f, g, h\n",
        ),
        [_w("b3", {"B": 3}), _w("b9", {"B": 9})],
    ),
    # A pooling of an overlapping pooling: 9 outer taps of 9 inner ones are 81 loads per
    # output, past MAX_KERNEL_LOADS, so the inner pooling is stored once and read 9 times.
    "pool_of_pool": (
        _definition(
            "pool_of_pool",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 2},
                "H": {"type": "const", "value": 10},
            },
            {"x": _t(["N", "C", "H", "H"])},
            {"y": _t(["N", "C", "H", "H"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x):\n"
            "    inner = torch.relu(F.max_pool2d(x, 3, stride=1, padding=1))\n"
            "    return F.max_pool2d(inner, 3, stride=1, padding=1) + 1.0\n",
        ),
        [_w("n1", {"N": 1}), _w("n3", {"N": 3})],
    ),
    # Depthwise convolutions as taps (kernelarc/tracing/conv_decomp.py): Mamba's causal conv1d
    # with its SiLU (pad 3, keep the first L), and a 2-d one with two outputs per channel.
    "depthwise": (
        _definition(
            "depthwise",
            {
                "B": {"type": "var"},
                "C": {"type": "const", "value": 6},
                "L": {"type": "var"},
                "K": {"type": "const", "value": 4},
                "H": {"type": "const", "value": 7},
                "O": {"type": "const", "value": 12},
                "P": {"type": "const", "value": 4},
            },
            {
                "x": _t(["B", "C", "L"], "bfloat16"),
                "w": _t(["C", 1, "K"], "bfloat16"),
                "b": _t(["C"], "bfloat16"),
                "img": _t(["B", "C", "H", "H"]),
                "w2": _t(["O", 1, 3, 3]),
            },
            {"y": _t(["B", "C", "L"], "bfloat16"), "z": _t(["B", "O", "P", "P"])},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b, img, w2):\n"
            "    L = x.shape[-1]\n"
            "    y = F.silu(F.conv1d(x, w, b, padding=3, groups=6)[..., :L])\n"
            "    z = torch.relu(F.conv2d(img, w2, stride=2, padding=1, groups=6))\n"
            "    return y, z\n",
        ),
        [_w("b1-l9", {"B": 1, "L": 9}), _w("b2-l33", {"B": 2, "L": 33})],
    ),
    # Variances: a GroupNorm (var_mean over each group's (C/G, L)), unbiased and biased
    # variances of values far from 0 (where sum-of-squares formulas cancel), a std over two
    # dims and a plain mean of the same rows as a variance (it shares the one-pass mean).
    "variances": (
        _definition(
            "variances",
            {
                "N": {"type": "var"},
                "C": {"type": "const", "value": 8},
                "L": {"type": "var"},
            },
            {"x": _t(["N", "C", "L"]), "w": _t(["C"]), "b": _t(["C"])},
            {
                "g": _t(["N", "C", "L"]),
                "v1": _t(["N", "C"]),
                "v0": _t(["N", "C"]),
                "s": _t(["N", 1, 1]),
                "m": _t(["N", "C"]),
            },
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(x, w, b):\n"
            "    far = x * 0.5 + 3000.0\n"
            "    m = far.mean(dim=-1)\n"
            "    v1 = far.var(dim=-1)\n"
            "    v0 = torch.var(far, dim=-1, correction=0)\n"
            "    s = x.std(dim=(1, 2), keepdim=True)\n"
            "    return F.group_norm(x, 4, w, b, 1e-5), v1, v0, s, m - 3000.0\n",
        ),
        [_w("n2-l100", {"N": 2, "L": 100}), _w("n3-l37", {"N": 3, "L": 37})],
    ),
    # Attention written out by hand: scaled scores, a causal mask from tril, softmax in float32,
    # probabilities back to bfloat16, @ V: one online-softmax kernel (FLASH), scores never stored.
    "attention_causal": (
        _definition(
            "attention_causal",
            {
                "B": {"type": "var"},
                "H": {"type": "const", "value": 2},
                "L": {"type": "var"},
                "D": {"type": "const", "value": 32},
            },
            {
                "q": _t(["B", "H", "L", "D"], "bfloat16"),
                "k": _t(["B", "H", "L", "D"], "bfloat16"),
                "v": _t(["B", "H", "L", "D"], "bfloat16"),
            },
            {"o": _t(["B", "H", "L", "D"], "bfloat16")},
            "import math\nimport torch\n\n"
            "def run(q, k, v):\n"
            "    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])\n"
            "    n = q.shape[-2]\n"
            "    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()\n"
            "    s = s.masked_fill(~keep, float('-inf'))\n"
            "    p = torch.softmax(s.float(), dim=-1).to(q.dtype)\n"
            "    return p @ v\n",
        ),
        [_w("b1-l40", {"B": 1, "L": 40}), _w("b2-l64", {"B": 2, "L": 64})],
    ),
    # scaled_dot_product_attention (its math path when traced: widened to float32, scale on Q
    # and K, rows without a finite score zeroed), float16, a head dim of 16 and odd lengths;
    # with the last two keys masked for every row (padding), and the heads merged back (stored
    # from the attention kernel at their transposed place). No row loses every key: what such
    # a row gives depends on the GPU's attention backend (the math path's 0 on the CPU; the
    # H100 run of 2026-12-06 returned other values), so no answer is right for both.
    "sdpa_masked": (
        _definition(
            "sdpa_masked",
            {
                "B": {"type": "var"},
                "H": {"type": "const", "value": 3},
                "L": {"type": "var"},
                "D": {"type": "const", "value": 16},
            },
            {
                "q": _t(["B", "H", "L", "D"], "float16"),
                "k": _t(["B", "H", "L", "D"], "float16"),
                "v": _t(["B", "H", "L", "D"], "float16"),
            },
            {"o": _t(["B", "L", 48], "float16")},
            "import torch\nimport torch.nn.functional as F\n\n"
            "def run(q, k, v):\n"
            "    b, h, n, d = q.shape\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    keep = (i[None, :] <= i[:, None]) & (i[None, :] < n - 2)\n"
            "    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)\n"
            "    return o.transpose(1, 2).reshape(b, n, h * d) * 0.5\n",
        ),
        [_w("b1-l33", {"B": 1, "L": 33}), _w("b2-l70", {"B": 2, "L": 70})],
    ),
    # A sliding window (a lower and an upper key bound per row, both from positions), an ALiBi
    # bias from a per-head slope input, and RMS-normalised Q and K (stored by a norm kernel,
    # read by the attention kernel), in float32 from bfloat16 tensors.
    "attention_window": (
        _definition(
            "attention_window",
            {"B": {"type": "var"}, "L": {"type": "var"}},
            {
                "q": _t(["B", 4, "L", 32], "bfloat16"),
                "k": _t(["B", 4, "L", 32], "bfloat16"),
                "v": _t(["B", 4, "L", 32], "bfloat16"),
                "slopes": _t([4]),
            },
            {"o": _t(["B", 4, "L", 32], "bfloat16")},
            "import torch\n\n"
            "def norm(t):\n"
            "    t = t.float()\n"
            "    return (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16()\n\n"
            "def run(q, k, v, slopes):\n"
            "    q, k = norm(q), norm(k)\n"
            "    n = q.shape[2]\n"
            "    i = torch.arange(n, device=q.device)\n"
            "    bias = slopes[:, None, None] * (i[None, :] - i[:, None]).float()[None]\n"
            "    s = (q.float() @ k.float().transpose(-1, -2)) * 32 ** -0.5 + bias\n"
            "    window = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 16)\n"
            "    s = s.masked_fill(~window, float('-inf'))\n"
            "    return (s.softmax(-1) @ v.float()).to(torch.bfloat16)\n",
        ),
        [_w("b1-l50", {"B": 1, "L": 50}), _w("b2-l70", {"B": 2, "L": 70})],
    ),
    # Decoding: one query row (or a few) against a longer key cache, causal with the cache's
    # offset (tril with a diagonal), -inf from a tensor constant of the reference.
    "attention_decode": (
        _definition(
            "attention_decode",
            {"B": {"type": "var"}, "M": {"type": "var"}, "N": {"type": "var"}},
            {
                "q": _t(["B", 4, "M", 32], "bfloat16"),
                "k": _t(["B", 4, "N", 32], "bfloat16"),
                "v": _t(["B", 4, "N", 32], "bfloat16"),
            },
            {"o": _t(["B", 4, "M", 32], "bfloat16")},
            "import torch\n\n"
            "def run(q, k, v):\n"
            "    m, n = q.shape[2], k.shape[2]\n"
            "    keep = torch.ones(m, n, dtype=torch.bool, device=q.device).tril(n - m)\n"
            "    s = (q @ k.transpose(-1, -2)).float() * 32 ** -0.5\n"
            "    s = torch.where(keep, s, torch.tensor(float('-inf'), device=q.device))\n"
            "    return torch.softmax(s, -1).to(v.dtype) @ v\n",
        ),
        [_w("b1-m1", {"B": 1, "M": 1, "N": 77}), _w("b2-m5", {"B": 2, "M": 5, "N": 130})],
    ),
    # The probabilities are an output too: they are stored, so no online softmax.
    "attention_probs_out": (
        _definition(
            "attention_probs_out",
            {
                "Z": {"type": "var"},
                "L": {"type": "const", "value": 24},
                "D": {"type": "const", "value": 8},
            },
            {"q": _t(["Z", "L", "D"]), "k": _t(["Z", "L", "D"]), "v": _t(["Z", "L", "D"])},
            {"o": _t(["Z", "L", "D"]), "p": _t(["Z", "L", "L"])},
            "import torch\n\n"
            "def run(q, k, v):\n"
            "    p = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.3, dim=-1)\n"
            "    return torch.bmm(p, v), p\n",
        ),
        [_w("z2", {"Z": 2}), _w("z3", {"Z": 3})],
    ),
}


def write_problem(root: Path, name: str, problem: Problem | None = None) -> Path:
    """The problem dir of `problem` (default PROBLEMS[name]) under `root`, named `name`."""
    return write_problem_dir(root, name, problem if problem is not None else PROBLEMS[name])


def generate_problem(
    traced: Traced, name: str, knobs: dict[str, int], device: str = "cpu"
) -> Generated:
    """The generated solution of a traced test problem at the device's default knobs with
    `knobs` over them."""
    problem, traces = traced[name]
    target = "cuda" if device == "cuda" else "cpu"
    return generate(problem.definition, traces, default_knobs(target) | knobs, target, name)
