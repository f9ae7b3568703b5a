"""What a benchmark run was asked to do (`BenchSettings`, filled by `cli_options.py` from the
scripts' options) and how it names its problems: built-in names or problem dirs, labelled by name.

Place in the flow: every other module of the benchmark takes a `BenchSettings`; `campaigns.py`
runs the problems in its order, `baselines.py` measures with its rounds, `outputs.py` and
`suite.py` write its files.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.problems.builtin_set import builtin_dir, builtin_names

Log = Callable[[str], None]
"""Where the benchmark says what it is doing, one line at a time (`print` by default)."""


@dataclass
class BenchSettings:
    """What `scripts/bench_campaign.py` was asked to do."""

    device: str
    """Resolved device: `cpu` or `cuda`."""
    problems: list[str]
    """Built-in problem names or problem dirs (with definition.json), in run order."""
    workloads: str
    """Workload file of each problem dir."""
    out: Path
    """Directory for run dirs, bench.json and bench.md."""
    budget: int = 64
    """Candidates per campaign."""
    seed: int = 0
    """Campaign seed (one seed)."""
    max_workloads: int = 0
    """Keep only the last N workloads of the file (the largest in the built-ins); 0 = all."""
    correctness_rounds: int = 3
    """eval.correctness_rounds of every evaluation."""
    campaign_time_s: float = 0.0
    """Per-campaign wall-clock budget (`budget.time_s`: in-flight work finishes); 0 = none."""
    total_time_s: float = 0.0
    """No problem starts after this; campaigns get a fair share of what is left; 0 = none."""
    overrides: list[str] = field(default_factory=list)
    """Extra Hydra overrides (`key=value`), applied last."""
    json_path: Path | None = None
    """Where to write the JSON (default out/bench.json)."""
    markdown_path: Path | None = None
    """Where to write the markdown table (default out/bench.md)."""
    baselines: list[str] | None = None
    """torch.compile variants to measure after each campaign (None: `wanted_baselines`)."""
    baseline_rounds: int = 2
    """Evaluations of each measured baseline and of the fastest compile variant (campaign
    attempts and guard re-timings count), so their latencies get a confidence interval."""


def default_problems(workloads: str) -> list[str]:
    """Built-in problems that ship the workload file, sorted."""
    return [n for n in builtin_names() if (builtin_dir() / n / workloads).is_file()]


def is_problem_dir(path: Path) -> bool:
    """A directory holding a definition.json."""
    return (path / "definition.json").is_file()


def problem_label(spec: str) -> str:
    """A problem's name in rows and run dirs: the built-in name or the dir's name."""
    return Path(spec).name if is_problem_dir(Path(spec)) else spec
