"""Per-arm statistics of an ablation at a fixed budget, and credit for incumbent gains (pure).

Place in the flow: `report.build` turns each campaign into a `RunResult` and groups them into
`ArmStats` per (problem, arm). Definitions, repeated in the report page:

- budget B: only the first B attempts (by index) of each campaign count, so arms spend alike;
- best-so-far after k attempts: the speedup of the incumbent (the last NEW_BEST attempt) among
  the first k, 0 while there is none (no correct kernel yet);
- final best speedup: best-so-far after B; final SOL score: the SOL score of that incumbent;
  its speedup interval is the one the incumbent's attempt recorded (runs.json/runs.csv; the
  runner's interleaved timing, `Attempt.speedup_ci_*`), not the arm's interval over campaigns;
- candidates to target: the smallest k <= B whose best-so-far reaches the target;
- credit: each NEW_BEST within B adds its speedup minus the previous incumbent's (0 for the
  first) to its agent and its strategy, so an arm's credits add up to its final best speedup;
- interval: the percentile bootstrap of the mean (`bootstrap`, the default: 10,000 resamples,
  seed 0), which stays inside the values' range, or mean +- t((1+c)/2, n-1) * s / sqrt(n)
  (`t`) cut to the quantity's range: a speedup or a candidate count is never below 0, a SOL
  score lies in [0, 1] (issue 17: `5.66 [-61.6, 72.9]` was printed); undefined (NaN) below
  two runs.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import Attempt, Verdict

CI_METHODS = ("bootstrap", "t")
"""Interval methods `mean_interval` knows (the first is the default)."""
NON_NEGATIVE = (0.0, math.inf)
"""The range of a speedup, a latency or a count."""
UNIT = (0.0, 1.0)
"""The range of a SOL score."""
BOOTSTRAP_RESAMPLES = 10_000
"""Resamples of the bootstrap interval."""
DEFAULT_TARGET_FRACTION = 0.9
"""Default target: this fraction of the best final speedup any campaign of the problem reached."""


@dataclass(frozen=True)
class Gain:
    """One change of incumbent."""

    index: int
    """The NEW_BEST attempt."""
    agent: str
    """Its agent."""
    strategy: str
    """Its strategy."""
    speedup: float
    """Its speedup."""
    gain: float
    """Its speedup minus the previous incumbent's (0 before the first)."""


@dataclass(frozen=True)
class RunResult:
    """One campaign at the budget."""

    label: str
    """Where it came from (run dir or mlflow:...)."""
    problem: str
    """Definition name."""
    arm: str
    """Arm label."""
    seed: str
    """Campaign seed."""
    best_so_far: tuple[float, ...]
    """Best-so-far speedup after 1..B attempts."""
    final_best: float
    """Best-so-far after B attempts."""
    final_sol: float | None
    """SOL score of the final incumbent (None: none or no bound)."""
    gains: tuple[Gain, ...]
    """Incumbent changes within the budget, in order."""
    mlflow_run_id: str | None = None
    """The parent run, when known."""
    final_ci: tuple[float, float, str] | None = None
    """The final incumbent's speedup interval (low, high, method) as its attempt recorded it;
    None: no incumbent, or one recorded without an interval."""

    def candidates_to(self, target: float) -> int | None:
        """Attempts needed until best-so-far reached `target` (None: not within the budget)."""
        return next((k + 1 for k, v in enumerate(self.best_so_far) if v >= target), None)

    def credit(self, by: str) -> dict[str, float]:
        """Summed gains per agent (`by="agent"`) or per strategy (`by="strategy"`)."""
        out: dict[str, float] = {}
        for gain in self.gains:
            name = gain.agent if by == "agent" else gain.strategy
            out[name] = out.get(name, 0.0) + gain.gain
        return out


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval."""

    mean: float
    """Sample mean (NaN without values)."""
    low: float
    """Lower bound (NaN below two values)."""
    high: float
    """Upper bound (NaN below two values)."""
    n: int
    """Values."""


@dataclass(frozen=True)
class ArmStats:
    """One arm on one problem."""

    problem: str
    """Definition name."""
    arm: str
    """Arm label."""
    runs: tuple[RunResult, ...]
    """Its campaigns (one per seed)."""
    target: float
    """Speedup target of the problem."""
    final_best: Interval
    """Final best speedup."""
    final_sol: Interval
    """Final SOL score (over the runs that have one)."""
    to_target: Interval
    """Candidates to reach the target (over the runs that reached it)."""
    reached: int
    """Runs that reached the target within the budget."""
    credit_agents: dict[str, float]
    """Mean credit per agent over the runs (an agent absent from a run counts 0 there)."""
    credit_strategies: dict[str, float]
    """Mean credit per strategy over the runs."""
    curve: tuple[float, ...]
    """Mean best-so-far after 1..B attempts."""
    curve_low: tuple[float, ...]
    """Lowest best-so-far among the runs after 1..B attempts."""
    curve_high: tuple[float, ...]
    """Highest best-so-far among the runs after 1..B attempts."""


def run_result(campaign: CampaignSource, arm: str, budget: int) -> RunResult:
    """A campaign's best-so-far curve, final values and gains within its first `budget`
    attempts (a campaign with fewer attempts keeps its last value)."""
    within = [a for a in campaign.attempts if a.index < budget]
    by_index = {a.index: a for a in within}
    best, best_index = 0.0, None
    incumbent: Attempt | None = None
    curve: list[float] = []
    gains: list[Gain] = []
    for k in range(budget):
        attempt = by_index.get(k)
        if attempt is not None and attempt.verdict == Verdict.NEW_BEST and attempt.speedup:
            p = attempt.proposal
            gains.append(Gain(k, p.agent, p.strategy, attempt.speedup, attempt.speedup - best))
            best, best_index, incumbent = attempt.speedup, k, attempt
        curve.append(best)
    final_sol = campaign.sol_scores.get(best_index) if best_index is not None else None
    return RunResult(
        label=campaign.label,
        problem=campaign.problem_name,
        arm=arm,
        seed=campaign.seed,
        best_so_far=tuple(curve),
        final_best=best,
        final_sol=final_sol,
        gains=tuple(gains),
        mlflow_run_id=campaign.mlflow_run_id,
        final_ci=_recorded_interval(incumbent),
    )


def _recorded_interval(attempt: Attempt | None) -> tuple[float, float, str] | None:
    if attempt is None or attempt.speedup_ci_low is None or attempt.speedup_ci_high is None:
        return None
    return attempt.speedup_ci_low, attempt.speedup_ci_high, attempt.speedup_ci_method or ""


def default_targets(
    results: Sequence[RunResult], fraction: float = DEFAULT_TARGET_FRACTION
) -> dict[str, float]:
    """Per problem: `fraction` of the best final speedup among its campaigns."""
    best: dict[str, float] = {}
    for r in results:
        best[r.problem] = max(best.get(r.problem, 0.0), r.final_best)
    return {problem: fraction * value for problem, value in best.items()}


def summarize_arms(
    results: Sequence[RunResult],
    targets: Mapping[str, float],
    confidence: float = 0.95,
    method: str = "bootstrap",
) -> list[ArmStats]:
    """ArmStats per (problem, arm), problems sorted, arms in order of first appearance."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.problem, r.arm), []).append(r)
    order = sorted(groups, key=lambda k: (k[0], list(groups).index(k)))
    return [_arm(p, a, groups[(p, a)], targets[p], confidence, method) for p, a in order]


