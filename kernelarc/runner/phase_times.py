"""Where a workload's evaluation time goes, by phase, for the runner's log.

Place in the flow: `evaluate.py` wraps each phase of a workload (input generation, reference
runs, candidate calls, comparisons, timing) in `PhaseTimes.phase`, and logs `summary()` when the
workload ends, so a slow evaluation says where its time went (the runner's log is
`EvalResult.stderr_tail`; `scripts/bench_cpu_eval.py` prints these lines).
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class PhaseTimes:
    """Wall seconds per phase name, summed over a workload."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the wall time of the block under `name`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def summary(self) -> str:
        """`total 12.3 s: inputs 3.1 s, reference 2.0 s, ...` (largest first)."""
        total = time.perf_counter() - self.started
        parts = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        counted = sum(self.seconds.values())
        text = ", ".join(f"{name} {value:.2f} s" for name, value in parts)
        return f"total {total:.2f} s: {text}, other {max(0.0, total - counted):.2f} s"
