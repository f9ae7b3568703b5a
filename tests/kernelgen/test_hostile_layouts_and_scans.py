"""Hostile problems for the channels-last convolution walk (`Space.order`, tile kernels,
`convertible_convs`), the peeled convolution biases (FUSE_CONV_BIAS) and the scan rewrites of
graph_build (`_reverse_scan`, `_exclusive_scan`): small problems written here (not added to
gen_problems.py), traced once per module as conftest.py's `gen_problems` does, generated at
several knob settings and checked against their reference under Triton's interpreter."""

from collections.abc import Callable
from typing import Any

import pytest
from gen_problems import Traced, _definition, _t, _w, generate_problem, traced_problems
from reference_check import assert_match_reference

from kernelarc.kernelgen import default_knobs
from kernelarc.kernelgen.conv_layout import channels_last_convs, convertible_convs
from kernelarc.kernelgen.graph_build import build_graph
from kernelarc.kernelgen.graph_ir import Graph, Kind
from kernelarc.kernelgen.knobs import launch_for
from kernelarc.kernelgen.schedule import KernelStep, schedule_graph
from kernelarc.kernelgen.space import Space

RunChecks = Callable[[list[dict[str, Any]], str], dict[str, Any]]

#: float32 outputs: every element within 1e-3 (a wrong index or a lost bias is far off).
_EXACT = {"max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 1.0}
#: bfloat16 outputs: a few ulps, every element.
_BF16 = {"max_atol": 3e-2, "max_rtol": 3e-2, "required_matched_ratio": 1.0}

_IMPORTS = "import torch\nimport torch.nn.functional as F\n\n"


def _ws(tol: dict[str, Any], *workloads: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**w, "tolerance": tol} for w in workloads]


def _n(*sizes: int) -> list[dict[str, Any]]:
    return [_w(f"n{n}", {"N": n}) for n in sizes]


def _const(**values: int) -> dict[str, Any]:
    return {k: {"type": "const", "value": v} for k, v in values.items()}


_VAR_N = {"N": {"type": "var"}}

PROBLEMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # A grouped, strided, padded convolution with a bias (odd 5x5 output), read only by a tile
    # epilogue and by reductions that all walk memory order: over H, W (column plan), over C
    # (row plan), over (0, 1, 2) (a kept dim W walked before the reduced C), (1, 3), (0, 1),
    # a variance over (0, 2, 3) (batch statistics), an argmax over C.
    "h_conv_mix": (
        _definition(
            "h_conv_mix",
            {**_VAR_N, **_const(C=4, O=6, S=9, R=5, K=3)},
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", 2, "K", "K"]), "b": _t(["O"])},
            {
                "ep": _t(["N", "O", "R", "R"]),
                "m": _t(["N", "O"]),
                "mx": _t(["N", "R", "R"]),
                "s012": _t(["R"]),
                "s13": _t(["N", "R"]),
                "s01": _t(["R", "R"]),
                "v": _t(["O"]),
                "am": _t(["N", "R", "R"], "int64"),
            },
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b, stride=2, padding=1, groups=2)\n"
            "    ep = torch.relu(y) * 0.5 - 1.0\n"
            "    m = y.mean(dim=(2, 3))\n"
            "    mx = y.amax(dim=1)\n"
            "    s012 = torch.tanh(y).sum(dim=(0, 1, 2))\n"
            "    s13 = y.sum(dim=(1, 3))\n"
            "    s01 = (y * y).sum(dim=(0, 1))\n"
            "    v = y.var(dim=(0, 2, 3))\n"
            "    am = torch.argmax(y, dim=1)\n"
            "    return ep, m, mx, s012, s13, s01, v, am\n",
        ),
        _ws(_EXACT, *_n(1, 3)),
    ),
    # The bug hunt of the walk: a kernel whose space is chosen from a sum over a channels-last
    # convolution (all dims: reduced dims reordered) and that also computes, inline, an
    # argmax over all dims of another tensor of the same shape (its flat index must count the
    # dims row-major).
    "h_argmax_sibling": (
        _definition(
            "h_argmax_sibling",
            {**_VAR_N, **_const(C=3, O=4, S=6, R=4, K=3)},
            {
                "x": _t(["N", "C", "S", "S"]),
                "w": _t(["O", "C", "K", "K"]),
                "z": _t(["N", "O", "R", "R"]),
            },
            {"out": _t([])},
            _IMPORTS + "def run(x, w, z):\n"
            "    i = torch.argmax(z)\n"
            "    s = F.conv2d(x, w).sum()\n"
            "    return s * 0.0 + i\n",
        ),
        _ws(_EXACT, *_n(1, 2)),
    ),
    # A reduction over H alone (its kept dims would be reordered): the convolution must keep
    # NCHW, and a pointwise epilogue of it is a plain pointwise kernel.
    "h_conv_h_only": (
        _definition(
            "h_conv_h_only",
            {**_VAR_N, **_const(C=2, O=3, S=7, R=5, Q=3, K=3)},
            {"x": _t(["N", "C", "S", "R"]), "w": _t(["O", "C", "K", "K"]), "b": _t(["O"])},
            {"sh": _t(["N", "O", "Q"]), "e": _t(["N", "O", "R", "Q"])},
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    return y.sum(dim=2), torch.sigmoid(y)\n",
        ),
        _ws(_EXACT, *_n(2)),
    ),
    # bfloat16, one output channel, batch 1, odd non-square spatial sizes, dilation.
    "h_conv_bf16": (
        _definition(
            "h_conv_bf16",
            {**_VAR_N, **_const(C=3, O=1, H=9, W=8, P=5, Q=4, K=3)},
            {
                "x": _t(["N", "C", "H", "W"], "bfloat16"),
                "w": _t(["O", "C", "K", "K"], "bfloat16"),
                "b": _t(["O"], "bfloat16"),
            },
            {"g": _t(["N", "O", "P", "Q"], "bfloat16"), "m": _t(["N", "O"])},
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b, dilation=2)\n"
            "    return F.gelu(y), y.float().mean(dim=(2, 3))\n",
        ),
        _ws(_BF16, *_n(1, 2)),
    ),
    # A transposed 2-d convolution with a bias (4-d: may run channels-last), read by an
    # epilogue and a mean over H, W; a 3-d convolution (must stay NCDHW) with a bias, reduced;
    # a 1-d (not depthwise) one with a bias and an epilogue.
    "h_conv_kinds": (
        _definition(
            "h_conv_kinds",
            {**_VAR_N, **_const(C=3, O=4, S=5, T=11, D=4, L=9, M=7, K=3)},
            {
                "x": _t(["N", "C", "S", "S"]),
                "wt": _t(["C", "O", "K", "K"]),
                "bt": _t(["O"]),
                "v": _t(["N", "C", "D", "D", "D"]),
                "w3": _t(["O", "C", 2, 2, 2]),
                "b3": _t(["O"]),
                "s": _t(["N", "C", "L"]),
                "w1": _t(["O", "C", "K"]),
                "b1": _t(["O"]),
            },
            {
                "t": _t(["N", "O", "T", "T"]),
                "tm": _t(["N", "O"]),
                "u": _t(["N", "O", 3, 3, 3]),
                "um": _t(["N", "O"]),
                "c1": _t(["N", "O", "M"]),
            },
            _IMPORTS + "def run(x, wt, bt, v, w3, b3, s, w1, b1):\n"
            "    yt = F.conv_transpose2d(x, wt, bt, stride=2)\n"
            "    y3 = F.conv3d(v, w3, b3)\n"
            "    y1 = F.conv1d(s, w1, b1)\n"
            "    return (torch.relu(yt), yt.mean(dim=(2, 3)), torch.tanh(y3),\n"
            "            y3.sum(dim=(2, 3, 4)), torch.relu(y1) + 1.0)\n",
        ),
        _ws(_EXACT, *_n(1, 2)),
    ),
    # A convolution that is itself an output and is reduced (keeps its layout and its bias);
    # one whose ReLU is an output and is reduced over C; a 1x1 spatial output (broadcast into
    # a tile kernel); a conv -> relu -> conv chain; channels-last ones read beside the NCHW one
    # (a tile kernel, a reduction).
    "h_conv_outputs": (
        _definition(
            "h_conv_outputs",
            {**_VAR_N, **_const(C=3, O=5, S=6, R=4, K=3)},
            {
                "x": _t(["N", "C", "S", "S"]),
                "w": _t(["O", "C", "K", "K"]),
                "b": _t(["O"]),
                "w6": _t(["O", "C", "S", "S"]),
                "z": _t(["N", "O", "R", "R"]),
                "w2": _t(["O", "O", 1, 1]),
            },
            {
                "y": _t(["N", "O", "R", "R"]),
                "ym": _t(["N", "O"]),
                "r": _t(["N", "O", "R", "R"]),
                "rs": _t(["N", "R", "R"]),
                "p": _t(["N", "O", 1, 1]),
                "ps": _t(["N"]),
                "pz": _t(["N", "O", "R", "R"]),
                "cc": _t(["N", "R", "R"]),
                "ry": _t(["N", "O", "R", "R"]),
                "sy": _t(["N", "O"]),
            },
            _IMPORTS + "def run(x, w, b, w6, z, w2):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    r = torch.relu(F.conv2d(x, w * 2.0, b))\n"
            "    q = F.conv2d(x, w6, b * 0.5 + 1.0)\n"
            "    pz = torch.relu(q) + z\n"
            "    cc = F.conv2d(torch.relu(F.conv2d(x, w, b)), w2, b).amax(dim=1)\n"
            "    ry = torch.relu(F.conv2d(x, w * 0.5, b)) + y\n"
            "    sy = (F.conv2d(x, w * 0.25, b) - y).sum(dim=(2, 3))\n"
            "    return (y, y.mean(dim=(2, 3)), r, r.sum(dim=1), torch.relu(q),\n"
            "            q.sum(dim=(1, 2, 3)), pz, cc, ry, sy)\n",
        ),
        _ws(_EXACT, *_n(1, 2)),
    ),
    # Views after a pointwise op that keep rank, batch and channels: a transpose of H and W
    # (square) as an output and reduced over (2, 3); a transpose of N and C (N == C) reduced
    # and arg-reduced over its dim 1 (the batch); a tile kernel that also stores a plain
    # pointwise value it reads (sunk into it) and reads a stored mean.
    "h_conv_views": (
        _definition(
            "h_conv_views",
            {**_VAR_N, **_const(C=2, O=3, S=7, R=5, K=3)},
            {
                "x": _t(["N", "C", "S", "S"]),
                "w": _t(["O", "C", "K", "K"]),
                "b": _t(["O"]),
                "z": _t(["N", "O", "R", "R"]),
                "g": _t(["N", "O", 1, 1]),
            },
            {
                "t": _t(["N", "O", "R", "R"]),
                "ts": _t(["N", "O"]),
                "us": _t(["O", "R", "R"]),
                "ua": _t(["O", "R", "R"], "int64"),
                "p": _t(["N", "O", "R", "R"]),
                "q": _t(["N", "O", "R", "R"]),
                "mm": _t(["N", "O", 1, 1]),
                "d": _t(["N", "O", "R", "R"]),
                "gs": _t(["N", "O", 1, 1]),
                "gq": _t(["N", "O", "R", "R"]),
            },
            _IMPORTS + "def run(x, w, b, z, g):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    t = torch.relu(y).transpose(2, 3)\n"
            "    u = torch.tanh(y).transpose(0, 1)\n"
            "    p = z * 2.0 + 1.0\n"
            "    q = torch.relu(y) + p\n"
            "    mm = y.mean(dim=(2, 3), keepdim=True)\n"
            "    gs = g * 2.0 - 0.5\n"
            "    gq = torch.relu(y) * gs\n"
            "    return (t, t.sum(dim=(2, 3)), u.sum(dim=1), u.argmax(dim=1), p, q, mm, y - mm,\n"
            "            gs, gq)\n",
        ),
        _ws(_EXACT, _w("n3", {"N": 3}), _w("n2", {"N": 2})),
    ),
    # Scans of a convolution (it keeps NCHW): a cumsum over W and a reverse one of its ReLU.
    "h_conv_scan": (
        _definition(
            "h_conv_scan",
            {**_VAR_N, **_const(C=2, O=3, S=6, R=4, K=3)},
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", "C", "K", "K"]), "b": _t(["O"])},
            {"c": _t(["N", "O", "R", "R"]), "r": _t(["N", "O", "R", "R"]), "m": _t(["N", "O"])},
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    r = torch.relu(y).flip(-1).cumsum(-1).flip(-1)\n"
            "    return y.cumsum(-1), r, y.mean(dim=(2, 3))\n",
        ),
        _ws(_EXACT, *_n(2)),
    ),
    # Scan rewrites: the ones that must not fire (flips over two dims, mismatched flips, a
    # cat along another dim than the scan, a first piece that is not the identity, a first
    # two leading pieces) and the ones that may (a reverse cumprod, an
    # int64 reverse count, a full-length exclusive scan, an int64 exclusive count, a reverse
    # exclusive scan, a scan also read on its own, a 3-d tensor; a cat of an identity and a
    # reverse scan, which is no exclusive scan).
    "h_scans": (
        _definition(
            "h_scans",
            {"B": {"type": "var"}, **_const(M=3, L=13, L1=14)},
            {"x": _t(["B", "M", "L"])},
            {
                "r2": _t(["B", "M", "L"]),
                "r3": _t(["B", "M", "L"]),
                "rp": _t(["B", "M", "L"]),
                "ri": _t(["B", "M", "L"], "int64"),
                "e0": _t(["B", "M", "L"]),
                "e1": _t(["B", "M", "L1"]),
                "e2": _t(["B", "M", "L"]),
                "e5": _t(["B", "M", "L"], "int64"),
                "e6": _t(["B", "M", "L"]),
                "e7": _t(["B", "M", "L"]),
                "s": _t(["B", "M", "L"]),
                "es": _t(["B", "M", "L1"]),
                "sf_flip": _t(["B", "M", "L"]),
                "sf": _t(["B", "M", "L"]),
                "e8": _t(["B", "M", "L"]),
            },
            _IMPORTS + "def run(x):\n"
            "    B, M, L = x.shape\n"
            "    r2 = torch.flip(torch.cumsum(torch.flip(x, [1, 2]), 2), [1, 2])\n"
            "    r3 = torch.flip(torch.cumsum(torch.flip(x, [2]), 2), [1, 2])\n"
            "    rp = torch.flip(torch.cumprod(torch.flip(1 + x / 8, [-1]), -1), [-1])\n"
            "    c = (x > 0).long()\n"
            "    ri = c.flip(-1).cumsum(-1).flip(-1)\n"
            "    e0 = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1].cumsum(2)], 1)\n"
            "    e1 = torch.cat([torch.zeros_like(x[..., :1]), x.cumsum(-1)], -1)\n"
            "    e2 = torch.cat([torch.zeros_like(x[..., :1]), (1 + x[..., :-1] / 8).cumprod(-1)],"
            " -1)\n"
            "    e5 = torch.cat([torch.zeros_like(c[..., :1]), c[..., :-1].cumsum(-1)], -1)\n"
            "    e6 = torch.cat([torch.zeros_like(x[..., :2]), x[..., :-2].cumsum(-1)], -1)\n"
            "    xr = x.flip(-1)\n"
            "    e7 = torch.cat([torch.zeros_like(xr[..., :1]), xr[..., :-1].cumsum(-1)], -1)"
            ".flip(-1)\n"
            "    s = x.cumsum(-1)\n"
            "    es = torch.cat([torch.full_like(x[..., :1], -0.0), s], -1)\n"
            "    sf = x.flip(-1).cumsum(-1)\n"
            "    rs = x[..., :-1].flip(-1).cumsum(-1).flip(-1)\n"
            "    e8 = torch.cat([torch.zeros_like(x[..., :1]), rs], -1)\n"
            "    return r2, r3, rp, ri, e0, e1, e2, e5, e6, e7, s, es, sf.flip(-1), sf, e8\n",
        ),
        _ws(_EXACT, _w("b2", {"B": 2}), _w("b1", {"B": 1})),
    ),
    # Epilogues that read a channels-last convolution at other positions than their own (each
    # keeps rank, batch and channels, so the convolution runs channels-last): a max pooling and
    # an overlapping average pooling with a ragged end (8 -> 3), and, with C == H, a permute to
    # NHWC (its leading dims (N, H) pass for (N, C)). (Pads and padded poolings are piecewise:
    # they keep NCHW.)
    "h_conv_pool": (
        _definition(
            "h_conv_pool",
            {**_VAR_N, **_const(C=2, O=8, S=10, R=8, K=3, P=4, Q=3)},
            {"x": _t(["N", "C", "S", "S"]), "w": _t(["O", "C", "K", "K"]), "b": _t(["O"])},
            {
                "mp": _t(["N", "O", "P", "P"]),
                "ap": _t(["N", "O", "Q", "Q"]),
                "nhwc": _t(["N", "R", "R", "O"]),
                "m": _t(["N", "O"]),
            },
            _IMPORTS + "def run(x, w, b):\n"
            "    y = F.conv2d(x, w, b)\n"
            "    mp = F.max_pool2d(torch.relu(y), 2)\n"
            "    ap = F.avg_pool2d(torch.tanh(y), 3, stride=2)\n"
            "    nhwc = (y * 3.0).permute(0, 2, 3, 1)\n"
            "    return mp, ap, nhwc, y.mean(dim=(2, 3))\n",
        ),
        _ws(_EXACT, *_n(1, 2)),
    ),
    # Scan rewrites in 16-bit floats (one dtype throughout: rewritten) and on a 1-d tensor
    # whose cat has no dim argument (dim 0, the scanned one).
    "h_scans_16": (
        _definition(
            "h_scans_16",
            {"B": {"type": "var"}, **_const(L=21)},
            {"xb": _t(["B", "L"], "bfloat16"), "xh": _t(["B", "L"], "float16"), "v": _t(["L"])},
            {
                "eb": _t(["B", "L"], "bfloat16"),
                "rb": _t(["B", "L"], "bfloat16"),
                "eh": _t(["B", "L"], "float16"),
                "rh": _t(["B", "L"], "float16"),
                "ev": _t(["L"]),
                "rv": _t(["L"]),
            },
            _IMPORTS + "def run(xb, xh, v):\n"
            "    eb = torch.cat([torch.zeros_like(xb[:, :1]), (xb[:, :-1] * 0.25).cumsum(-1)],"
            " -1)\n"
            "    rb = (xb * 0.25).flip(-1).cumsum(-1).flip(-1)\n"
            "    eh = torch.cat([torch.ones_like(xh[:, :1]), (1 + xh[:, :-1] / 16).cumprod(-1)],"
            " 1)\n"
            "    rh = torch.flip(torch.cumprod(torch.flip(1 + xh / 16, [1]), 1), [1])\n"
            "    ev = torch.cat([torch.zeros(1, device=v.device), v[:-1].cumsum(0)])\n"
            "    rv = v.flip(0).cumsum(0).flip(0)\n"
            "    return eb, rb, eh, rh, ev, rv\n",
        ),
        [_w("b3", {"B": 3}), _w("b1", {"B": 1})],
    ),
    # Not from the reviewed change (the same source at b728d49): a cat of an int64 zero column
    # and a float32 cumsum (torch.cat promotes) renders `(0).to(tl.float32)`, which Triton
    # rejects (an int literal has no `.to`).
    "h_cat_mixed": (
        _definition(
            "h_cat_mixed",
            {"B": {"type": "var"}, **_const(L=13)},
            {"x": _t(["B", "L"])},
            {"e": _t(["B", "L"])},
            _IMPORTS + "def run(x):\n"
            "    i0 = torch.zeros((x.shape[0], 1), dtype=torch.int64, device=x.device)\n"
            "    return torch.cat([i0, x[:, :-1].cumsum(-1)], -1)\n",
        ),
        _ws(_EXACT, _w("b2", {"B": 2})),
    ),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    root = tmp_path_factory.mktemp("hostile_problems")
    return traced_problems(root, PROBLEMS)


