"""The label every CPU-timed number carries: a pipeline check, not kernel performance.

Place in the flow: on a machine without a GPU the runner times with a monotonic clock
(`timing_method: cpu_monotonic` in each trace); those latencies, speedups and SOL scores show the
pipeline works, nothing about a kernel's speed (Triton runs in its interpreter there, so no
generated kernel can win). The campaign console, `kernelarc eval`, the MLflow runs, `kernelarc
report` and `kernelarc export` all say so with the words defined here; they print a speedup's
confidence interval with `speedup_interval_text`.
"""

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module at start; pydantic models load lazily
    from kernelarc.schema import Attempt, Trace

CPU_TIMING_METHOD = "cpu_monotonic"
"""The trace's `timing_method` of a CPU timing."""

CPU_TIMING_NOTE = (
    "CPU timings (cpu_monotonic): a pipeline check, not kernel performance "
    "(Triton runs in its interpreter on the CPU, so no generated kernel can win there)"
)
"""One line where CPU-timed numbers are printed."""

TIMING_TAG_VALUE = "cpu: pipeline check, not performance"
"""Value of the `kernelarc.timing` MLflow tag and of the export's `timing` column on the CPU."""


def cpu_timed_traces(traces: Iterable["Trace"]) -> bool:
    """True when any of the traces was timed on the CPU."""
    return any(
        t.evaluation is not None
        and t.evaluation.performance is not None
        and t.evaluation.performance.timing_method == CPU_TIMING_METHOD
        for t in traces
    )


def cpu_timed(attempts: Iterable["Attempt"]) -> bool:
    """True when any attempt's numbers come from CPU timing."""
    return any(cpu_timed_traces(a.traces) for a in attempts)


def speedup_interval_text(low: float | None, high: float | None) -> str:
    """` [low, high]` after a speedup, from its confidence interval (`Performance` or `Attempt`
    `speedup_ci_low/high`); '' without one (an older record, or interleaving off)."""
    if low is None or high is None:
        return ""
    return f" [{_ratio(low)}, {_ratio(high)}]"


def _ratio(value: float) -> str:
    """Two decimals, or two significant digits below 0.1 (a CPU-interpreted kernel's 0.0043x
    would print as 0.00x)."""
    return f"{value:.2f}" if value == 0 or abs(value) >= 0.1 else f"{value:.2g}"


def speedup_text(
    speedup: float, low: float | None, high: float | None, interleaved: float | None
) -> str:
    """A speedup with its confidence interval: `1.02x [0.98, 1.05]`. The interval is the
    interleaved estimate's (`interleaved`), not the official number's; when the official
    speedup lies outside it (a noisy official pair of timings), the interleaved estimate is shown
    beside it, so no number reads as inside an interval it is not in:
    `2.16x (interleaved 1.06x [0.97, 1.16])`."""
    text = f"{_ratio(speedup)}x"
    if low is None or high is None:
        return text
    if interleaved is not None and not low <= speedup <= high:
        return f"{text} (interleaved {_ratio(interleaved)}x{speedup_interval_text(low, high)})"
    return text + speedup_interval_text(low, high)
