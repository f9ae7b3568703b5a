"""The judge-side reward-hack rules and the worker's guard snapshot, in process."""

import math
import time

import pytest
import torch

from kernelarc.runner import hack_checks
from kernelarc.runner.hack_checks import (
    Guards,
    implausible_latency,
    same_bits,
    thread_injection,
)


@pytest.mark.parametrize(
    ("claimed_ms", "observed_s", "transfer_s", "forged"),
    [
        pytest.param(60.0, 0.065, 0.001, False, id="honest-slow"),
        pytest.param(0.01, 0.004, 0.001, False, id="honest-tiny-ipc-dominated"),
        pytest.param(0.001, 0.045, 0.0, False, id="tiny-kernel-below-slack"),
        pytest.param(0.5, 0.8, 0.2, False, id="big-transfer-allowed"),
        pytest.param(0.0, 0.3, 0.001, True, id="stopped-clock-300ms-kernel"),
        pytest.param(10.0, 0.3, 0.001, True, id="claims-30x-faster"),
    ],
)
def test_latency_plausibility_rule(
    claimed_ms: float, observed_s: float, transfer_s: float, forged: bool
) -> None:
    why = implausible_latency(claimed_ms, observed_s, transfer_s)
    assert (why is not None) == forged
    if why is not None:
        assert why.startswith("timing forged")


def test_thread_injection_compares_with_the_first_call() -> None:
    assert thread_injection(5, 3, 5, 3) is None
    assert thread_injection(5, 2, 5, 3) is None  # a thread ending is fine
    assert thread_injection(6, 3, 5, 3) is not None  # started and already gone
    assert thread_injection(5, 4, 5, 3) is not None


def test_guards_name_replaced_functions() -> None:
    guards = Guards([hack_checks], cpp_banned=False)
    assert guards.tampered() == []
    original = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0
        hack_checks.same_bits = lambda a, b: True  # type: ignore[assignment]
        assert set(guards.tampered()) == {
            "time.perf_counter",
            "kernelarc.runner.hack_checks.same_bits",
        }
    finally:
        time.perf_counter = original
        hack_checks.same_bits = same_bits  # type: ignore[assignment]
    assert guards.tampered() == []


def test_same_bits_is_nan_safe_and_sees_any_change() -> None:
    t = torch.tensor([1.0, math.nan, -math.inf])
    assert same_bits(t, t.clone())
    changed = t.clone()
    changed[0] = 2.0
    assert not same_bits(t, changed)
    assert not same_bits(t, t.to(torch.float64))
    assert same_bits(3, 3) and not same_bits(3, 4)