def _graph(traced: Traced, name: str, workload: int = 0) -> Graph:
    op_graph = traced[name][1].workloads[workload].graph
    assert op_graph is not None, traced[name][1].workloads[workload].error
    return build_graph(op_graph)


def _spaces(traced: Traced, name: str, knobs: dict[str, int]) -> list[Space]:
    """The Spaces of the kernels of the first workload's schedule, LAYOUT_CONV on."""
    graph = _graph(traced, name)
    channels_last_convs(graph, convertible_convs(graph))
    settings = default_knobs("cpu") | knobs
    sched = schedule_graph(graph, lambda space: launch_for(space, settings, "cpu"))
    return [
        s.space for s in sched.steps if isinstance(s, KernelStep) and isinstance(s.space, Space)
    ]


#: Knob settings for the convolution problems: layout and bias peeling on and off, ragged tile
#: kernels, split and looped reductions in memory order.
CONV_VARIANTS: dict[str, dict[str, int]] = {
    "nchw-bias": {"LAYOUT_CONV": 0, "FUSE_CONV_BIAS": 0},
    "nchw-peel": {"LAYOUT_CONV": 0, "FUSE_CONV_BIAS": 1},
    "nhwc-bias": {"LAYOUT_CONV": 1, "FUSE_CONV_BIAS": 0},
    "nhwc-peel": {"LAYOUT_CONV": 1, "FUSE_CONV_BIAS": 1},
    "nhwc-ragged": {"LAYOUT_CONV": 1, "FUSE_CONV_BIAS": 1, "TILE_X": 16, "TILE_R": 16},
    "nhwc-split-looped": {
        "LAYOUT_CONV": 1,
        "SPLIT_R": 8,
        "SPLIT_COL": 8,
        "PERSISTENT_MAX": 16,
        "BLOCK_R": 16,
        "ROWS": 4,
        "COL_X": 64,
        "COL_R": 8,
    },
}
CONV_PROBLEMS = [
    "h_conv_mix",
    "h_conv_h_only",
    "h_conv_bf16",
    "h_conv_kinds",
    "h_conv_outputs",
    "h_conv_views",
    "h_conv_scan",
    "h_conv_pool",
]


