"""Triton kernel templates: which problem each fits, and how to render it into a kernel source.

Place in the flow: `TritonTemplateAgent` (triton_agent.py) asks `match_template(problem)` for the
template that fits a problem, then renders it once per knob setting with `render_source`. A
template fits when the definition's `op_type` is one it serves, the inputs and outputs have the
expected count, ranks, float dtypes and (on the first workload's resolved shapes) the expected
size relations, and every constant it needs (eps, GELU variant) can be read from the reference
source. The template texts live beside this module as `templates/<family>.py.txt` (package data):
Python modules with `${NAME}` placeholders that define a `_launch` function over canonical
argument roles; `render_source` appends a `run` with the definition's own parameter names.
"""

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from kernelarc.problems.files import Problem
from kernelarc.schema import Definition, DType, TensorSpec

Knobs = dict[str, int]
Shapes = dict[str, tuple[int, ...]]

FLOAT_DTYPES = frozenset({DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16})
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

_FLOAT_LITERAL = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_EPS_RE = re.compile(
    r"\b(?:\w*_)?eps(?:ilon)?\s*(?::\s*float\s*)?=\s*(?:float\()?" + _FLOAT_LITERAL, re.IGNORECASE
)


@dataclass(frozen=True)
class TemplateMatch:
    """A template bound to one problem: roles of its tensors and the constants it needs."""

    family: str
    """Template family (also the template file's stem)."""
    input_roles: tuple[tuple[str, str], ...]
    """(template role, definition input name) in the template's `_launch` parameter order."""
    output_order: tuple[int, ...]
    """For each definition output in order, its index in the tuple `_launch` returns."""
    constants: tuple[tuple[str, str], ...]
    """Placeholder name to Python literal text (eps, dtypes, GELU flavour)."""


@dataclass(frozen=True)
class KernelTemplate:
    """One template family: the op types it serves, its knob grids and its matcher."""

    family: str
    """Family name; `templates/<family>.py.txt` holds the text."""
    op_types: frozenset[str]
    """Definition op_types it may serve."""
    knob_grid: Mapping[str, Sequence[int]]
    """Knob name to candidate values (placeholders of the template), for CUDA."""
    cpu_knob_grid: Mapping[str, Sequence[int]]
    """The grid used on CPU: large tiles only, because Triton's interpreter costs per operation
    and per program, not per element (num_warps/num_stages are ignored there)."""
    matcher: Callable[[Problem], TemplateMatch | str]
    """A TemplateMatch, or the reason the template does not apply."""
    tile_knobs: tuple[str, ...] = ()
    """Knobs whose product is the tile size bounded by `max_tile` (register pressure)."""
    max_tile: int | None = None
    """Largest allowed product of `tile_knobs` on CUDA."""

    def knob_settings(self, device: str) -> list[Knobs]:
        """Every setting of the device's grid (CUDA: within the tile bound), in grid order."""
        grid = self.cpu_knob_grid if device == "cpu" else self.knob_grid
        keys = list(grid)
        settings = [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*(grid[k] for k in keys))
        ]
        if device == "cpu" or self.max_tile is None:
            return settings
        limit = self.max_tile
        return [k for k in settings if math.prod(k[n] for n in self.tile_knobs) <= limit]


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


def _resolved_shapes(problem: Problem) -> Shapes:
    """Concrete shapes of every tensor under the first workload's axes."""
    definition = problem.definition
    axes = definition.resolve_axes(dict(problem.workloads[0].axes))
    shapes: Shapes = {}
    for name, spec in (definition.inputs | definition.outputs).items():
        shape = definition.shape_of(spec, axes)
        if shape is not None:
            shapes[name] = shape
    return shapes


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


def _structure(problem: Problem, in_ranks: Sequence[int], out_ranks: Sequence[int]) -> str:
    definition = problem.definition
    return _check_tensors(definition.inputs, in_ranks, "inputs") or _check_tensors(
        definition.outputs, out_ranks, "outputs"
    )


def _names(definition: Definition) -> tuple[list[str], list[str]]:
    return list(definition.inputs), list(definition.outputs)


def _out_dtype(definition: Definition, index: int) -> str:
    return torch_dtype(list(definition.outputs.values())[index].dtype)


def _match_silu_and_mul(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [0], [0])
    if why:
        return why
    if not re.search(r"\bsilu\b", definition.reference):
        return "the reference does not call silu"
    (x,), (out,) = _names(definition)
    shapes = _resolved_shapes(problem)
    if shapes[x][:-1] != shapes[out][:-1] or shapes[x][-1] != 2 * shapes[out][-1]:
        return f"expects {out!r} = {x!r} with the last axis halved; got {shapes[x]}, {shapes[out]}"
    return TemplateMatch(
        "silu_and_mul", (("x", x),), (0,), (("OUT_DTYPE", _out_dtype(definition, 0)),)
    )


