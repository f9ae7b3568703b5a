"""The Triton template library: kernel families, their knob spaces, and rendering.

Place in the flow: a strategy agent (e.g. `TritonTemplateAgent`) asks `match_template(problem)`
for the template that fits a problem, picks a knob setting, and calls `render_source` (or
`KernelTemplate.render`) to get the `kernel.py` text of a candidate. Candidates run in the
sandbox; nothing here imports torch or triton.

Families (template texts live beside this module as `templates/<family>.py.txt`):

| family | serves (op_type) | kernel |
| --- | --- | --- |
| gated_activation | activation, silu_and_mul, swiglu, geglu | act(x[..., :D]) * x[..., D:] |
| rmsnorm | rmsnorm, norm, add_rmsnorm, fused_add_rmsnorm | RMSNorm, optionally of x + residual |
| add_layernorm | layernorm, add_layernorm, norm | x + residual, then LayerNorm with bias |
| softmax | softmax | softmax over the last axis |
| gemm_epilogue | gemm, linear, matmul | act(a @ b + bias), b as [N, K] or [K, N] |
| rope | rope, rotary | rotate-half rotary embedding of q and k |
| rmsnorm_backward | rmsnorm_backward, rmsnorm_bwd | grad_x and grad_weight of RMSNorm |

API for strategy agents (what a knob-owning agent needs):

- `match_template(problem_or_definition)` -> `(KernelTemplate, TemplateMatch)`, or a list of
  one reason per template for why none applies. `KernelTemplate.applies(definition)` -> None
  when the template fits, else the reason (str). Matching reads only the definition: op_type,
  tensor ranks/dtypes, shape relations on probe sizes, constants from the reference source.
- `KernelTemplate.dims`: the knob space as data, a tuple of `KnobDim(name, values, cpu_values,
  group, doc)`; `knob_space(device)` -> {name: candidate values, most promising first}.
  `group` says what a knob controls: "tile" (block sizes, rows per program, vector width),
  "launch" (num_warps, num_stages), "schedule" (persistent grid, tile ordering). An agent may
  own a subset of names (e.g. all "launch" knobs) and keep the others at an incumbent's values.
- `default_knobs(device)` (the first prior: the likely winner on Hopper), `priors(device)`
  (hand-picked settings to try first, in order), `complete(partial, device)` (fills missing
  names from the default), `check_knobs(knobs, device)` -> None or why the setting is invalid
  (unknown/missing name, not a power of two, too much shared memory or registers),
  `knob_settings(device)` (every valid setting of the grid: priors first, then by distance to
  the default).
- `render(match, knobs, header)` / `render_source(match, knobs, header)` -> kernel.py text;
  raises ValueError for a setting `check_knobs` refuses.

Knob values are ints. On CPU (Triton's interpreter) `cpu_values` are used: large tiles only,
because the interpreter costs per operation and per program, not per element; warps and stages
are ignored there. Every template adapts a setting to each workload's shape at launch (block
widths are capped at the next power of two of the row, rows per program are halved until the
tile fits in registers, warps are halved until each thread holds at least VEC elements), so one
setting is valid for every workload of a problem.
"""

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Literal

from kernelarc.agents.triton.template_matchers import (
    Matcher,
    TemplateMatch,
    find_activation,
    find_eps,
    find_gelu_tanh,
    match_add_layernorm,
    match_gated_activation,
    match_gemm_epilogue,
    match_rmsnorm,
    match_rmsnorm_backward,
    match_rope,
    match_softmax,
    probe_shapes,
    torch_dtype,
)
from kernelarc.problems.files import Problem
from kernelarc.schema import Definition

