"""The campaign's wall-clock budget (`budget.time_s`): a deadline for proposing and evaluating.

Place in the flow: `run_campaign` starts a `TimeBudget` when it is entered (set-up counts), with
the time a resumed campaign had already used (campaign.json `time_used_s`). Every agent thread
asks it, under the state lock, before it proposes (`expired`), before a proposal it got takes a
budget slot (`fits`), and again when the candidate reaches each executor slot (screen, timing:
`Executor.evaluate_candidate`'s `admit`), because a candidate proposed in time may wait there
behind others until after the deadline; a proposal that does not fit is dropped unrecorded (a
resume may propose it again). What counts as "fits": the candidate's expected duration, the
mean of this campaign's finished candidates (screen, timed evaluation and guard runs included;
0 before the first), ends before the deadline. So the guard's own evaluations are budgeted
with their candidate.

An evaluation in flight at the deadline is finished, its guard runs included, and recorded; it is
not cut: a cut candidate would have no verdict, its work would be lost, and a resume would
evaluate it again. The overrun is bounded by one candidate's pipeline (`eval.timeout_s` per
evaluation) and shows in `time_used_s`.
"""

import time
from datetime import UTC, datetime, timedelta


class TimeBudget:
    """A deadline `time_s - used_before_s` seconds after construction (None: no time budget).

    Not thread-safe: the loop calls it under its state lock.
    """

    def __init__(self, time_s: float | None, used_before_s: float = 0.0) -> None:
        """Start the clock now."""
        self.time_s = time_s
        self.used_before_s = used_before_s
        self._started = time.monotonic()
        self._started_wall = datetime.now(UTC)
        self._durations: list[float] = []
        left = None if time_s is None else max(0.0, time_s - used_before_s)
        self.left_at_start_s = left
        self.deadline = None if left is None else self._started + left
        self.stopped = False
        """True once the budget turned a proposal or an evaluation away."""

    def used_s(self) -> float:
        """Seconds used by the campaign so far, earlier sessions of a resumed one included."""
        return self.used_before_s + (time.monotonic() - self._started)

    def left_s(self) -> float | None:
        """Seconds left before the deadline (None without a time budget)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def deadline_at(self) -> str | None:
        """The deadline as an ISO UTC time with milliseconds (None without a time budget)."""
        if self.left_at_start_s is None:
            return None
        at = self._started_wall + timedelta(seconds=self.left_at_start_s)
        return at.isoformat(timespec="milliseconds")

    def expected_s(self) -> float:
        """Expected duration of the next candidate: the mean of the finished ones (0 if none)."""
        return sum(self._durations) / len(self._durations) if self._durations else 0.0

    def expired(self) -> bool:
        """The deadline has passed (records that the budget stopped something)."""
        if self.deadline is None or time.monotonic() < self.deadline:
            return False
        self.stopped = True
        return True

    def fits(self) -> bool:
        """A candidate started now is expected to finish before the deadline (records that the
        budget stopped something when it does not)."""
        if self.deadline is None or time.monotonic() + self.expected_s() <= self.deadline:
            return True
        self.stopped = True
        return False

    def finished(self, seconds: float) -> None:
        """A candidate's pipeline (screen, evaluation, guard) took `seconds`."""
        self._durations.append(seconds)
