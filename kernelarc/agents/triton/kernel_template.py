"""One Triton template family as data: its knob space, the checks on a setting, rendering.

Place in the flow: `template_library.py` lists the families (`TEMPLATES`) as `KernelTemplate`s;
strategy agents reach these through it. Kept apart from the catalogue so that the rules every
family shares (knob validity, the setting grid, filling `templates/<family>.py.txt`) read
without the families' tables.

API for strategy agents (what a knob-owning agent needs):

- `template_library.match_template(problem_or_definition)` -> `(KernelTemplate,
  TemplateMatch)`, or a list of one reason per template for why none applies.
  `KernelTemplate.applies(definition)` -> None when the template fits, else the reason (str).
  Matching reads only the definition: op_type, tensor ranks/dtypes, shape relations on probe
  sizes, constants from the reference source.
- `KernelTemplate.dims`: the knob space as data, a tuple of `KnobDim(name, values, cpu_values,
  group, doc)`; `knob_space(device)` -> {name: candidate values, most promising first}.
  `group` says what a knob controls: "tile" (block sizes, rows per program, vector width),
  "launch" (num_warps, num_stages), "schedule" (persistent grid, tile ordering), "precision"
  (how float32 products are computed). An agent may
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Literal

from kernelarc.agents.triton.template_matchers import Matcher, TemplateMatch
from kernelarc.schema import Definition

Knobs = dict[str, int]
KnobGroup = Literal["tile", "launch", "schedule", "precision"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


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
    """What it controls: tile (sizes, rows, vector width), launch (warps, stages), schedule,
    precision."""
    doc: str
    """What the knob does, for humans and LLM agents."""
    pow2: bool = True
    """Values must be powers of two (tl.arange sizes, warps); False for counts like stages."""

    def for_device(self, device: str) -> tuple[int, ...]:
        """The candidate values on a device (`cpu` or `cuda`)."""
        return self.cpu_values if device == "cpu" else self.values


Constraint = Callable[[Knobs], str | None]
MatchConstraint = Callable[[TemplateMatch, Knobs, str], str | None]


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
    match_constraint: MatchConstraint | None = None
    """A rule that also needs the match (operand dtypes, a knob the match makes moot), given
    the match, a setting and the device; `template_knobs.triton_space` applies it to the
    device's settings; None = none."""
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