Knobs = dict[str, int]
KnobGroup = Literal["tile", "launch", "schedule"]
Device = Literal["cpu", "cuda"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

#: Shared memory a GEMM setting may plan for (H100/H200 allow 227 KB per block).
GEMM_SMEM_LIMIT_BYTES = 220 * 1024
#: Float32 values one thread may hold for an accumulator or row tile before registers spill.
MAX_TILE_PER_THREAD = 128
_POW2_GROUPS = ("tile", "launch")

__all__ = [
    "TEMPLATES",
    "KernelTemplate",
    "KnobDim",
    "Knobs",
    "TemplateMatch",
    "find_activation",
    "find_eps",
    "find_gelu_tanh",
    "match_template",
    "probe_shapes",
    "render_source",
    "template_named",
    "torch_dtype",
]


@dataclass(frozen=True)
class KnobDim:
    """One knob of a template: a `${NAME}` placeholder of its text and the values to try."""

    name: str
    """Placeholder name (upper case), e.g. `NUM_WARPS`."""
    values: tuple[int, ...]
    """Candidate values on CUDA, most promising first (the first is the default)."""
    cpu_values: tuple[int, ...]
    """Candidate values under Triton's interpreter (the first is the default)."""
    group: KnobGroup
    """What it controls: tile (sizes, rows, vector width), launch (warps, stages), schedule."""
    doc: str
    """What the knob does, for humans and LLM agents."""
    pow2: bool = True
    """Values must be powers of two (tl.arange sizes, warps); False for counts like stages."""

    def for_device(self, device: str) -> tuple[int, ...]:
        """The candidate values on a device (`cpu` or `cuda`)."""
        return self.cpu_values if device == "cpu" else self.values


Constraint = Callable[[Knobs], str | None]


@dataclass(frozen=True)
class KernelTemplate:
    """One template family: the op types it serves, its knob space, priors and matcher."""

    family: str
    """Family name; `templates/<family>.py.txt` holds the text."""
    op_types: frozenset[str]
    """Definition op_types it may serve (a definition without op_type is matched on structure)."""
    dims: tuple[KnobDim, ...]
    """The knob space, one dimension per placeholder knob."""
    matcher: Matcher
    """Definition -> TemplateMatch, or the reason the template does not apply."""
    cuda_priors: tuple[Mapping[str, int], ...] = ()
    """Partial settings to try first on CUDA, in order (missing names take the default)."""
    constraint: Constraint | None = None
    """Extra validity rule on CUDA settings (shared memory, registers); None = none."""
    summary: str = ""
    """One line: what the kernel computes and how."""

    @property
    def knob_names(self) -> tuple[str, ...]:
        """The knob names, in `dims` order."""
        return tuple(d.name for d in self.dims)

    # --- matching ---------------------------------------------------------------------------

    def bind(self, definition: Definition) -> TemplateMatch | str:
        """The template bound to a definition, or why it does not apply."""
        op_type = (definition.op_type or "").lower()
        if op_type and op_type not in self.op_types:
            return f"op_type {op_type!r} is not one it serves ({', '.join(sorted(self.op_types))})"
        return self.matcher(definition)

    def applies(self, definition: Definition) -> str | None:
        """None when the template fits the definition, else the reason it does not."""
        result = self.bind(definition)
        return result if isinstance(result, str) else None

    # --- the knob space ---------------------------------------------------------------------

    def knob_space(self, device: str) -> dict[str, tuple[int, ...]]:
        """Knob name -> candidate values on the device, most promising first."""
        return {d.name: d.for_device(device) for d in self.dims}

    def default_knobs(self, device: str) -> Knobs:
        """The setting tried first: the first prior on CUDA, the first values on CPU."""
        base = {d.name: d.for_device(device)[0] for d in self.dims}
        if device != "cpu" and self.cuda_priors:
            base.update(self.cuda_priors[0])
        return base

    def complete(self, partial: Mapping[str, int], device: str) -> Knobs:
        """A full setting: `partial` over the default (unknown names are kept, and refused by
        `check_knobs`)."""
        return self.default_knobs(device) | dict(partial)

    def check_knobs(self, knobs: Mapping[str, int], device: str = "cuda") -> str | None:
        """None when the setting can be rendered and launched, else why not."""
        names = self.knob_names
        missing = [n for n in names if n not in knobs]
        unknown = [n for n in knobs if n not in names]
        if missing or unknown:
            return f"{self.family}: missing knobs {missing}, unknown knobs {unknown}"
        for dim in self.dims:
            value = knobs[dim.name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return f"{self.family}: {dim.name}={value!r} is not a non-negative int"
            if dim.pow2 and (value < 1 or value & (value - 1)):
                return f"{self.family}: {dim.name}={value} is not a power of two"
        if device != "cpu" and self.constraint is not None:
            return self.constraint(dict(knobs))
        return None

    def priors(self, device: str) -> list[Knobs]:
        """The hand-picked settings to try first (CUDA), completed and valid, without repeats."""
        if device == "cpu":
            return [self.default_knobs(device)]
        out: list[Knobs] = []
        for partial in self.cuda_priors or ({},):
            knobs = {d.name: d.values[0] for d in self.dims} | dict(partial)
            if knobs not in out and self.check_knobs(knobs, device) is None:
                out.append(knobs)
        return out

    def knob_settings(self, device: str) -> list[Knobs]:
        """Every valid setting of the device's grid: priors first, then the rest by the number
        of knobs that differ from the default (grid order among equals)."""
        space = self.knob_space(device)
        names = list(space)
        grid = [
            dict(zip(names, values, strict=True))
            for values in itertools.product(*(space[n] for n in names))
        ]
        valid = [k for k in grid if self.check_knobs(k, device) is None]
        first = self.priors(device)
        default = first[0]
        rest = [k for k in valid if k not in first]
        rest.sort(key=lambda k: sum(k[n] != default[n] for n in names))
        return first + rest

    # --- rendering --------------------------------------------------------------------------

    def render(self, match: TemplateMatch, knobs: Mapping[str, int], header: str) -> str:
        """The kernel.py text: header docstring, the filled template and a `run` over the roles.

        Raises:
            ValueError: the match is for another family, or `check_knobs` refuses the setting.
        """
        if match.family != self.family:
            msg = f"a {match.family} match cannot render the {self.family} template"
            raise ValueError(msg)
        why = self.check_knobs(knobs, "cpu")
        if why:
            raise ValueError(why)
        return render_source(match, dict(knobs), header)


@functools.cache
def template_text(family: str) -> str:
    """The text of `templates/<family>.py.txt` (read once per process)."""
    return (TEMPLATE_DIR / f"{family}.py.txt").read_text(encoding="utf-8")


def render_source(match: TemplateMatch, knobs: Knobs, header: str) -> str:
    """The kernel.py text: header docstring, the filled template and a `run` over the roles."""
    text = template_text(match.family)
    values = {name: str(value) for name, value in knobs.items()} | dict(match.constants)
    body = Template(text).substitute(values)
    params = ", ".join(name for _, name in match.input_roles)
    call = ", ".join(f"{role}={name}" for role, name in match.input_roles)
    results = ", ".join(f"outs[{i}]" for i in match.output_order)
    run = f"\n\ndef run({params}):\n    outs = _launch({call})\n    return {results}\n"
    return f'"""{header}"""\n\n{body}{run}'


# --- knob dimensions shared by families ----------------------------------------------------


def _row_dims(
    block_h: Sequence[int], warps: Sequence[int], vec: Sequence[int], persistent: Sequence[int]
) -> tuple[KnobDim, ...]:
    """The knobs of a row-wise kernel (norms, softmax)."""
    return (
        KnobDim(
            "BLOCK_H",
            tuple(block_h),
            (1024,),
            "tile",
            "widest row chunk kept in registers; a row that fits is read once (one pass), a "
            "longer one is streamed in chunks of this width (two or three passes)",
        ),
        KnobDim(
            "ROWS",
            (1, 2, 4, 8),
            (16, 64),
            "tile",
            "rows per program step (halved at launch until the tile fits in registers)",
        ),
        KnobDim(
            "NUM_WARPS",
            tuple(warps),
            (4,),
            "launch",
            "warps per program (halved at launch until each thread holds VEC elements)",
        ),
        KnobDim(
            "VEC",
            tuple(vec),
            (8,),
            "tile",
            "vector width: fewest contiguous elements per thread (8 bf16 = one 16-byte access)",
        ),
        KnobDim(
            "PERSISTENT",
            tuple(persistent),
            (0,) if 0 in persistent else (1,),
            "schedule",
            "0: one program per row block; n > 0: a persistent grid of n programs per SM "
            "looping over row blocks",
            pow2=False,
        ),
        KnobDim(
            "NUM_STAGES",
            (1, 2),
            (1,),
            "launch",
            "software-pipelining depth of the kernel's loops (num_stages)",
            pow2=False,
        ),
    )


def _gemm_constraint(knobs: Knobs) -> str | None:
    bm, bn, bk = knobs["BLOCK_M"], knobs["BLOCK_N"], knobs["BLOCK_K"]
    smem = (bm + bn) * bk * 2 * knobs["NUM_STAGES"]
    if smem > GEMM_SMEM_LIMIT_BYTES:
        return f"{knobs['NUM_STAGES']} stages of {bm}x{bk} and {bk}x{bn} tiles need {smem} B"
    per_thread = bm * bn // (32 * knobs["NUM_WARPS"])
    if per_thread > MAX_TILE_PER_THREAD:
        return f"a {bm}x{bn} accumulator over {knobs['NUM_WARPS']} warps is {per_thread}/thread"
    return None


#: Likely Hopper winners for a bf16 norm over 4096-8192 columns: the row in registers, one row
#: per program with 8-16 warps (16-32 values per thread), then more rows or a persistent grid.
_NORM_PRIORS: tuple[Mapping[str, int], ...] = (
    {},
    {"NUM_WARPS": 16},
    {"ROWS": 2, "NUM_WARPS": 16},
    {"NUM_WARPS": 4},
    {"PERSISTENT": 2},
    {"ROWS": 4, "NUM_WARPS": 16},
    {"VEC": 16},
    {"PERSISTENT": 4, "NUM_WARPS": 16},
)

TEMPLATES: tuple[KernelTemplate, ...] = (
    KernelTemplate(
        "gated_activation",
        frozenset({"activation", "silu_and_mul", "swiglu", "geglu", "gelu_and_mul"}),
        (
            KnobDim("BLOCK_D", (2048, 1024, 4096, 512), (1024,), "tile", "columns per tile"),
            KnobDim("ROWS", (2, 1, 4, 8), (32, 64), "tile", "rows per tile"),
            KnobDim(
                "NUM_WARPS",
                (8, 4, 16),
                (4,),
                "launch",
                "warps per program (halved at launch until each thread holds VEC elements)",
            ),
            KnobDim(
                "VEC",
                (8, 16, 4),
                (8,),
                "tile",
                "vector width: fewest contiguous elements per thread (warps are halved to keep it)",
            ),
            KnobDim(
                "PERSISTENT",
                (0, 2, 4),
                (0, 1),
                "schedule",
                "0: one program per tile; n > 0: n programs per SM looping over tiles",
                pow2=False,
            ),
        ),
        match_gated_activation,
        cuda_priors=(
            {},
            {"ROWS": 1, "NUM_WARPS": 4},
            {"ROWS": 4, "NUM_WARPS": 16},
            {"PERSISTENT": 4},
            {"ROWS": 1},
            {"BLOCK_D": 1024, "ROWS": 4},
            {"VEC": 16, "ROWS": 4},
        ),
        summary="out = act(gate) * up on [ROWS, BLOCK_D] tiles, one read of x, one write",
    ),
    KernelTemplate(
        "rmsnorm",
        frozenset({"rmsnorm", "rms_norm", "norm", "add_rmsnorm", "fused_add_rmsnorm"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (0, 2, 1, 4)),
        match_rmsnorm,
        cuda_priors=_NORM_PRIORS,
        summary="RMSNorm (optionally of x + residual) with the row in registers, one pass",
    ),
    KernelTemplate(
        "add_layernorm",
        frozenset({"layernorm", "layer_norm", "add_layernorm", "norm"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (0, 2, 1, 4)),
        match_add_layernorm,
        cuda_priors=_NORM_PRIORS,
        summary="residual add + LayerNorm, both outputs written in one pass over x and residual",
    ),
    KernelTemplate(
        "softmax",
        frozenset({"softmax"}),
        _row_dims((8192, 16384, 4096, 32768), (16, 8, 32, 4), (4, 8), (0, 2, 1, 4)),
        match_softmax,
        cuda_priors=(
            {},
            {"BLOCK_H": 16384},
            {"NUM_WARPS": 8},
            {"BLOCK_H": 4096, "NUM_WARPS": 8},
            {"BLOCK_H": 32768, "NUM_WARPS": 32},
            {"PERSISTENT": 2},
            {"ROWS": 2},
        ),
        summary="softmax: one pass for rows that fit, else online max/sum then a normalise pass",
    ),
    KernelTemplate(
        "gemm_epilogue",
        frozenset({"gemm", "linear", "matmul"}),
        (
            KnobDim("BLOCK_M", (128, 64, 256), (32, 64), "tile", "output tile rows"),
            KnobDim("BLOCK_N", (256, 128, 64), (128, 64), "tile", "output tile columns"),
            KnobDim("BLOCK_K", (64, 32, 128), (128, 64), "tile", "reduction step"),
            KnobDim(
                "GROUP_M",
                (8, 16, 4),
                (8,),
                "schedule",
                "tile rows per group in the L2-friendly grouped launch order",
            ),
            KnobDim("NUM_WARPS", (8, 4), (4,), "launch", "warps per program"),
            KnobDim(
                "NUM_STAGES",
                (3, 4, 5, 2),
                (2,),
                "launch",
                "software-pipelining depth of the K loop (shared-memory buffers)",
                pow2=False,
            ),
            KnobDim(
                "PERSISTENT",
                (0, 1),
                (0, 1),
                "schedule",
                "0: one program per tile; 1: one program per SM looping over tiles",
                pow2=False,
            ),
        ),
        match_gemm_epilogue,
        cuda_priors=(
            {},
            {"BLOCK_N": 128, "NUM_STAGES": 4},
            {"NUM_STAGES": 4},
            {"BLOCK_N": 128, "NUM_WARPS": 4, "NUM_STAGES": 4},
            {"BLOCK_M": 256, "BLOCK_N": 128},
            {"PERSISTENT": 1},
            {"BLOCK_N": 128, "NUM_STAGES": 4, "PERSISTENT": 1},
            {"BLOCK_K": 128, "BLOCK_N": 128, "NUM_STAGES": 3},
        ),
        constraint=_gemm_constraint,
        summary="tiled tl.dot GEMM, float32 accumulation, bias + activation fused in the epilogue",
    ),
    KernelTemplate(
        "rope",
        frozenset({"rope", "rotary", "rotary_embedding"}),
        (
            KnobDim("ROWS", (1, 2, 4, 8), (32, 8), "tile", "tokens per program step"),
            KnobDim(
                "BLOCK_HEADS",
                (32, 16, 8),
                (32,),
                "tile",
                "heads rotated at once (capped at the head count)",
            ),
            KnobDim(
                "NUM_WARPS",
                (4, 8, 2, 16),
                (4,),
                "launch",
                "warps per program (halved at launch until each thread holds VEC elements)",
            ),
            KnobDim("VEC", (4, 8, 2), (4,), "tile", "fewest elements per thread"),
            KnobDim(
                "PERSISTENT",
                (0, 2, 4),
                (0,),
                "schedule",
                "0: one program per token block; n > 0: n programs per SM looping over blocks",
                pow2=False,
            ),
        ),
        match_rope,
        cuda_priors=(
            {},
            {"ROWS": 2, "NUM_WARPS": 8},
            {"NUM_WARPS": 8},
            {"ROWS": 4, "NUM_WARPS": 8},
            {"ROWS": 2, "NUM_WARPS": 8, "PERSISTENT": 4},
            {"BLOCK_HEADS": 16},
            {"ROWS": 2, "NUM_WARPS": 4},
        ),
        summary="rotate-half RoPE of q and k, cos/sin loaded once per token",
    ),
    KernelTemplate(
        "rmsnorm_backward",
        frozenset({"rmsnorm_backward", "rmsnorm_bwd", "rms_norm_backward"}),
        _row_dims((16384, 8192, 4096), (8, 16, 4), (8, 4, 16), (2, 1, 4)),
        match_rmsnorm_backward,
        cuda_priors=(
            {},
            {"NUM_WARPS": 16},
            {"PERSISTENT": 4},
            {"PERSISTENT": 1, "NUM_WARPS": 16},
            {"ROWS": 2, "NUM_WARPS": 16},
            {"NUM_STAGES": 2},
        ),
        summary="RMSNorm backward: grad_x in one pass per row on a persistent grid, grad_weight "
        "from per-program shares summed by a second small kernel",
    ),
)


def template_named(family: str) -> KernelTemplate:
    """The template of a family.

    Raises:
        KeyError: no such family (the message lists them).
    """
    for template in TEMPLATES:
        if template.family == family:
            return template
    msg = f"no Triton template {family!r}; families: {[t.family for t in TEMPLATES]}"
    raise KeyError(msg)


def match_template(
    problem: Problem | Definition,
) -> tuple[KernelTemplate, TemplateMatch] | list[str]:
    """The first template that fits the problem, or one reason per template for why none does."""
    definition = problem.definition if isinstance(problem, Problem) else problem
    reasons: list[str] = []
    for template in TEMPLATES:
        result = template.bind(definition)
        if isinstance(result, TemplateMatch):
            return template, result
        reasons.append(f"{template.family}: {result}")
    return reasons
