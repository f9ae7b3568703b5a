"""Adapter from the Triton template library to the strategy agents' `KnobSpace`.

Place in the flow: the Triton strategy agents (tiling, memory, fusion, pipelining) call
`triton_space` once per problem and `render_triton` per setting. This is the only module of the
strategy agents that reads `triton_templates`; when that library changes its interface (a
`knob_space()` per template, rendering from a knob dict), only this adapter follows. Which
strategy owns a knob is decided here by its name (`KNOB_OWNERS`), so knobs a new template adds
find an owner without touching the agents.
"""

import math
import re
from collections.abc import Mapping

from kernelarc.agents.knob_search import KnobSpace, KnobValue
from kernelarc.agents.triton_templates import TemplateMatch, match_template, render_source
from kernelarc.problems.files import Problem

#: (strategy, knob-name pattern), first match wins; a BLOCK_*/TILE_* knob nobody else claims is
#: tiling. Inner (contiguous) block widths and the L2 swizzle are memory access/vectorisation.
KNOB_OWNERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pipelining", re.compile(r"^(NUM_WARPS|NUM_STAGES|NUM_CTAS|MAXNREG|WARP_SPEC\w*)$")),
    ("memory", re.compile(r"^(BLOCK_(H|D|V|COLS|INNER)|GROUP_\w+|VEC\w*|EVICT\w*|CACHE\w*)$")),
    ("fusion", re.compile(r"FUSE|EPILOGUE|SPLIT|PERSISTENT")),
    ("precision", re.compile(r"DTYPE|ACC|PRECISION|FAST_MATH|TF32")),
    ("tiling", re.compile(r"^(BLOCK|TILE)_\w+$")),
)
TRITON_STRATEGIES = ("tiling", "memory", "fusion", "pipelining", "precision")
"""Strategies that may own template knobs."""


def knob_owner(name: str) -> str:
    """The strategy that owns a template knob ("" when no rule claims it)."""
    return next((strategy for strategy, rule in KNOB_OWNERS if rule.search(name)), "")


def triton_space(problem: Problem, device: str) -> tuple[KnobSpace, TemplateMatch] | str:
    """The knob space of the template that fits `problem` on `device`, or why none fits."""
    found = match_template(problem)
    if isinstance(found, list):
        return "no Triton template fits: " + "; ".join(found)
    template, match = found
    settings = template.knob_settings(device)
    if not settings:
        return f"template {template.family} has no knob setting for {device}"
    options: dict[str, tuple[KnobValue, ...]] = {
        name: tuple(sorted({s[name] for s in settings})) for name in settings[0]
    }
    valid = {_key(s) for s in settings}
    # The library's first setting: on CUDA its first hand-picked (Hopper-tuned) prior, so every
    # strategy searches its own knobs around the likely winner; the middle of the grid otherwise.
    first = dict(template.default_knobs(device))
    if _key(first) in valid:
        default = first
    else:
        default = min(settings, key=lambda s: (_distance_from_middle(s, options), _key(s)))
    space = KnobSpace(
        family=f"triton/{template.family}",
        options=options,
        default=dict(default),
        owners={name: knob_owner(name) for name in options},
        allowed=lambda knobs: _key(knobs) in valid,
    )
    return space, match


def render_triton(match: TemplateMatch, knobs: Mapping[str, KnobValue], header: str) -> str:
    """The kernel.py source of one setting."""
    return render_source(match, {name: int(value) for name, value in knobs.items()}, header)


def _key(knobs: Mapping[str, KnobValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((n, str(v)) for n, v in knobs.items()))


def _distance_from_middle(
    setting: Mapping[str, int], options: Mapping[str, tuple[KnobValue, ...]]
) -> float:
    """How far a setting is from the middle value of every knob (in option positions)."""
    return math.fsum(
        abs(options[n].index(v) - (len(options[n]) - 1) / 2) for n, v in setting.items()
    )
