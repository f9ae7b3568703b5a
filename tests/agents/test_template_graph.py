"""A template's text match confirmed (or refused) by the reference's traced graph.

The problems are small ones written here in the SOL-ExecBench format, traced on the CPU in one
subprocess; `confirm_match` reads the graphs, and one problem goes through the product's path
(`match_template` on a problem dir, which traces it itself).
"""

from pathlib import Path
from typing import Any

import pytest
from problem_dirs import Problem, traced_problems, write_problem_dir

from kernelarc.agents.triton.template_graph import confirm_match
from kernelarc.agents.triton.template_library import match_template
from kernelarc.problems.files import load_problem


def _square(name: str, body: str, bias: bool = False) -> Problem:
    inputs: dict[str, Any] = {
        "a": {"shape": ["M", "M"], "dtype": "float32"},
        "b": {"shape": ["M", "M"], "dtype": "float32"},
    }
    args = "a, b"
    if bias:
        inputs["bias"] = {"shape": ["M"], "dtype": "float32"}
        args = "a, b, bias"
    definition = {
        "name": name,
        "op_type": "matmul",
        "axes": {"M": {"type": "var"}},
        "inputs": inputs,
        "outputs": {"c": {"shape": ["M", "M"], "dtype": "float32"}},
        "reference": f"import torch\nimport torch.nn.functional as F\n\ndef run({args}):\n"
        f"    return {body}\n",
    }
    return definition, [{"uuid": f"{name}-16", "axes": {"M": 16}, "inputs": {}}]


