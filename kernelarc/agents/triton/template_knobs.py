"""Adapter from the Triton template library to the strategy agents' `KnobSpace`.

Place in the flow: the Triton strategy agents (tiling, memory, fusion, pipelining) call
`triton_space` once per problem and `render_triton` per setting. This is the only module of the
strategy agents that reads the templates' knob spaces; when that library changes its interface (knob
spaces as `KnobDim` data, rendering from a knob dict), only this adapter follows. Which
strategy owns a knob is decided here by its name (`KNOB_OWNERS`), then by the library's knob
group (`GROUP_OWNERS`), so knobs a new template adds find an owner without touching the agents.
"""

import math
import re
from collections.abc import Mapping

from kernelarc.agents.knob_search import KnobSpace, KnobValue
from kernelarc.agents.triton.template_library import TemplateMatch, match_template, render_source
from kernelarc.problems.files import Problem

#: (strategy, knob-name pattern), first match wins. Launch shape (warps, stages) is pipelining;
#: contiguous row/column chunk widths (BLOCK_H of the norms, BLOCK_D of the gated activation),
#: vector widths, the L2 swizzle (GROUP_M) and tensor layouts (LAYOUT_CONV) are memory access;
#: a persistent grid (one program looping over many tiles) and attention as one kernel (FLASH)
#: are fusion; 16-bit attention dots (FLASH_DOT16) precision; rows per program (ROWS) and any
#: other BLOCK_*/TILE_*/FLASH_* knob (BLOCK_M/N/K, BLOCK_HEADS, FLASH_M/N) are tiling.
KNOB_OWNERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pipelining", re.compile(r"^(NUM_WARPS|NUM_STAGES|NUM_CTAS|MAXNREG|WARP_SPEC\w*)$")),
    (
        "memory",
        re.compile(r"^(BLOCK_(H|D|V|COLS|INNER)|GROUP_\w+|VEC\w*|EVICT\w*|CACHE\w*|LAYOUT\w*)$"),
    ),
    ("fusion", re.compile(r"FUSE|EPILOGUE|SPLIT|PERSISTENT|^FLASH$")),
    ("precision", re.compile(r"DTYPE|ACC|PRECISION|FAST_MATH|TF32|DOT16")),
    ("tiling", re.compile(r"^((BLOCK|TILE|FLASH)_\w+|ROWS(_\w+)?)$")),
)
#: Owner of a knob no name rule claims, by the library's `KnobDim.group`, so a knob a new
#: template adds is always searched by someone.
GROUP_OWNERS: Mapping[str, str] = {
    "tile": "tiling",
    "launch": "pipelining",
    "schedule": "fusion",
    "precision": "precision",
}
TRITON_STRATEGIES = ("tiling", "memory", "fusion", "pipelining", "precision")
"""Strategies that may own template knobs."""


def knob_owner(name: str, group: str = "") -> str:
    """The strategy that owns a template knob: the first `KNOB_OWNERS` rule its name matches,
    else the owner of its `group` ("" when neither claims it)."""
    by_name = next((strategy for strategy, rule in KNOB_OWNERS if rule.search(name)), "")
    return by_name or GROUP_OWNERS.get(group, "")


def triton_space(problem: Problem, device: str) -> tuple[KnobSpace, TemplateMatch] | str:
    """The knob space of the template that fits `problem` on `device`, or why none fits."""
    found = match_template(problem)
    if isinstance(found, list):
        families = ", ".join(reason.split(":", 1)[0] for reason in found)
        return f"no Triton template fits this problem (templates: {families}); " + "; ".join(found)
    template, match = found
    settings = template.knob_settings(device)
    if template.match_constraint is not None:
        rule = template.match_constraint
        settings = [s for s in settings if rule(match, s, device) is None]
    if not settings:
        return f"template {template.family} has no knob setting for {device}"
    options: dict[str, tuple[KnobValue, ...]] = {
        name: tuple(sorted({s[name] for s in settings})) for name in settings[0]
    }
    valid = {_key(s) for s in settings}
    # The library's first prior (`default_knobs`): on CUDA its first hand-picked (Hopper-tuned)
    # setting, so every strategy searches its own knobs around the likely winner; on CPU the
    # first interpreter values. If the match rules it out (float32 GEMM tiles), the valid
    # setting that changes the fewest of its knobs, then the one nearest the grid's middle.
    first = dict(template.default_knobs(device))
    if _key(first) in valid:
        default = first
    else:
        default = min(
            settings,
            key=lambda s: (
                sum(s[n] != first.get(n) for n in s),
                _distance_from_middle(s, options),
                _key(s),
            ),
        )
    space = KnobSpace(
        family=f"triton/{template.family}",
        options=options,
        default=dict(default),
        owners={dim.name: knob_owner(dim.name, dim.group) for dim in template.dims},
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
