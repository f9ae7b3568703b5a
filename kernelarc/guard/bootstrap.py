"""Noise-aware comparison of a challenger with the incumbent: a seeded bootstrap confidence
interval of the geometric-mean latency ratio over interleaved re-timing rounds.

Place in the flow: `challenge.py` calls `decide_rounds` after each re-timing round to know
whether to stop; `verdict.py` calls it again on the recorded samples, so the decision is a pure,
deterministic function of what attempts.jsonl holds.

Statistic: per round r and workload w, ratio[r][w] = challenger latency / incumbent latency
(both measured back to back). The estimate is exp(mean over workloads of the mean log ratio over
rounds). The bootstrap resamples whole rounds with replacement (a round's workloads stay
together, because machine load moves them together) and takes percentile bounds. Both are
`kernelarc.ratio_interval`'s, shared with the runner's interleaved reference/solution timing.
"""

import math
from collections.abc import Sequence

from kernelarc.ratio_interval import bootstrap_interval, ratio_estimate
from kernelarc.schema.guard_record import BootstrapDecision, GuardSettings, RetimingSample

_FLOOR_MS = 1e-9


def decide_rounds(
    challenger: Sequence[Sequence[float]],
    incumbent: Sequence[Sequence[float]],
    settings: GuardSettings,
) -> BootstrapDecision:
    """Accept, reject or stay undecided from per-round, per-workload latencies (ms).

    accept: the CI's upper bound is below 1 - min_gain; reject: its lower bound is above it;
    undecided otherwise, and always before `settings.min_repeats` rounds.

    Raises:
        ValueError: the two sides have different numbers of rounds or workloads.
    """
    if len(challenger) != len(incumbent):
        msg = f"{len(challenger)} challenger rounds vs {len(incumbent)} incumbent rounds"
        raise ValueError(msg)
    rounds = len(challenger)
    if rounds < settings.min_repeats:
        return BootstrapDecision(
            outcome="undecided", rounds=rounds, reason=f"{rounds} < {settings.min_repeats} rounds"
        )
    log_ratios = []
    for c_row, i_row in zip(challenger, incumbent, strict=True):
        if len(c_row) != len(i_row) or not c_row:
            msg = f"round workloads differ or are empty: {len(c_row)} vs {len(i_row)}"
            raise ValueError(msg)
        log_ratios.append(
            [
                math.log(max(c, _FLOOR_MS) / max(i, _FLOOR_MS))
                for c, i in zip(c_row, i_row, strict=True)
            ]
        )
    point = ratio_estimate(log_ratios, list(range(rounds)))
    low, high = bootstrap_interval(
        log_ratios,
        confidence=settings.confidence,
        resamples=settings.resamples,
        seed=settings.bootstrap_seed,
    )
    threshold = 1.0 - settings.min_gain
    outcome = "accept" if high < threshold else "reject" if low > threshold else "undecided"
    return BootstrapDecision(outcome=outcome, ratio=point, ci_low=low, ci_high=high, rounds=rounds)


def decide_samples(samples: Sequence[RetimingSample], settings: GuardSettings) -> BootstrapDecision:
    """The decision for recorded re-timing samples.

    Only complete rounds count (both sides PASSED with latencies). A failed challenger sample
    rejects (it is not reliably correct); a failed incumbent sample or an infrastructure error
    leaves it undecided (and stops the re-timing).
    """
    by_round: dict[int, dict[str, RetimingSample]] = {}
    for sample in samples:
        by_round.setdefault(sample.round, {})[sample.role] = sample
    challenger: list[list[float]] = []
    incumbent: list[list[float]] = []
    for index in sorted(by_round):
        pair = by_round[index]
        for role in ("challenger", "incumbent"):
            found = pair.get(role)
            if found is not None and found.status != "PASSED":
                failed = role == "challenger" and found.status != "INFRA_ERROR"
                outcome = "reject" if failed else "undecided"
                reason = f"{role} re-timing round {index} ended {found.status}"
                return BootstrapDecision(outcome=outcome, rounds=len(challenger), reason=reason)
        if "challenger" in pair and "incumbent" in pair:
            challenger.append(pair["challenger"].latencies_ms)
            incumbent.append(pair["incumbent"].latencies_ms)
    try:
        return decide_rounds(challenger, incumbent, settings)
    except ValueError as exc:
        return BootstrapDecision(outcome="undecided", rounds=len(challenger), reason=str(exc))
