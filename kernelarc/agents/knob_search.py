"""Knob spaces and the local search the offline strategy agents run over them.

Place in the flow: each offline strategy agent (strategy/knob_agent.py) gets a `KnobSpace` for
the problem (Triton template knobs from triton/template_knobs.py, or library/precision settings
from strategy/torch_variants.py), owns a subset of its knobs, and asks `coordinate_moves` for
the settings one owned knob away from its anchor, best-ranked first. Pure: no I/O, randomness
only from the `random.Random` passed in.
"""

import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

KnobValue = str | int | float | bool
Knobs = dict[str, KnobValue]


@dataclass(frozen=True)
class KnobSpace:
    """The settings a family of candidates can take."""

    family: str
    """What the knobs parameterise (`triton/rmsnorm`, `torch/library`); recorded as the
    proposal knob `space`, so an agent recognises attempts it can start from."""
    options: Mapping[str, tuple[KnobValue, ...]]
    """Knob name to its values, in a meaningful order (ascending sizes, off before on)."""
    default: Mapping[str, KnobValue]
    """A valid setting to start from when nothing better is known."""
    owners: Mapping[str, str] = field(default_factory=dict)
    """Knob name to the strategy that owns it (a knob missing here belongs to no one)."""
    allowed: Callable[[Mapping[str, KnobValue]], bool] = lambda _: True
    """Whether a full setting is valid (e.g. a tile within the register budget)."""

    def owned_by(self, strategy: str) -> tuple[str, ...]:
        """Knobs a strategy owns that have more than one value, in option order."""
        return tuple(
            name
            for name in self.options
            if self.owners.get(name) == strategy and len(self.options[name]) > 1
        )

    def is_valid(self, knobs: Mapping[str, KnobValue]) -> bool:
        """Every knob set to one of its values, and the setting allowed."""
        if set(knobs) != set(self.options):
            return False
        return all(knobs[n] in self.options[n] for n in self.options) and self.allowed(knobs)

    def settings_of(self, knobs: Mapping[str, KnobValue]) -> Knobs | None:
        """The space's knobs read from a proposal's recorded knobs (values as recorded, coerced
        to the option of the same text); None when a knob is missing or not an option."""
        out: Knobs = {}
        for name, values in self.options.items():
            if name not in knobs:
                return None
            match = next((v for v in values if str(v) == str(knobs[name])), None)
            if match is None:
                return None
            out[name] = match
        return out if self.allowed(out) else None


def setting_key(knobs: Mapping[str, KnobValue]) -> tuple[tuple[str, str], ...]:
    """A hashable, order-independent key of a setting."""
    return tuple(sorted((name, str(value)) for name, value in knobs.items()))


def coordinate_moves(
    space: KnobSpace,
    anchor: Mapping[str, KnobValue],
    owned: Sequence[str],
    rank: Callable[[str, KnobValue], int],
    rng: random.Random,
) -> list[tuple[str, Knobs]]:
    """Valid settings that change one owned knob of `anchor`, best first.

    Order: by `rank(knob, value)` (lower first: conclusions' preferences), then by distance of
    the value from the anchor's in the option list (nearest first), then by a seeded shuffle of
    the knobs. Returns (changed knob, setting) pairs.
    """
    knobs = list(owned)
    rng.shuffle(knobs)
    moves: list[tuple[int, int, int, str, Knobs]] = []
    for knob_order, name in enumerate(knobs):
        values = space.options[name]
        here = values.index(anchor[name]) if anchor[name] in values else 0
        for position, value in enumerate(values):
            if value == anchor[name]:
                continue
            setting = dict(anchor) | {name: value}
            if space.is_valid(setting):
                moves.append((rank(name, value), abs(position - here), knob_order, name, setting))
    moves.sort(key=lambda m: m[:3])
    return [(name, setting) for *_, name, setting in moves]


def owned_settings(
    space: KnobSpace, anchor: Mapping[str, KnobValue], owned: Sequence[str], rng: random.Random
) -> Iterator[Knobs]:
    """Every valid setting that differs from `anchor` only in owned knobs, in a seeded order."""
    combos = list(itertools.product(*(space.options[name] for name in owned)))
    rng.shuffle(combos)
    for combo in combos:
        setting = dict(anchor) | dict(zip(owned, combo, strict=True))
        if space.is_valid(setting):
            yield setting
