"""What the judge reports besides the traces: seconds per stage, the C++ build step, and the
workloads it deliberately left unevaluated.

Place in the flow: `__main__` makes one `RunFacts` per request, `evaluate.evaluate_request` fills
it as it goes, and every signed result carries `payload()` next to the traces, so the host's
`EvalResult.stage_s` and `EvalResult.build` come from the judge alone (signed, like verdicts).
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kernelarc.schema.build import BuildInfo, JitSnapshot

STAGES = (
    "build",
    "jit_warm_up",
    "worker_start",
    "inputs",
    "correctness",
    "timing",
    "reference_timing",
    "interleaved_timing",
)
"""The stages the judge times (EvalResult.stage_s keys)."""


@dataclass
class RunFacts:
    """Seconds per stage, the build step and skipped workloads of one request."""

    stage_s: dict[str, float] = field(default_factory=dict)
    build: BuildInfo | None = None
    skipped: list[int] = field(default_factory=list)
    """Request indices of workloads not evaluated because an earlier one failed (a screen)."""
    jit_cache: JitSnapshot | None = None
    """The JIT cache files after a warm-up (`jit_warmup.py`), hashed."""
    cache: dict[str, int] = field(default_factory=dict)
    """A resident judge's cache hits and misses in this request (`resident_cache.py`)."""
    resident: dict[str, float] = field(default_factory=dict)
    """A resident judge's request count and age (`resident.py`); empty for a one-off runner."""

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to stage `name` (also when it raises)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        """Add `seconds` to stage `name`."""
        self.stage_s[name] = self.stage_s.get(name, 0.0) + seconds

    def payload(self) -> dict[str, Any]:
        """The keys the signed result carries beside `traces`."""
        return {
            "stage_s": {k: round(v, 4) for k, v in self.stage_s.items()},
            "build": self.build.model_dump(mode="json") if self.build else None,
            "skipped": list(self.skipped),
            "jit_cache": self.jit_cache.model_dump(mode="json") if self.jit_cache else None,
            "cache": dict(self.cache),
            "resident": dict(self.resident),
        }
