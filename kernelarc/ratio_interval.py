"""The one bootstrap of a geometric-mean ratio KernelArc uses: the guard's challenger/incumbent
re-timing (`guard/bootstrap.py`) and the runner's interleaved reference/solution blocks
(`runner/interleaved.py`) both call it, so every interval KernelArc prints comes from one code.

Input: log ratios indexed [unit][workload], where a unit (a re-timing round, a pair of timing
blocks) is what was measured back to back. The estimate is exp(mean over workloads of the mean
log ratio over units); the interval resamples whole units with replacement (seeded) and takes
percentile bounds. Pure Python, no torch: the runner imports it inside the sandbox.
"""

import math
import random
from collections.abc import Sequence


def ratio_estimate(log_ratios: Sequence[Sequence[float]], rounds: Sequence[int]) -> float:
    """Geometric-mean ratio over workloads, using the given unit indices (with repeats)."""
    workloads = len(log_ratios[0])
    total = 0.0
    for w in range(workloads):
        total += sum(log_ratios[r][w] for r in rounds) / len(rounds)
    return math.exp(total / workloads)


def bootstrap_interval(
    log_ratios: Sequence[Sequence[float]], *, confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the ratio over `resamples` unit resamplings (seeded)."""
    n = len(log_ratios)
    rng = random.Random(seed)
    stats = sorted(
        ratio_estimate(log_ratios, [int(rng.random() * n) for _ in range(n)])
        for _ in range(resamples)
    )
    alpha = (1.0 - confidence) / 2.0
    low = stats[max(0, math.floor(alpha * resamples))]
    high = stats[min(resamples - 1, math.ceil((1.0 - alpha) * resamples) - 1)]
    return low, high
