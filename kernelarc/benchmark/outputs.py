"""What a benchmark run has measured and its files: one `ProblemResult` per finished problem,
the `BenchProgress` of the run (finished, failed, not reached), and bench.json / bench.md,
rewritten after every problem (atomically, so a run killed mid-write keeps the previous ones).

Place in the flow: `campaigns.run_bench` fills a `BenchProgress` and calls its writer after each
problem: `write_outputs` here, or `suite.write_suite` for the suite benchmark.
"""

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelarc.benchmark.report import CI_METHOD, ProblemRow, markdown_table, summarize
from kernelarc.benchmark.settings import BenchSettings
from kernelarc.guard.ceilings import gpu_identity


@dataclass
class ProblemResult:
    """One problem's outcome: its row and where its records are."""

    row: ProblemRow
    run_dir: str
    campaign_wall_s: float
    baseline_wall_s: float
    baselines: list[dict[str, Any]]
    ceiling: dict[str, Any] | None
    throughput: dict[str, Any] | None = None
    """The campaign's ThroughputReport (candidates/min, seconds per stage), as JSON."""


def machine_facts(device: str) -> dict[str, str]:
    """GPU, driver and library versions (no torch import: package metadata)."""
    facts = {"python": sys.version.split()[0]}
    for package in ("torch", "triton"):
        try:
            facts[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            facts[package] = "not installed"
    identity = gpu_identity(0) if device == "cuda" else None
    facts["gpu"], facts["driver"] = identity if identity else ("none", "")
    return facts


@dataclass
class BenchProgress:
    """What a bench run has so far (written after every problem)."""

    meta: dict[str, Any]
    """command, date, machine."""
    results: dict[str, ProblemResult] = field(default_factory=dict)
    """Finished problems by label."""
    failed: dict[str, str] = field(default_factory=dict)
    """Problems that raised: label -> `ErrorType: message`."""
    not_reached: dict[str, str] = field(default_factory=dict)
    """Problems not started before the total time ran out: label -> why."""
    sources: dict[str, str] = field(default_factory=dict)
    """Label -> the problem as given (built-in name or dir)."""


Writer = Callable[[BenchSettings, BenchProgress], tuple[Path, Path]]


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and a rename, so a run killed mid-write leaves the previous
    complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text, encoding="utf-8")
    staging.replace(path)


def write_outputs(settings: BenchSettings, progress: BenchProgress) -> tuple[Path, Path]:
    """bench.json and bench.md (rewritten after each problem)."""
    results, meta = progress.results, progress.meta
    skipped = {**progress.failed, **progress.not_reached}
    rows = [r.row for r in results.values()]
    summary = summarize(rows)
    json_path = settings.json_path or settings.out / "bench.json"
    md_path = settings.markdown_path or settings.out / "bench.md"
    data = {
        **meta,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "ci_method": CI_METHOD,
        "rows": [r.as_dict() for r in rows],
        "summary": asdict(summary),
        "problems": {
            name: {k: v for k, v in asdict(res).items() if k != "row"}
            for name, res in results.items()
        },
        "failed": progress.failed,
        "not_reached": progress.not_reached,
        "skipped": skipped,
    }
    write_text_atomic(json_path, json.dumps(data, indent=2, default=str) + "\n")
    header = (
        f"Offline team, budget {settings.budget}, seed {settings.seed}, {settings.device} "
        f"({meta['machine'].get('gpu', '')}), {meta['date']}\n\n"
    )
    skipped_lines = "".join(f"\nNot run: {k} ({v})." for k, v in skipped.items())
    write_text_atomic(md_path, header + markdown_table(rows) + skipped_lines)
    return json_path, md_path