def mean_interval(
    values: Sequence[float],
    confidence: float,
    method: str = "bootstrap",
    bounds: tuple[float, float] = NON_NEGATIVE,
) -> Interval:
    """Mean and confidence interval of `values`, within `bounds` (the quantity's range; see the
    module docstring).

    Raises:
        ValueError: unknown method, or confidence outside (0, 1).
    """
    if method not in CI_METHODS:
        msg = f"unknown interval method {method!r}; use one of {', '.join(CI_METHODS)}"
        raise ValueError(msg)
    if not 0.0 < confidence < 1.0:
        msg = f"confidence must be in (0, 1) (got {confidence})"
        raise ValueError(msg)
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(data.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    if method == "t":
        from scipy import stats  # imported here: a second's import most commands never need

        half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(data.std(ddof=1))
        half /= math.sqrt(n)
        low, high = bounds
        return Interval(mean, max(low, mean - half), min(high, mean + half), n)
    rng = np.random.default_rng(0)
    means = data[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(mean, float(low), float(high), n)


def _arm(
    problem: str,
    arm: str,
    runs: list[RunResult],
    target: float,
    confidence: float,
    method: str,
) -> ArmStats:
    sols = [r.final_sol for r in runs if r.final_sol is not None]
    needed = [k for k in (r.candidates_to(target) for r in runs) if k is not None]
    curves = np.asarray([r.best_so_far for r in runs], dtype=float)
    return ArmStats(
        problem=problem,
        arm=arm,
        runs=tuple(runs),
        target=target,
        final_best=mean_interval([r.final_best for r in runs], confidence, method),
        final_sol=mean_interval(sols, confidence, method, UNIT),
        to_target=mean_interval([float(k) for k in needed], confidence, method),
        reached=len(needed),
        credit_agents=_mean_credit(runs, "agent"),
        credit_strategies=_mean_credit(runs, "strategy"),
        curve=tuple(float(v) for v in curves.mean(axis=0)),
        curve_low=tuple(float(v) for v in curves.min(axis=0)),
        curve_high=tuple(float(v) for v in curves.max(axis=0)),
    )


def _mean_credit(runs: Sequence[RunResult], by: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for r in runs:
        for name, value in r.credit(by).items():
            totals[name] = totals.get(name, 0.0) + value
    return {name: value / len(runs) for name, value in sorted(totals.items())}