def _match_rmsnorm(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [0, 1], [0])
    if why:
        return why
    (x, weight), (out,) = _names(definition)
    shapes = _resolved_shapes(problem)
    if shapes[weight] != shapes[x][-1:] or shapes[out] != shapes[x]:
        return f"expects {weight!r} of size {x!r}'s last axis and {out!r} shaped like {x!r}"
    eps = find_eps(definition.reference)
    if eps is None:
        return "no eps constant found in the reference (e.g. `EPS = 1e-6`)"
    constants = (("EPS", repr(eps)), ("OUT_DTYPE", _out_dtype(definition, 0)))
    return TemplateMatch("rmsnorm", (("x", x), ("weight", weight)), (0,), constants)


def _match_add_layernorm(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [0, 0, 1, 1], [0, 0])
    if why:
        return why
    (x, residual, weight, bias), outs = _names(definition)
    shapes = _resolved_shapes(problem)
    if shapes[residual] != shapes[x] or any(shapes[o] != shapes[x] for o in outs):
        return f"expects {residual!r} and the outputs shaped like {x!r}"
    if shapes[weight] != shapes[x][-1:] or shapes[bias] != shapes[x][-1:]:
        return f"expects {weight!r} and {bias!r} of size {x!r}'s last axis"
    eps = find_eps(definition.reference)
    if eps is None:
        return "no eps constant found in the reference (e.g. `EPS = 1e-5`)"
    # The residual output is the one whose name says so; otherwise the second.
    res_index = next((i for i, o in enumerate(outs) if "res" in o.lower()), 1)
    order = (1, 0) if res_index == 0 else (0, 1)
    constants = (
        ("EPS", repr(eps)),
        ("OUT_DTYPE", _out_dtype(definition, 1 - res_index)),
        ("RES_DTYPE", _out_dtype(definition, res_index)),
    )
    roles = (("x", x), ("residual", residual), ("weight", weight), ("bias", bias))
    return TemplateMatch("add_layernorm", roles, order, constants)


def _match_softmax(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [0], [0])
    if why:
        return why
    reference = definition.reference
    if not re.search(r"\bsoftmax\b", reference) or "log_softmax" in reference:
        return "the reference does not call softmax (log_softmax is not served)"
    rank = len(definition.inputs[next(iter(definition.inputs))].shape or [])
    if not re.search(rf"dim\s*=\s*(-1|{rank - 1})\b", reference):
        return "the reference's softmax is not over the last axis (dim=-1)"
    (x,), (out,) = _names(definition)
    shapes = _resolved_shapes(problem)
    if shapes[x] != shapes[out]:
        return f"expects {out!r} shaped like {x!r}"
    return TemplateMatch("softmax", (("x", x),), (0,), (("OUT_DTYPE", _out_dtype(definition, 0)),))


def _match_gemm_bias_gelu(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [2, 2, 1], [2])
    if why:
        return why
    (a, weight, bias), (out,) = _names(definition)
    s = _resolved_shapes(problem)
    if s[a][1] != s[weight][1] or s[bias] != s[weight][:1] or s[out] != (s[a][0], s[weight][0]):
        return f"expects {a!r} [M, K], {weight!r} [N, K], {bias!r} [N] and {out!r} [M, N]"
    tanh = find_gelu_tanh(definition.reference)
    if tanh is None:
        return "no GELU found in the reference"
    constants = (("GELU_TANH", str(tanh)), ("OUT_DTYPE", _out_dtype(definition, 0)))
    return TemplateMatch(
        "gemm_bias_gelu", (("a", a), ("weight", weight), ("bias", bias)), (0,), constants
    )