def _rows(name: str, body: str, op_type: str = "softmax") -> Problem:
    definition = {
        "name": name,
        "op_type": op_type,
        "axes": {"R": {"type": "var"}, "C": {"type": "const", "value": 32}},
        "inputs": {"x": {"shape": ["R", "C"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["R", "C"], "dtype": "float32"}},
        "reference": f"import torch\n\ndef run(x):\n    return {body}\n",
    }
    return definition, [{"uuid": f"{name}-8", "axes": {"R": 8}, "inputs": {}}]


def _norm(name: str, body: str, roles: str = "x, weight", outs: str = "y") -> Problem:
    """An RMSNorm (`x, weight`, `x, residual, weight`) or add-LayerNorm (`x, residual, weight,
    bias`) problem over rows of 32; `body` is the reference's lines after `def run(...)`."""
    row = {"shape": ["R", "C"], "dtype": "float32"}
    inputs = {
        n: {"shape": ["C"], "dtype": "float32"} if n in {"weight", "bias"} else row
        for n in roles.split(", ")
    }
    definition = {
        "name": name,
        "op_type": "layernorm" if "bias" in inputs else "rmsnorm",
        "axes": {"R": {"type": "var"}, "C": {"type": "const", "value": 32}},
        "inputs": inputs,
        "outputs": {o: row for o in outs.split(", ")},
        "reference": "import torch\nimport torch.nn.functional as F\n\nEPS = 1e-6\n\n"
        f"def run({roles}):\n{body}",
    }
    return definition, [{"uuid": f"{name}-8", "axes": {"R": 8}, "inputs": {}}]


_RMS = "torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)"
_ADD = ("x, residual, weight", "y, residual_out")
_LN = ("x, residual, weight, bias", "y, residual_out")

#: name -> (problem, B_IS_NK the graph must give, or the words of the refusal).
CASES: dict[str, tuple[Problem, str]] = {
    "plain": (_square("plain", "a @ b"), "False"),
    "transposed_b": (_square("transposed_b", "a @ b.T"), "True"),
    "linear": (_square("linear", "F.linear(a, b)"), "True"),
    "twice_transposed": (_square("twice_transposed", "a @ b.T.contiguous().T"), "False"),
    "bias_relu": (_square("bias_relu", "torch.relu(a @ b + bias)", bias=True), "False"),
    "addmm_gelu": (_square("addmm_gelu", "F.gelu(torch.addmm(bias, a, b.t()))", True), "True"),
    "tril": (_square("tril", "torch.tril(a @ b)"), "computes iota"),
    "scaled": (_square("scaled", "(a @ b) * 2.0"), "computes mul"),
    "scaled_gelu": (_square("scaled_gelu", "F.gelu((a @ b) * 3.0)"), "with 3"),
    "left_transposed": (_square("left_transposed", "a.T @ b"), "from the left"),
    "gelu_plus_one": (_square("gelu_plus_one", "F.gelu(a @ b) + 1.0"), "add x2"),
    # No activation named in the text, one in the graph: the template would leave it out.
    "clamped": (_square("clamped", "torch.clamp_min(a @ b, 0.0)"), "computes clamp_min"),
    "silu": (_square("silu", "F.silu(a @ b.T)"), "True"),
    "leaky": (_square("leaky", "F.leaky_relu(a @ b, 0.1)"), "computes gt"),
    "softmax_last": (_rows("softmax_last", "torch.softmax(x, dim=-1)"), ""),
    # The text says dim=-1 (in a comment); the graph reduces the first axis.
    "softmax_first": (_rows("softmax_first", "torch.softmax(x, 0)  # dim=-1"), "not the last"),
    "softmax_transposed": (_rows("softmax_transposed", "torch.softmax(x.T, dim=-1).T"), "permute"),
    "softmax_scaled": (_rows("softmax_scaled", "torch.softmax(x * 2.0, dim=-1)"), "mul"),
    # Ops of the softmax, but not the softmax: a temperature, exp twice, rows split by a view.
    "softmax_temperature": (_rows("softmax_temperature", "torch.softmax(x / 2.0, dim=-1)"), "div"),
    "softmax_of_exp": (_rows("softmax_of_exp", "torch.softmax(x.exp(), dim=-1)"), "amax to (e)"),
    "softmax_heads": (
        _rows("softmax_heads", "torch.softmax(x.view(x.shape[0], 4, -1), dim=-1).view(x.shape)"),
        "rows of 8, not the whole rows of 32",
    ),
    "softmax_by_hand": (
        _rows("softmax_by_hand", "x.exp() / x.exp().sum(dim=-1, keepdim=True)  # softmax"),
        "",
    ),
    # GEMM: a scaled product or bias, a bias per row, a bias added after the activation.
    "addmm_alpha": (_square("addmm_alpha", "torch.addmm(bias, a, b, alpha=2.0)", True), "alpha=2"),
    "add_alpha": (_square("add_alpha", "torch.add(a @ b, bias, alpha=2.0)", True), "alpha=2"),
    "bias_per_row": (_square("bias_per_row", "a @ b + bias[:, None]", True), "per column"),
    "bias_after_relu": (_square("bias_after_relu", "torch.relu(a @ b) + bias", True), "add"),
    "bias_row_view": (_square("bias_row_view", "F.gelu(a @ b + bias.view(1, -1))", True), "False"),
    # RMSNorm: the template multiplies by weight, adds EPS, returns (out, x + residual).
    "rmsnorm": (_norm("rmsnorm", f"    h = x\n    return h * {_RMS} * weight\n"), ""),
    "rmsnorm_by_sum": (
        _norm(
            "rmsnorm_by_sum",
            "    return x / torch.sqrt((x * x).sum(-1, keepdim=True) / 32 + EPS)"
            " * weight  # mean(x * x)\n",
        ),
        "",
    ),
    "rmsnorm_one_over": (
        _norm(
            "rmsnorm_one_over",
            "    h = x.float()\n    s = torch.sqrt(h.pow(2).mean(-1, keepdim=True) + EPS)\n"
            "    return weight * (h * (1.0 / s)).to(x.dtype)\n",
        ),
        "",
    ),
    "rmsnorm_gemma": (
        _norm("rmsnorm_gemma", f"    h = x\n    return h * {_RMS} * (weight + 1.0)\n"),
        "add to (weight) with 1",
    ),
    "rmsnorm_other_eps": (
        _norm(
            "rmsnorm_other_eps",
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-2) * weight\n",
        ),
        "with 0.01",
    ),
    "rmsnorm_no_weight": (
        _norm("rmsnorm_no_weight", f"    h = x\n    return h * {_RMS}\n"),
        "returns (n)",
    ),
    "add_rmsnorm": (
        _norm("add_rmsnorm", f"    h = x + residual\n    return h * {_RMS} * weight, h\n", *_ADD),
        "",
    ),
    "add_rmsnorm_swapped": (
        _norm(
            "add_rmsnorm_swapped",
            f"    h = x + residual\n    return h, h * {_RMS} * weight\n",
            "x, residual, weight",
            "y, z",
        ),
        "returns (h, out)",
    ),
    "add_rmsnorm_alpha": (
        _norm(
            "add_rmsnorm_alpha",
            f"    h = torch.add(x, residual, alpha=2.0)\n    return h * {_RMS} * weight, h\n",
            *_ADD,
        ),
        "alpha=2",
    ),
    # add + LayerNorm: biased variance, centred rows, + bias, of x + residual.
    "add_layernorm": (
        _norm(
            "add_layernorm",
            "    h = x + residual\n"
            "    return F.layer_norm(h, (h.shape[-1],), weight, bias, EPS), h\n",
            *_LN,
        ),
        "",
    ),
    "layernorm_unbiased": (
        _norm(
            "layernorm_unbiased",
            "    h = x + residual\n    d = h - h.mean(-1, keepdim=True)\n"
            "    return d / torch.sqrt(h.var(-1, keepdim=True) + EPS) * weight + bias, h\n",
            *_LN,
        ),
        "unbiased var",
    ),
    "layernorm_uncentred": (
        _norm(
            "layernorm_uncentred",
            f"    h = x + residual\n    return h * {_RMS} * weight + bias, h\n",
            *_LN,
        ),
        "applies pow to (h)",
    ),
    "layernorm_minus_bias": (
        _norm(
            "layernorm_minus_bias",
            "    h = x + residual\n"
            "    return F.layer_norm(h, (h.shape[-1],), weight, None, EPS) - bias, h\n",
            *_LN,
        ),
        "applies sub to (nw, bias)",
    ),
    "layernorm_of_x": (
        _norm(
            "layernorm_of_x",
            "    h = x + residual\n"
            "    return F.layer_norm(x, (x.shape[-1],), weight, bias, EPS), h\n",
            *_LN,
        ),
        "var_mean to (x)",
    ),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any]]:
    root = tmp_path_factory.mktemp("template_graph")
    return traced_problems(root, {name: problem for name, (problem, _) in CASES.items()})