def test_convolution_problems_match_the_reference(hostile: Traced, run_checks: RunChecks) -> None:
    sources = {
        (name, label): generate_problem(hostile, name, knobs).source
        for name in CONV_PROBLEMS
        for label, knobs in CONV_VARIANTS.items()
    }
    assert_match_reference(hostile, run_checks, "cpu", sources)


def test_an_argmax_beside_a_reordered_sum_counts_row_major(
    hostile: Traced, run_checks: RunChecks
) -> None:
    sources = {
        ("h_argmax_sibling", label): generate_problem(hostile, "h_argmax_sibling", knobs).source
        for label, knobs in {"nchw": {"LAYOUT_CONV": 0}, "nhwc": {"LAYOUT_CONV": 1}}.items()
    }
    assert_match_reference(hostile, run_checks, "cpu", sources)


def test_scan_rewrites_match_the_reference(hostile: Traced, run_checks: RunChecks) -> None:
    variants = {"default": {}, "looped": {"PERSISTENT_MAX": 16, "BLOCK_R": 16, "ROWS": 4}}
    sources = {
        (name, label): generate_problem(hostile, name, knobs).source
        for name in ("h_scans", "h_scans_16")
        for label, knobs in variants.items()
    }
    assert_match_reference(hostile, run_checks, "cpu", sources)