def _match_rope(problem: Problem) -> TemplateMatch | str:
    definition = problem.definition
    why = _structure(problem, [3, 3, 2, 2], [3, 3])
    if why:
        return why
    if "::2" in definition.reference:
        return "the reference looks interleaved (GPT-J style, `::2`); only rotate-half is served"
    (q, k, cos, sin), (q_out, k_out) = _names(definition)
    s = _resolved_shapes(problem)
    head_dim = s[q][2]
    if s[k][0] != s[q][0] or s[k][2] != head_dim or head_dim % 2:
        return f"expects {q!r} [T, Hq, D] and {k!r} [T, Hk, D] with an even D"
    if s[cos] != (s[q][0], head_dim // 2) or s[sin] != s[cos]:
        return f"expects {cos!r} and {sin!r} of shape [T, D/2]"
    if s[q_out] != s[q] or s[k_out] != s[k]:
        return f"expects {q_out!r} shaped like {q!r} and {k_out!r} like {k!r}"
    constants = (("Q_DTYPE", _out_dtype(definition, 0)), ("K_DTYPE", _out_dtype(definition, 1)))
    roles = (("q", q), ("k", k), ("cos", cos), ("sin", sin))
    return TemplateMatch("rope", roles, (0, 1), constants)


_NORM_GPU = {
    "BLOCK_T": (1, 2, 4, 8),
    "BLOCK_H": (512, 1024, 2048, 4096, 8192),
    "NUM_WARPS": (4, 8, 16),
}
_NORM_CPU = {"BLOCK_T": (16, 32, 64), "BLOCK_H": (1024, 2048), "NUM_WARPS": (4,)}

TEMPLATES: tuple[KernelTemplate, ...] = (
    KernelTemplate(
        "silu_and_mul",
        frozenset({"activation", "silu_and_mul", "swiglu"}),
        {"BLOCK_T": (1, 2, 4, 8), "BLOCK_D": (256, 512, 1024, 2048), "NUM_WARPS": (4, 8)},
        {"BLOCK_T": (16, 32, 64), "BLOCK_D": (1024, 2048), "NUM_WARPS": (4,)},
        _match_silu_and_mul,
        ("BLOCK_T", "BLOCK_D"),
        8192,
    ),
    KernelTemplate(
        "rmsnorm",
        frozenset({"rmsnorm", "norm"}),
        _NORM_GPU,
        _NORM_CPU,
        _match_rmsnorm,
        ("BLOCK_T", "BLOCK_H"),
        16384,
    ),
    KernelTemplate(
        "add_layernorm",
        frozenset({"layernorm", "add_layernorm", "norm"}),
        _NORM_GPU,
        _NORM_CPU,
        _match_add_layernorm,
        ("BLOCK_T", "BLOCK_H"),
        16384,
    ),
    KernelTemplate(
        "softmax",
        frozenset({"softmax"}),
        {"BLOCK_T": (1, 2, 4), "BLOCK_V": (1024, 2048, 4096, 8192), "NUM_WARPS": (4, 8, 16)},
        {"BLOCK_T": (16, 32, 64), "BLOCK_V": (1024, 2048), "NUM_WARPS": (4,)},
        _match_softmax,
        ("BLOCK_T", "BLOCK_V"),
        16384,
    ),
    KernelTemplate(
        "gemm_bias_gelu",
        frozenset({"gemm", "linear", "matmul"}),
        {
            "BLOCK_M": (64, 128),
            "BLOCK_N": (64, 128, 256),
            "BLOCK_K": (32, 64),
            "GROUP_M": (8,),
            "NUM_WARPS": (4, 8),
            "NUM_STAGES": (3, 4),
        },
        {
            "BLOCK_M": (32, 64),
            "BLOCK_N": (128, 256),
            "BLOCK_K": (128,),
            "GROUP_M": (8,),
            "NUM_WARPS": (4,),
            "NUM_STAGES": (3,),
        },
        _match_gemm_bias_gelu,
        ("BLOCK_M", "BLOCK_N"),
        32768,
    ),
    KernelTemplate(
        "rope",
        frozenset({"rope"}),
        {"BLOCK_T": (1, 2, 4), "BLOCK_HEADS": (1, 2, 4, 8), "NUM_WARPS": (1, 2, 4, 8)},
        {"BLOCK_T": (8, 16, 32), "BLOCK_HEADS": (8, 32), "NUM_WARPS": (4,)},
        _match_rope,
        ("BLOCK_T", "BLOCK_HEADS"),
        32,
    ),
)


def match_template(problem: Problem) -> tuple[KernelTemplate, TemplateMatch] | list[str]:
    """The first template that fits the problem, or one reason per template for why none does."""
    reasons: list[str] = []
    op_type = (problem.definition.op_type or "").lower()
    for template in TEMPLATES:
        if op_type not in template.op_types:
            reasons.append(f"{template.family}: op_type {op_type!r} is not one it serves")
            continue
        result = template.matcher(problem)
        if isinstance(result, TemplateMatch):
            return template, result
        reasons.append(f"{template.family}: {result}")
    return reasons


def render_source(match: TemplateMatch, knobs: Knobs, header: str) -> str:
    """The kernel.py text: header docstring, the filled template and a `run` over the roles."""
    text = (TEMPLATE_DIR / f"{match.family}.py.txt").read_text(encoding="utf-8")
    values = {name: str(value) for name, value in knobs.items()} | dict(match.constants)
    body = Template(text).substitute(values)
    params = ", ".join(name for _, name in match.input_roles)
    call = ", ".join(f"{role}={name}" for role, name in match.input_roles)
    results = ", ".join(f"outs[{i}]" for i in match.output_order)
    run = f"\n\ndef run({params}):\n    outs = _launch({call})\n    return {results}\n"
    return f'"""{header}"""\n\n{body}{run}'
