"""Interleaved timing: the reference and the solution timed in alternating blocks of one session,
so drift of the host or the GPU (clocks, load, launch gaps) moves both sides alike and the
speedup becomes repeatable, with a confidence interval.

Place in the flow: `evaluate.py` runs this after the official timing (whose numbers it leaves
alone) when `TimingConfig.interleave` and `time_reference` are on. Pair p times one block of
each side, the reference first in even pairs and the solution first in odd ones, so the order
over pairs is R S S R R S S R ... (ABBA: a linear drift adds the same to both sides over every
two pairs). Each block is `block_warmup` untimed calls then `calls` timed ones, with the same
clock, the same L2 flush and the same shifting input pool on both sides (the reference in the
judge, the solution in its worker; the judge asks the worker for each block and waits).

Statistic: per pair, r_p = median(reference block) / median(solution block); the estimate is
the geometric mean of r_p over pairs and the interval the seeded percentile bootstrap over pairs
(`kernelarc.ratio_interval`, the guard's code). After `min_block_pairs` the stage stops when the
interval's half-width is at most `ci_half_width` of the estimate, at `max_block_pairs`, or once
the blocks' samples add up to `budget_s` (CPU, when set) or `interleave_budget_s` (so a slow
kernel does not pay `max_block_pairs` blocks).
"""

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kernelarc.ratio_interval import bootstrap_interval, ratio_estimate
from kernelarc.schema import TimingConfig

Side = Literal["reference", "solution"]
BlockTimer = Callable[[Side, int], list[float]]
"""Times one block of a side (the pair index given); its timed samples in ms."""

RESAMPLES = 1000
BOOTSTRAP_SEED = 0
_FLOOR_MS = 1e-9


def block_order(pair: int) -> tuple[Side, Side]:
    """The two blocks of pair `pair`: reference first in even pairs, solution first in odd."""
    return ("reference", "solution") if pair % 2 == 0 else ("solution", "reference")


def block_schedule(pairs: int) -> list[Side]:
    """Every block of `pairs` pairs in the order they run (ABBA)."""
    return [side for pair in range(pairs) for side in block_order(pair)]


def block_calls(config: TimingConfig) -> int:
    """Timed calls per block: `block_calls`, never more than the request's `iterations`."""
    return min(config.block_calls, config.iterations)


def interleaved_calls(config: TimingConfig) -> int:
    """The most calls of one side the stage can make (warm-up included): the pool's size."""
    if not (config.interleave and config.time_reference):
        return 0
    return config.max_block_pairs * (config.block_warmup + block_calls(config))


@dataclass(frozen=True)
class SpeedupInterval:
    """The interleaved estimate of a speedup and its confidence interval."""

    estimate: float
    """Geometric mean over pairs of reference / solution block median."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    pairs: int
    """Block pairs used."""
    reference_ms: float
    """Median of every timed reference sample of the blocks."""
    solution_ms: float
    """Median of every timed solution sample of the blocks."""
    method: str
    """How the interval was made (`Performance.speedup_ci_method`)."""

    @property
    def relative_half_width(self) -> float:
        """(high - low) / 2 / estimate."""
        return (self.high - self.low) / 2.0 / self.estimate if self.estimate > 0 else math.inf


def speedup_interval(
    reference_blocks: list[list[float]],
    solution_blocks: list[list[float]],
    *,
    confidence: float,
    clock: str,
) -> SpeedupInterval:
    """The interval from per-pair samples (reference_blocks[p], solution_blocks[p]).

    Raises:
        ValueError: no pairs, an empty block, or the two sides with different pair counts.
    """
    if not reference_blocks or len(reference_blocks) != len(solution_blocks):
        msg = f"{len(reference_blocks)} reference blocks vs {len(solution_blocks)} solution blocks"
        raise ValueError(msg)
    if any(not block for block in reference_blocks + solution_blocks):
        msg = "an interleaved timing block has no samples"
        raise ValueError(msg)
    log_ratios = [
        [math.log(max(statistics.median(ref), _FLOOR_MS) / max(statistics.median(sol), _FLOOR_MS))]
        for ref, sol in zip(reference_blocks, solution_blocks, strict=True)
    ]
    pairs = len(log_ratios)
    low, high = bootstrap_interval(
        log_ratios, confidence=confidence, resamples=RESAMPLES, seed=BOOTSTRAP_SEED
    )
    calls = max(len(block) for block in reference_blocks + solution_blocks)
    method = (
        f"interleaved ABBA blocks ({clock}), bootstrap {confidence:.0%} CI of the geometric-mean "
        f"ratio of block medians, {pairs} pairs x {calls} calls"
    )
    return SpeedupInterval(
        estimate=ratio_estimate(log_ratios, list(range(pairs))),
        low=low,
        high=high,
        pairs=pairs,
        reference_ms=float(statistics.median([s for b in reference_blocks for s in b])),
        solution_ms=float(statistics.median([s for b in solution_blocks for s in b])),
        method=method,
    )


def run_blocks(time_block: BlockTimer, config: TimingConfig, clock: str) -> SpeedupInterval:
    """Time blocks in ABBA order until the interval is narrow enough or a cap is reached.

    Exceptions of `time_block` propagate (the caller decides what a failed block means).
    """
    reference: list[list[float]] = []
    solution: list[list[float]] = []
    spent_s = 0.0
    interval: SpeedupInterval | None = None
    for pair in range(config.max_block_pairs):
        got: dict[Side, list[float]] = {}
        for side in block_order(pair):
            got[side] = time_block(side, pair)
            spent_s += sum(got[side]) / 1000.0
        reference.append(got["reference"])
        solution.append(got["solution"])
        if pair + 1 < config.min_block_pairs:
            continue
        interval = speedup_interval(
            reference, solution, confidence=config.ci_confidence, clock=clock
        )
        if interval.relative_half_width <= config.ci_half_width:
            break
        if spent_s >= stage_budget_s(config):
            break
    assert interval is not None  # min_block_pairs >= 2 and max_block_pairs >= min_block_pairs
    return interval


def stage_budget_s(config: TimingConfig) -> float:
    """Seconds of samples (both sides) after which no pair beyond the minimum starts:
    `budget_s` on the CPU when set, else `interleave_budget_s`."""
    return config.budget_s if config.budget_s is not None else config.interleave_budget_s


def block_budget_s(config: TimingConfig) -> float | None:
    """CPU only: seconds of samples one block may take (the stage's `budget_s` spread over the
    minimum number of blocks); None without a budget."""
    if config.budget_s is None:
        return None
    return config.budget_s / (2 * config.min_block_pairs)
