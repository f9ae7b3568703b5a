"""The benchmark table's data: one problem's row and one run of a torch.compile baseline.

Place in the flow: `report.build_row` fills a `ProblemRow` from a campaign's records and its
`BaselineRun`s; `report_table.py` summarises and prints rows; the bench scripts write them as
JSON (`ProblemRow.as_dict`). Apart from both so that each imports the row one way. The variant
names (`BASELINE_DEFAULT`, `MAX_AUTOTUNE`, ...) say which baseline a column reports.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelarc.benchmark.report_stats import Interval

BASELINE_DEFAULT = "compile-default"
"""Compiler-agent variant reported as "torch.compile default"."""
COMPILE_PREFIX = "compile-"
"""Variants that are torch.compile of the reference (candidates for the best compile variant)."""
MAX_AUTOTUNE = {
    "cuda": "compile-max-autotune",
    "cpu": "compile-max-autotune-no-cudagraphs",
}
"""The variant reported as "max-autotune" (T_b) per device: torch.compile(mode="max-autotune");
on CPU, where there are no CUDA graphs, its no-cudagraphs twin."""
NOT_RUN = "NOT_RUN"
"""Status of a baseline nobody evaluated."""


@dataclass(frozen=True)
class BaselineRun:
    """One evaluation of a torch.compile variant of the reference (campaign attempt or extra)."""

    variant: str
    """Compiler-agent variant tag (`compile-default`, `compile-max-autotune`, ...)."""
    status: str
    """PASSED or the first failing status (or INFRA_ERROR)."""
    latencies_ms: Mapping[str, float]
    """Workload uuid -> median latency (PASSED only)."""
    reference_ms: Mapping[str, float]
    """Workload uuid -> the reference's latency measured in the same evaluation."""
    source: str
    """`campaign attempt <i>` or `bench` (measured after the campaign, same protocol)."""
    rounds_ms: Sequence[Mapping[str, float]] = ()
    """Further PASSED timings of the same solution (guard re-timing rounds, confirmation)."""
    error: str = ""
    """Why it did not pass: the first failing workload's log, cut short (empty when PASSED)."""


@dataclass
class ProblemRow:
    """One problem's line of the benchmark table (latencies in ms, intervals [low, high])."""

    problem: str
    workloads: int
    memory_bound: bool
    eager_ms: float | None
    compile_status: str
    """Status of torch.compile default (PASSED, a failing status, NOT_RUN)."""
    compile_ms: float | None
    compile_ci: Interval | None
    best_compile_variant: str
    """The fastest PASSED compile variant ('' when none passed)."""
    best_compile_ms: float | None
    best_compile_ci: Interval | None
    max_autotune_variant: str
    """The variant reported as max-autotune (MAX_AUTOTUNE of the device)."""
    max_autotune_status: str
    max_autotune_ms: float | None
    """T_b (PASSED only)."""
    max_autotune_ci: Interval | None
    best_ms: float | None
    best_ci: Interval | None
    best_by: str
    """`agent: solution name` of the best attempt."""
    best_agent: str
    best_family: str
    """Knob space / family of the best (`triton/gen`, `triton/rmsnorm`, `compile`, `eager`)."""
    roofline_ms: float | None
    """T_SOL."""
    fraction_of_roofline: float | None
    sol_score: float | None
    speedup_vs_compile: float | None
    speedup_vs_compile_ci: Interval | None
    speedup_vs_best_compile: float | None
    speedup_vs_best_compile_ci: Interval | None
    speedup_vs_max_autotune: float | None
    """Only when max-autotune PASSED."""
    speedup_vs_max_autotune_ci: Interval | None
    speedup_vs_eager: float | None
    candidates_to_90: int | None
    attempts: int
    passed: int
    passed_families: list[str]
    """Families of the PASSED attempts, sorted."""
    compile_variants: dict[str, dict[str, Any]]
    """Every compile variant: status, ms, ci, rounds, source."""
    ceiling_source: str
    """measured / cache / config."""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)