def _text_match(problem: Any, name: str) -> Any:
    """The match from the definition's text alone (a bare Definition is not traced)."""
    found = match_template(problem.definition)
    if isinstance(found, list):
        pytest.skip(f"{name}: no text match to confirm ({found[0]})")
    return found[1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_graph_confirms_or_refuses_the_text_match(
    traced: dict[str, tuple[Any, Any]], name: str
) -> None:
    problem, traces = traced[name]
    match = _text_match(problem, name)
    expected = CASES[name][1]
    result = confirm_match(match, traces)
    if expected in {"True", "False"}:
        assert not isinstance(result, str), result
        assert dict(result.constants)["B_IS_NK"] == expected
    elif expected == "":
        assert result == match
    else:
        assert isinstance(result, str), f"{name} was confirmed: {result}"
        assert expected in result
        assert name in result  # the traced workload is named


def test_the_text_alone_takes_a_square_product_for_a_transposed_one(
    traced: dict[str, tuple[Any, Any]],
) -> None:
    """Why the graph is asked: both layouts fit a square `b`, and the text picks [N, K]."""
    problem, _ = traced["plain"]
    assert dict(_text_match(problem, "plain").constants)["B_IS_NK"] == "True"


def test_match_template_on_a_problem_dir_traces_it_and_confirms(tmp_path: Path) -> None:
    plain = load_problem(write_problem_dir(tmp_path, "plain", CASES["plain"][0]))
    found = match_template(plain)
    assert not isinstance(found, list), found
    assert dict(found[1].constants)["B_IS_NK"] == "False"
    tril = load_problem(write_problem_dir(tmp_path, "tril", CASES["tril"][0]))
    refused = match_template(tril)
    assert isinstance(refused, list)
    assert any(reason.startswith("gemm_epilogue: the traced reference") for reason in refused)
