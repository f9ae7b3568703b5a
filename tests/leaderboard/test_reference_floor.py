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
    """Campaign a's kernel has the lowest latency (0.3 ms) but takes twice its campaign's
    reference latency (a's reference ran faster still); campaign b's kernel (0.35 ms, its
    reference 0.4375 ms) is the fastest one not slower than its own reference."""
    slow = make_attempt(1, speedup=0.5, latency_ms=0.3, bounds_ms=[0.0, 0.0])
    fast = make_attempt(0, speedup=1.25, latency_ms=0.35, bounds_ms=[0.0, 0.0], agent="b")
    runs = load_run_dirs([write_run([slow], name="a"), write_run([fast], name="b")])
    choice = plan_export(runs).problems[0].choice
    assert [c.attempt.proposal.agent for c in choice.ranked] == ["b"]
    assert choice.chosen.score.sol_score == pytest.approx(1 / 1.8)
    assert "not slower than the reference" in choice.reason
    assert "attempt 1 of" in choice.reason and "2.000x the reference latency" in choice.reason


def test_the_floor_is_the_median_reference_of_the_campaign_not_one_noisy_timing(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """The reference ran slow (0.3 ms) in the accepted attempt's own evaluation, so its own
    speedup says 1.2x; the campaign's other evaluations measured it at 0.2 ms, and against that
    median the kernel (0.25 ms) is slower: nothing is exported."""
    others = [
        make_attempt(i, speedup=0.2 / 0.5, latency_ms=0.5, verdict=Verdict.CORRECT) for i in (0, 1)
    ]
    noisy = make_attempt(2, speedup=1.2, latency_ms=0.25)
    plan = plan_export(
        load_run_dirs(
            [
                write_run([*others, noisy], name="a"),
                write_run([make_attempt(0, problem="softmax")], name="b"),
            ]
        )
    )
    assert [p.name for p in plan.problems] == ["softmax"]
    assert "1.250x the reference latency" in plan.unqualified["rmsnorm"]


def test_an_attempt_as_fast_as_the_reference_stays(
    make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    same = make_attempt(0, speedup=1.0, latency_ms=0.2)
    choice = plan_export([load_run_dir(write_run([same]))]).problems[0].choice
    assert choice.chosen.attempt.index == 0 and choice.reason.endswith("the only accepted attempt")
