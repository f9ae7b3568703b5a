"""Which Triton template fits a definition, decided from the definition alone.

Place in the flow: `template_library.KernelTemplate.bind` calls one matcher per family; each
returns a `TemplateMatch` (roles of the definition's tensors and the constants the template
text needs) or the reason it does not apply. No workload is needed: shape relations are checked
on "probe" shapes, the definition's axes resolved with made-up sizes for its var axes (two
different assignments, so an equality that holds must hold for the axis names, not by chance).
Constants (eps, the activation) are read from the reference source; a reference that computes
something the template would not is refused with a reason, never guessed at.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kernelarc.reference_ops import uses_operations
from kernelarc.schema import Definition, DType, TensorSpec
from kernelarc.schema.axes import AxisExpressionError

Shapes = dict[str, tuple[int, ...]]

FLOAT_DTYPES = frozenset({DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16})

#: Made-up var-axis sizes (even, not powers of two, distinct per axis) for the two probes.
_PROBE_BASES = ((96, 64), (144, 96))

_FLOAT_LITERAL = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_EPS_RE = re.compile(
    r"\b(?:\w*_)?eps(?:ilon)?\s*(?::\s*float\s*)?=\s*(?:float\()?" + _FLOAT_LITERAL, re.IGNORECASE
)
_GEMM_CALLS = frozenset({"matmul", "mm", "linear", "Linear", "addmm"})
"""The matrix products the GEMM template serves (besides the `@` operator)."""
#: Calls a GEMM reference may not make: the template computes matmul, bias and one activation.
_GEMM_FOREIGN_RE = re.compile(
    r"\b(softmax|log_softmax|layer_norm|rms_norm|dropout|sigmoid|tanh|exp|sqrt|rsqrt|norm|"
    r"transpose|permute|sum|mean|max|min|cat|stack|bmm|einsum)\b"
)


@dataclass(frozen=True)
class TemplateMatch:
    """A template bound to one definition: roles of its tensors and the constants it needs."""

    family: str
    """Template family (also the template file's stem)."""
    input_roles: tuple[tuple[str, str], ...]
    """(template role, definition input name) in the template's `_launch` parameter order."""
    output_order: tuple[int, ...]
    """For each definition output in order, its index in the tuple `_launch` returns."""
    constants: tuple[tuple[str, str], ...]
    """Placeholder name to Python literal text (eps, dtypes, activation, flags)."""


Matcher = Callable[[Definition], TemplateMatch | str]


def torch_dtype(dtype: DType) -> str:
    """The `torch.<dtype>` expression of a SOL-ExecBench dtype."""
    return f"torch.{dtype.value}"


def find_eps(reference: str) -> float | None:
    """The epsilon written in a reference (`EPS = 1e-6`, `eps=1e-5`, ...), or None."""
    found = _EPS_RE.search(reference)
    return float(found.group(1)) if found else None


def find_gelu_tanh(reference: str) -> bool | None:
    """True for a tanh-approximate GELU, False for the erf GELU, None when there is no GELU."""
    if not re.search(r"\bgelu\b", reference, re.IGNORECASE):
        return None
    return bool(re.search(r"approximate\s*=\s*['\"]tanh['\"]", reference))


def find_activation(reference: str) -> int | None:
    """Template activation code of the one activation a reference applies, or None if several.

    0 none, 1 erf GELU, 2 tanh GELU, 3 SiLU, 4 ReLU (the codes of the GEMM and gated templates).
    """
    found: list[int] = []
    tanh = find_gelu_tanh(reference)
    if tanh is not None:
        found.append(2 if tanh else 1)
    if re.search(r"\bsilu\b", reference):
        found.append(3)
    if re.search(r"\brelu\b", reference):
        found.append(4)
    if len(found) > 1:
        return None
    return found[0] if found else 0


def _code_only(source: str) -> str:
    """The source without string literals and comments (`approximate="tanh"` is no tanh call)."""
    without_strings = re.sub(r"(\"\"\"|'''|\"|')(?:\\.|(?!\1).)*?\1", "", source, flags=re.DOTALL)
    return re.sub(r"#[^\n]*", "", without_strings)


def probe_shapes(definition: Definition) -> list[Shapes]:
    """Every tensor's shape under each probe assignment of the var axes (scalars left out).

    Raises:
        ValueError: the axes do not resolve under any probe (an expression that is never
            integral for even sizes, say).
    """
    var_axes = [name for name, axis in definition.axes.items() if axis.type == "var"]
    probes: list[Shapes] = []
    for base, step in _PROBE_BASES:
        bound = {name: base + step * i for i, name in enumerate(var_axes)}
        try:
            axes = definition.resolve_axes(bound)
        except (ValueError, AxisExpressionError):
            continue
        shapes: Shapes = {}
        for name, spec in (definition.inputs | definition.outputs).items():
            shape = definition.shape_of(spec, axes)
            if shape is not None:
                shapes[name] = shape
        probes.append(shapes)
    if not probes:
        msg = f"{definition.name}: axes do not resolve for probe sizes"
        raise ValueError(msg)
    return probes


def _check_tensors(specs: Mapping[str, TensorSpec], ranks: Sequence[int], kind: str) -> str:
    """'' when the specs are float tensors of the given ranks (0 = any rank >= 1), else why not."""
    if len(specs) != len(ranks):
        return f"expects {len(ranks)} {kind}, the definition has {len(specs)}"
    for (name, spec), rank in zip(specs.items(), ranks, strict=True):
        if spec.shape is None or spec.dtype not in FLOAT_DTYPES:
            return f"{kind[:-1]} {name!r} is not a float16/bfloat16/float32 tensor"
        if (rank and len(spec.shape) != rank) or not spec.shape:
            return f"{kind[:-1]} {name!r} has rank {len(spec.shape)}, expected {rank or '>= 1'}"
    return ""


def _structure(definition: Definition, in_ranks: Sequence[int], out_ranks: Sequence[int]) -> str:
    return _check_tensors(definition.inputs, in_ranks, "inputs") or _check_tensors(
        definition.outputs, out_ranks, "outputs"
    )


def _holds(definition: Definition, relation: Callable[[Shapes], bool]) -> bool:
    """The shape relation holds under every probe."""
    try:
        return all(relation(shapes) for shapes in probe_shapes(definition))
    except (KeyError, IndexError, ValueError):
        return False


def _out_dtype(definition: Definition, index: int) -> str:
    return torch_dtype(list(definition.outputs.values())[index].dtype)


def _eps_constant(definition: Definition) -> tuple[str, str] | str:
    eps = find_eps(definition.reference)
    if eps is None:
        return "no eps constant found in the reference (e.g. `EPS = 1e-6`)"
    return ("EPS", repr(eps))


def _signature(roles: Sequence[str]) -> tuple[str, str]:
    return ("SIGNATURE", ", ".join(roles))


def match_gated_activation(definition: Definition) -> TemplateMatch | str:
    """out = act(x[..., :D]) * x[..., D:] with act SiLU or GELU (SwiGLU / GeGLU gates)."""
    why = _structure(definition, [0], [0])
    if why:
        return why
    act = find_activation(definition.reference)
    if act not in (1, 2, 3):
        return "the reference applies no single silu or gelu gate"
    (x,), (out,) = list(definition.inputs), list(definition.outputs)
    if not _holds(definition, lambda s: s[x][:-1] == s[out][:-1] and s[x][-1] == 2 * s[out][-1]):
        return f"expects {out!r} = {x!r} with the last axis halved"
    codes = {1: 1, 2: 2, 3: 0}  # the gated template's codes: 0 silu, 1 erf GELU, 2 tanh GELU
    constants = (("ACTIVATION", str(codes[act])), ("OUT_DTYPE", _out_dtype(definition, 0)))
    return TemplateMatch("gated_activation", (("x", x),), (0,), constants)


def match_rmsnorm(definition: Definition) -> TemplateMatch | str:
    """RMSNorm over the last axis, optionally of x + residual (residual_out returned too)."""
    n_in = len(definition.inputs)
    if n_in == 3:
        why = _structure(definition, [0, 0, 1], [0, 0])
    else:
        why = _structure(definition, [0, 1], [0])
    if why:
        return why
    if re.search(r"\b1(\.0*)?\s*\+\s*\w*weight", definition.reference):
        return "the reference scales by (1 + weight) (Gemma style); only `* weight` is served"
    if re.search(r"\bmean\s*\(|\.mean\(", definition.reference) is None:
        return "the reference takes no mean (RMSNorm needs mean(x^2))"
    eps = _eps_constant(definition)
    if isinstance(eps, str):
        return eps
    names, outs = list(definition.inputs), list(definition.outputs)
    x, weight = names[0], names[-1]
    if not _holds(definition, lambda s: s[weight] == s[x][-1:] and s[outs[0]] == s[x]):
        return f"expects {weight!r} of size {x!r}'s last axis and {outs[0]!r} shaped like {x!r}"
    roles = [("x", x), ("weight", weight)]
    order: tuple[int, ...] = (0,)
    res_dtype = _out_dtype(definition, 0)
    if n_in == 3:
        residual = names[1]
        if not _holds(definition, lambda s: s[residual] == s[x] and s[outs[1]] == s[x]):
            return f"expects {residual!r} and {outs[1]!r} shaped like {x!r}"
        res_index = next((i for i, o in enumerate(outs) if "res" in o.lower()), 1)
        order = (1, 0) if res_index == 0 else (0, 1)
        res_dtype = _out_dtype(definition, res_index)
        roles = [("x", x), ("residual", residual), ("weight", weight)]
        out_dtype = _out_dtype(definition, 1 - res_index)
    else:
        out_dtype = _out_dtype(definition, 0)
    constants = (
        eps,
        ("HAS_RESIDUAL", str(n_in == 3)),
        ("OUT_DTYPE", out_dtype),
        ("RES_DTYPE", res_dtype),
        _signature([role for role, _ in roles]),
    )
    return TemplateMatch("rmsnorm", tuple(roles), order, constants)


def match_add_layernorm(definition: Definition) -> TemplateMatch | str:
    """residual_out = x + residual; out = LayerNorm(residual_out) * weight + bias."""
    why = _structure(definition, [0, 0, 1, 1], [0, 0])
    if why:
        return why
    (x, residual, weight, bias), outs = list(definition.inputs), list(definition.outputs)
    if not _holds(definition, lambda s: s[residual] == s[x] and all(s[o] == s[x] for o in outs)):
        return f"expects {residual!r} and the outputs shaped like {x!r}"
    if not _holds(definition, lambda s: s[weight] == s[x][-1:] and s[bias] == s[x][-1:]):
        return f"expects {weight!r} and {bias!r} of size {x!r}'s last axis"
    eps = _eps_constant(definition)
    if isinstance(eps, str):
        return eps
    # The residual output is the one whose name says so; otherwise the second.
    res_index = next((i for i, o in enumerate(outs) if "res" in o.lower()), 1)
    order = (1, 0) if res_index == 0 else (0, 1)
    constants = (
        eps,
        ("OUT_DTYPE", _out_dtype(definition, 1 - res_index)),
        ("RES_DTYPE", _out_dtype(definition, res_index)),
    )
    roles = (("x", x), ("residual", residual), ("weight", weight), ("bias", bias))
    return TemplateMatch("add_layernorm", roles, order, constants)


def match_softmax(definition: Definition) -> TemplateMatch | str:
    """Softmax over the last axis."""
    why = _structure(definition, [0], [0])
    if why:
        return why
    reference = definition.reference
    if not re.search(r"\bsoftmax\b", reference) or "log_softmax" in reference:
        return "the reference does not call softmax (log_softmax is not served)"
    (x,), (out,) = list(definition.inputs), list(definition.outputs)
    rank = len(definition.inputs[x].shape or [])
    if not re.search(rf"dim\s*=\s*(-1|{rank - 1})\b", reference):
        return "the reference's softmax is not over the last axis (dim=-1)"
    if not _holds(definition, lambda s: s[x] == s[out]):
        return f"expects {out!r} shaped like {x!r}"
    return TemplateMatch("softmax", (("x", x),), (0,), (("OUT_DTYPE", _out_dtype(definition, 0)),))


def match_gemm_epilogue(definition: Definition) -> TemplateMatch | str:
    """out[M, N] = act(a[M, K] @ b + bias) with b as [N, K] (nn.Linear) or [K, N]."""
    n_in = len(definition.inputs)
    why = _structure(definition, [2, 2, 1] if n_in == 3 else [2, 2], [2])
    if why:
        return why
    reference = definition.reference
    if not uses_operations(reference, _GEMM_CALLS):
        return "the reference has no matrix product (@, matmul, mm, linear, addmm)"
    foreign = _GEMM_FOREIGN_RE.search(_code_only(reference))
    if foreign:
        return (
            f"the reference calls {foreign.group(1)!r}; only matmul + bias + activation is served"
        )
    act = find_activation(reference)
    if act is None:
        return "the reference applies more than one activation"
    names, (out,) = list(definition.inputs), list(definition.outputs)
    a, b = names[0], names[1]

    def nk(s: Shapes) -> bool:
        return s[b][1] == s[a][1] and s[out] == (s[a][0], s[b][0])

    def kn(s: Shapes) -> bool:
        return s[b][0] == s[a][1] and s[out] == (s[a][0], s[b][1])

    b_is_nk = _holds(definition, nk)
    if not b_is_nk and not _holds(definition, kn):
        return f"expects {a!r} [M, K], {b!r} [N, K] or [K, N] and {out!r} [M, N]"
    roles = [("a", a), ("b", b)]
    if n_in == 3:
        bias = names[2]
        if not _holds(definition, lambda s: s[bias] == s[out][1:]):
            return f"expects {bias!r} of size N ({out!r}'s last axis)"
        roles.append(("bias", bias))
    ieee = definition.inputs[a].dtype == DType.FLOAT32
    constants = (
        ("HAS_BIAS", str(n_in == 3)),
        ("ACTIVATION", str(act)),
        ("B_IS_NK", str(b_is_nk)),
        ("IEEE_DOT", str(ieee)),
        ("OUT_DTYPE", _out_dtype(definition, 0)),
        _signature([role for role, _ in roles]),
    )
    return TemplateMatch("gemm_epilogue", tuple(roles), (0,), constants)


def match_rope(definition: Definition) -> TemplateMatch | str:
    """Rotate-half (NeoX) rotary embedding of q [T, Hq, D] and k [T, Hk, D]."""
    why = _structure(definition, [3, 3, 2, 2], [3, 3])
    if why:
        return why
    if "::2" in definition.reference:
        return "the reference looks interleaved (GPT-J style, `::2`); only rotate-half is served"
    (q, k, cos, sin), (q_out, k_out) = list(definition.inputs), list(definition.outputs)

    def fits(s: Shapes) -> bool:
        head_dim = s[q][2]
        return (
            s[k][0] == s[q][0]
            and s[k][2] == head_dim
            and head_dim % 2 == 0
            and s[cos] == (s[q][0], head_dim // 2)
            and s[sin] == s[cos]
            and s[q_out] == s[q]
            and s[k_out] == s[k]
        )

    if not _holds(definition, fits):
        return (
            f"expects {q!r} [T, Hq, D], {k!r} [T, Hk, D] with an even D, {cos!r} and {sin!r} "
            f"[T, D/2], and outputs shaped like the inputs"
        )
    constants = (("Q_DTYPE", _out_dtype(definition, 0)), ("K_DTYPE", _out_dtype(definition, 1)))
    roles = (("q", q), ("k", k), ("cos", cos), ("sin", sin))
    return TemplateMatch("rope", roles, (0, 1), constants)


def match_rmsnorm_backward(definition: Definition) -> TemplateMatch | str:
    """Backward of RMSNorm: (grad_out, x, weight) -> (grad_x, grad_weight)."""
    why = _structure(definition, [0, 0, 1], [0, 1])
    if why:
        return why
    reference = definition.reference
    if "rsqrt" not in reference and "sqrt" not in reference:
        return "the reference computes no rsqrt/sqrt (RMSNorm backward needs the row's rstd)"
    eps = _eps_constant(definition)
    if isinstance(eps, str):
        return eps
    (grad, x, weight), (dx, dw) = list(definition.inputs), list(definition.outputs)

    def fits(s: Shapes) -> bool:
        return s[grad] == s[x] and s[weight] == s[x][-1:] and s[dx] == s[x] and s[dw] == s[weight]

    if not _holds(definition, fits):
        return (
            f"expects {grad!r} and {dx!r} shaped like {x!r}, {weight!r} and {dw!r} of size "
            f"{x!r}'s last axis"
        )
    constants = (
        eps,
        ("DX_DTYPE", _out_dtype(definition, 0)),
        ("DW_DTYPE", _out_dtype(definition, 1)),
    )
    roles = (("grad_out", grad), ("x", x), ("weight", weight))
    return TemplateMatch("rmsnorm_backward", roles, (0, 1), constants)
