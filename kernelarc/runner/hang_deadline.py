"""How long the judge waits for a candidate on one workload before calling it hung.

Place in the flow: `evaluate.py` opens a `WorkloadClock` per workload, tells it when it started
a worker and how long the workload's first reference run took, and hands its `Budget` to the
worker client, which charges every wait for the worker to it and raises `WorkerTimedOut` when
it is spent. The deadline follows the workload (`schema.HangPolicy`): a fixed allowance (plus
the build timeout on the workload that imports a C++ solution), plus a multiple of the
reference's own time for the calls the candidate makes there, capped by the request's
`workload_timeout_s` and by what is left of its `overall_timeout_s`. Before the reference has
run, only the allowances count (the candidate has not been called yet then).
"""

import time
from dataclasses import dataclass

from kernelarc.runner.interleaved import interleaved_calls
from kernelarc.schema import EvalRequest, HangPolicy

#: Kept back from the overall timeout, so the judge reports a hang before the sandbox kills it.
OVERALL_MARGIN_S = 3.0
OVERALL_MARGIN_FRACTION = 0.05


@dataclass
class Budget:
    """What the worker may still take on this workload; shared by every worker used on it (a
    replacement worker inherits what is left)."""

    limit_s: float | None = None
    """Seconds of waiting for the worker allowed on this workload (None: no limit)."""
    spent_s: float = 0.0
    """Seconds of waiting for the worker so far."""
    wall_deadline: float | None = None
    """time.monotonic() by which the judge must stop waiting (the overall timeout's margin)."""

    def remaining_s(self) -> float | None:
        """What is left (may be <= 0), None without any limit."""
        left = [] if self.limit_s is None else [self.limit_s - self.spent_s]
        if self.wall_deadline is not None:
            left.append(self.wall_deadline - time.monotonic())
        return min(left) if left else None

    def charge(self, seconds: float) -> None:
        """Count `seconds` of waiting for the worker."""
        self.spent_s += seconds


def candidate_calls(request: EvalRequest) -> int:
    """Calls of the candidate per workload: the correctness rounds, the timing probe, the
    warm-up and timed iterations, and the most the interleaved blocks can make."""
    timing = request.timing
    official = request.correctness_rounds + 1 + timing.warmup + timing.iterations
    return official + interleaved_calls(timing)


@dataclass
class WorkloadClock:
    """The deadline bookkeeping of one request, workload by workload."""

    policy: HangPolicy
    calls: int
    import_allowance_s: float
    """Extra allowance of the workload that starts a worker (the C++ build timeout, or 0)."""
    workload_cap_s: float | None
    overall_s: float | None
    started: float
    budget: Budget
    reference_s: float | None = None
    imports: int = 0

    @classmethod
    def for_request(cls, request: EvalRequest, import_allowance_s: float) -> "WorkloadClock":
        """A clock that starts now (the judge's start stands in for the sandbox's)."""
        return cls(
            policy=request.hang,
            calls=candidate_calls(request),
            import_allowance_s=import_allowance_s,
            workload_cap_s=request.workload_timeout_s,
            overall_s=request.overall_timeout_s,
            started=time.monotonic(),
            budget=Budget(),
        )

    def begin_workload(self) -> Budget:
        """A fresh budget for the next workload (the reference is not timed yet)."""
        self.reference_s = None
        self.imports = 0
        self.budget = Budget(wall_deadline=self.wall_deadline())
        self._update()
        return self.budget

    def worker_started(self) -> None:
        """A worker (an import, maybe a build) starts on this workload."""
        self.imports += 1
        self._update()

    def reference_ran(self, seconds: float) -> None:
        """The reference's wall time for one call; the first of the workload sets the pace."""
        if self.reference_s is None:
            self.reference_s = max(seconds, 0.0)
            self._update()

    def _update(self) -> None:
        self.budget.limit_s = self.limit_s()

    def wall_deadline(self) -> float | None:
        """When the judge stops waiting whatever the workload: the overall timeout less a
        margin, from the judge's start (None: no overall timeout known)."""
        if self.overall_s is None:
            return None
        margin = OVERALL_MARGIN_S + OVERALL_MARGIN_FRACTION * self.overall_s
        return self.started + max(self.overall_s - margin, 0.0)

    def derived_s(self) -> float:
        """The deadline the policy derives so far (without the caps)."""
        total = self.policy.allowance_s + self.imports * self.import_allowance_s
        if self.reference_s is not None:
            total += self.policy.reference_factor * self.reference_s * self.calls
        return total

    def limit_s(self) -> float:
        """The workload's deadline in seconds of waiting: derived, capped by
        workload_timeout_s (the overall timeout is `Budget.wall_deadline`)."""
        derived = self.derived_s()
        return derived if self.workload_cap_s is None else min(derived, self.workload_cap_s)

    def describe(self) -> str:
        """How the deadline was made, for a TIMEOUT log."""
        parts = [f"{self.policy.allowance_s:g} s allowance"]
        if self.imports and self.import_allowance_s:
            parts.append(f"{self.imports * self.import_allowance_s:g} s build allowance")
        if self.reference_s is not None:
            parts.append(
                f"{self.policy.reference_factor:g} x the reference's {self.reference_s:.4g} s "
                f"x {self.calls} calls"
            )
        text = f"a deadline of {self.limit_s():.4g} s ({' + '.join(parts)}"
        if self.workload_cap_s is not None and self.workload_cap_s < self.derived_s():
            text += f", capped by workload_timeout_s={self.workload_cap_s:g} s"
        text += ")"
        deadline = self.budget.wall_deadline
        if deadline is not None and deadline - time.monotonic() <= 0:
            text += f" or the end of the overall timeout of {self.overall_s:g} s"
        return text