def test_a_cat_of_an_int_column_and_a_float_scan(hostile: Traced, run_checks: RunChecks) -> None:
    sources = {("h_cat_mixed", "default"): generate_problem(hostile, "h_cat_mixed", {}).source}
    assert_match_reference(hostile, run_checks, "cpu", sources)


def _output_nodes(traced: Traced, name: str) -> dict[str, Any]:
    """Each output of the first workload's graph: its node (after the builder's rewrites)."""
    graph = _graph(traced, name)
    names = list(traced[name][0].definition.outputs)
    return {n: graph.node(ref) for n, ref in zip(names, graph.outputs, strict=True)}


def test_scan_rewrites_fire_only_on_their_patterns(hostile: Traced) -> None:
    out = _output_nodes(hostile, "h_scans")

    def reverse_scan(name: str) -> bool:
        return out[name].kind == Kind.SCAN and out[name].reverse

    def scan_of_cat(name: str) -> bool:
        node = out[name]
        return node.kind == Kind.SCAN and not node.reverse and "cat" in node.args[0].node

    # flips over two dims / mismatched flips: no reverse scan.
    assert not reverse_scan("r2") and not reverse_scan("r3")
    assert reverse_scan("rp") and reverse_scan("ri") and reverse_scan("sf_flip")
    # cat along another dim, a cumprod after a zero, two leading zeros: a cat stays.
    for name in ("e0", "e2", "e6"):
        assert out[name].target == "aten.cat.default" and out[name].kind != Kind.SCAN, name
    assert scan_of_cat("e1") and scan_of_cat("e5") and scan_of_cat("es")
    assert out["e5"].meta.dtype == "int64"
    # A cat after a reverse scan is no exclusive scan: it stays a cat.
    assert out["e8"].target == "aten.cat.default" and out["e8"].kind != Kind.SCAN
    # The reverse exclusive scan: a flip of the rewritten (forward) scan.
    assert out["e7"].kind != Kind.SCAN
    out16 = _output_nodes(hostile, "h_scans_16")
    assert all(out16[n].kind == Kind.SCAN and not out16[n].reverse for n in ("eb", "eh", "ev"))
    assert all(out16[n].kind == Kind.SCAN and out16[n].reverse for n in ("rb", "rh", "rv"))


