"""The bootstrap decision on synthetic re-timing rounds: clearly faster accepts, clearly slower
rejects, noise around the threshold stays undecided, and the same samples always decide alike."""

import random

import pytest

from kernelarc.guard import decide_rounds, decide_samples
from kernelarc.schema.guard_record import GuardSettings, RetimingSample

SETTINGS = GuardSettings(min_gain=0.01, min_repeats=2, max_repeats=8, resamples=2000)
BASE = [0.10, 0.50, 2.00]  # incumbent latency per workload, ms


def _rounds(ratio: float, noise: float, n: int, seed: int) -> tuple[list[list[float]], ...]:
    """n rounds of (challenger, incumbent) latencies; each side jitters by +-noise."""
    rng = random.Random(seed)
    challenger, incumbent = [], []
    for _ in range(n):
        incumbent.append([b * (1 + rng.uniform(-noise, noise)) for b in BASE])
        challenger.append([b * ratio * (1 + rng.uniform(-noise, noise)) for b in BASE])
    return challenger, incumbent


@pytest.mark.parametrize(
    ("ratio", "noise", "rounds", "outcome"),
    [
        pytest.param(0.70, 0.03, 3, "accept", id="clearly-faster"),
        pytest.param(1.30, 0.03, 3, "reject", id="clearly-slower"),
        pytest.param(1.00, 0.001, 3, "reject", id="equal-and-quiet"),
        pytest.param(0.99, 0.25, 6, "undecided", id="noise-only"),
    ],
)
def test_decision(ratio: float, noise: float, rounds: int, outcome: str) -> None:
    challenger, incumbent = _rounds(ratio, noise, rounds, seed=7)
    decision = decide_rounds(challenger, incumbent, SETTINGS)
    assert decision.outcome == outcome, decision
    assert decision.rounds == rounds
    assert decision.ci_low is not None and decision.ci_high is not None
    assert decision.ci_low <= (decision.ratio or 0) <= decision.ci_high


def test_deterministic_for_the_same_samples_and_seed() -> None:
    challenger, incumbent = _rounds(0.97, 0.05, 5, seed=3)
    first = decide_rounds(challenger, incumbent, SETTINGS)
    second = decide_rounds(challenger, incumbent, SETTINGS)
    assert first == second
    other_seed = decide_rounds(
        challenger, incumbent, SETTINGS.model_copy(update={"bootstrap_seed": 1})
    )
    assert other_seed.ratio == first.ratio  # the point estimate does not depend on the seed


def test_too_few_rounds_is_undecided_without_a_ci() -> None:
    challenger, incumbent = _rounds(0.5, 0.0, 1, seed=0)
    decision = decide_rounds(challenger, incumbent, SETTINGS)
    assert decision.outcome == "undecided"
    assert decision.ci_low is None


def test_min_gain_moves_the_threshold() -> None:
    challenger, incumbent = _rounds(0.97, 0.002, 4, seed=1)
    assert decide_rounds(challenger, incumbent, SETTINGS).outcome == "accept"
    strict = SETTINGS.model_copy(update={"min_gain": 0.05})
    assert decide_rounds(challenger, incumbent, strict).outcome == "reject"


def _sample(round_: int, role: str, status: str, latencies: list[float]) -> RetimingSample:
    return RetimingSample(
        round=round_,
        role="challenger" if role == "c" else "incumbent",
        proposal_id=f"p-{role}",
        status=status,
        latencies_ms=latencies,
    )


def test_samples_pair_by_round_in_any_order() -> None:
    samples = [
        _sample(0, "c", "PASSED", [1.0, 2.0]),
        _sample(0, "i", "PASSED", [2.0, 4.0]),
        _sample(1, "i", "PASSED", [2.0, 4.1]),  # ABBA: the incumbent goes first in odd rounds
        _sample(1, "c", "PASSED", [1.0, 2.0]),
    ]
    decision = decide_samples(samples, SETTINGS)
    assert decision.outcome == "accept"
    assert decision.rounds == 2


@pytest.mark.parametrize(
    ("role", "status", "outcome"),
    [
        pytest.param("c", "INCORRECT_NUMERICAL", "reject", id="challenger-fails"),
        pytest.param("c", "INFRA_ERROR", "undecided", id="challenger-infra"),
        pytest.param("i", "RUNTIME_ERROR", "undecided", id="incumbent-fails"),
    ],
)
def test_failed_samples(role: str, status: str, outcome: str) -> None:
    other = "i" if role == "c" else "c"
    samples = [_sample(0, role, status, []), _sample(0, other, "PASSED", [1.0])]
    decision = decide_samples(samples, SETTINGS)
    assert decision.outcome == outcome
    assert status in decision.reason
