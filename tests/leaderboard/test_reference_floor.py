"""The reference floor: an export is never slower than the problem's reference.

The first passing candidate of a campaign is accepted without an incumbent to beat, so a
campaign can accept a kernel slower than the reference; the export then takes the next accepted
attempt that is not slower, else the reference's own PASSED attempt, else nothing (with why).
"""

import pytest

from kernelarc.errors import ConfigError
from kernelarc.schema import Verdict
from leaderboard import plan_export
from leaderboard.inputs import load_run_dir, load_run_dirs
from tests.leaderboard.conftest import MakeAttempt, WriteRun, definition_json

REFERENCE = definition_json("rmsnorm")["reference"]


def test_an_accepted_kernel_slower_than_the_reference_gives_way_to_the_reference(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    slow = make_attempt(0, speedup=0.5, latency_ms=0.4, bounds_ms=[0.01, 0.01])
    # The compiler agent's eager attempt: the reference itself, never accepted (re-timing
    # undecided, or its guard run failed in the sandbox).
    eager = make_attempt(
        1,
        speedup=1.0,
        latency_ms=0.2,
        verdict=Verdict.CHALLENGER,
        confirmed=False,
        agent="compiler",
        sources={"kernel.py": REFERENCE},
        bounds_ms=[0.01, 0.01],
    )
    choice = plan_export([load_run_dir(write_run([slow, eager]))]).problems[0].choice
    assert choice.chosen.attempt.index == 1
    assert choice.reason.startswith("attempt 1 of ")
    assert (
        "the reference itself" in choice.reason and "2.000x the reference latency" in choice.reason
    )
    assert [c.attempt.index for c in choice.ranked] == [1, 0]


def test_without_an_attempt_of_the_reference_nothing_slower_is_exported(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    slow = make_attempt(0, speedup=0.5, latency_ms=0.4)
    fine = make_attempt(0, problem="softmax", speedup=1.5, latency_ms=0.2)
    runs = load_run_dirs([write_run([slow], name="a"), write_run([fine], name="b")])
    plan = plan_export(runs)
    assert [p.name for p in plan.problems] == ["softmax"]
    assert "every accepted attempt is slower than the reference" in plan.unqualified["rmsnorm"]
    with pytest.raises(ConfigError, match="slower than the reference"):
        plan_export([load_run_dir(write_run([slow], name="c"))])


def test_the_next_accepted_attempt_not_slower_than_its_reference_wins(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """Campaign a's torch.compile baseline (T_b) is slower than its reference, so a's kernel,
    twice the reference's latency, still scores 0.71 and ranks first; campaign b's kernel (0.56)
    is the best one not slower than its reference."""
    baseline = make_attempt(
        0,
        speedup=0.2,
        latency_ms=1.0,
        verdict=Verdict.CORRECT,
        agent="compiler",
        knobs={"variant": "compile-max-autotune", "compiled": True},
    )
    slow = make_attempt(1, speedup=0.5, latency_ms=0.4, bounds_ms=[0.0, 0.0])
    fast = make_attempt(0, speedup=1.25, latency_ms=0.2, bounds_ms=[0.0, 0.0], agent="b")
    runs = load_run_dirs([write_run([baseline, slow], name="a"), write_run([fast], name="b")])
    choice = plan_export(runs).problems[0].choice
    assert [c.attempt.proposal.agent for c in choice.ranked] == ["b"]
    assert choice.chosen.score.sol_score == pytest.approx(1 / 1.8)
    assert "not slower than the reference" in choice.reason
    assert "attempt 1 of" in choice.reason and "2.000x the reference latency" in choice.reason


def test_an_attempt_as_fast_as_the_reference_stays(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    same = make_attempt(0, speedup=1.0, latency_ms=0.2)
    choice = plan_export([load_run_dir(write_run([same]))]).problems[0].choice
    assert choice.chosen.attempt.index == 0 and choice.reason.endswith("the only accepted attempt")
