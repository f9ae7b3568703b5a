"""Plateau-triggered drafting: due after P flat attempts and not before; reset by a draft."""

import pytest
from records import attempt

from kernelarc.coordination import PlateauTracker, draft_order


def _feed(tracker: PlateauTracker, speedups: list[float | None]) -> list[bool]:
    due = []
    for index, speedup in enumerate(speedups):
        status = "PASSED" if speedup is not None else "RUNTIME_ERROR"
        tracker.observe(attempt(index, speedup=speedup, status=status))
        due.append(tracker.due)
    return due


@pytest.mark.parametrize("patience", [1, 3, 4])
def test_fires_after_patience_flat_attempts_not_before(patience: int) -> None:
    tracker = PlateauTracker(patience=patience, min_gain=0.02)
    # First pass is progress; then gains within noise (1%), slower, failed: all flat.
    flat = [1.01, 0.9, None, 1.005, 0.95][:patience]
    due = _feed(tracker, [1.0, *flat])
    assert due == [False] * patience + [True]


def test_a_real_gain_resets_the_count_and_noise_does_not() -> None:
    tracker = PlateauTracker(patience=3, min_gain=0.02)
    assert _feed(tracker, [1.0, 1.01, 1.015]) == [False] * 3
    assert tracker.flat == 2
    _feed(tracker, [1.1])  # beyond 2% of the level 1.0: progress
    assert (tracker.flat, tracker.level) == (0, 1.1)
    assert _feed(tracker, [1.11, 1.12, 1.121]) == [False, False, True]


def test_failing_from_the_start_is_a_plateau_and_a_draft_resets_it() -> None:
    tracker = PlateauTracker(patience=2, min_gain=0.02)
    assert _feed(tracker, [None, None]) == [False, True]
    tracker.drafted()
    assert not tracker.due and tracker.drafts == 1
    assert _feed(tracker, [None, None]) == [False, True]


def test_draft_source() -> None:
    tracker = PlateauTracker(patience=1, min_gain=0.0)
    _feed(tracker, [None])
    best = attempt(5, agent="memory", speedup=2.0)
    order = draft_order(
        tracker, agent="tiling", draft_from="global_best", peer_state=True, global_best=best
    )
    assert order.source == "global_best" and order.base == best and order.base is not best
    assert "1 attempts" in order.reason
    for kwargs in (
        {"draft_from": "global_best", "peer_state": False, "global_best": best},
        {"draft_from": "reference", "peer_state": True, "global_best": best},
        {"draft_from": "global_best", "peer_state": True, "global_best": None},
    ):
        order = draft_order(tracker, agent="tiling", **kwargs)
        assert (order.source, order.base) == ("reference", None)
    own = attempt(6, agent="tiling", speedup=2.0)
    order = draft_order(
        tracker, agent="tiling", draft_from="global_best", peer_state=True, global_best=own
    )
    assert order.source == "reference", "the stalled holder of the best restarts from the reference"