def test_which_convolutions_run_channels_last(hostile: Traced) -> None:
    on = {"LAYOUT_CONV": 1}

    def conv_lines(name: str, knobs: dict[str, int]) -> list[str]:
        """The convolution calls of the first workload's plan."""
        source = generate_problem(hostile, name, knobs).source.split("def _kg_plan1")[0]
        return [line for line in source.splitlines() if "aten.convolution" in line]

    # 3-d: NCDHW; transposed 2-d: channels-last; 1-d: as traced.
    kinds = conv_lines("h_conv_kinds", on)
    assert not any("channels_last_3d" in line for line in kinds)
    assert sum("memory_format=torch.channels_last" in line for line in kinds) == 1
    # A reduction over H alone, a scan: the convolution keeps NCHW.
    for name in ("h_conv_h_only", "h_conv_scan"):
        assert not any("channels_last" in line for line in conv_lines(name, on)), name
    assert "tile" in generate_problem(hostile, "h_conv_mix", on).kinds
    assert "tile" in generate_problem(hostile, "h_conv_pool", on).kinds
    # Peeling: the convolution that is an output keeps its bias; the others (read by fused
    # kernels, also the first of a conv -> relu -> conv chain) lose it.
    peeled = conv_lines("h_conv_outputs", {"FUSE_CONV_BIAS": 1})
    kept = conv_lines("h_conv_outputs", {"FUSE_CONV_BIAS": 0})
    assert sum(", None, [1, 1]" in line for line in kept) == 0
    assert sum(", None, [1, 1]" in line for line in peeled) == len(peeled) - 1 == 6, peeled
    assert "(x, w, b, [1, 1]" in peeled[0]
    # Spaces: kept dims in logical order, the tile kernels over (N, C) x spatial.
    for name in ("h_conv_mix", "h_conv_views", "h_conv_pool", "h_conv_outputs"):
        for space in _spaces(hostile, name, {}):
            kept = [d for d in space.walk() if d not in space.dims]
            assert kept == sorted(kept) or space.tiled, (name, space)
            if space.tiled:
                assert space.dims == (2, 3) and not space.order, (name, space)
