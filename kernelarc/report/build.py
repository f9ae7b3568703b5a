"""Build an ablation report from loaded campaigns: numbers, plots and the HTML page.

Place in the flow: `kernelarc report` loads campaigns (`report.inputs`), calls `build_report`,
then logs the output folder to MLflow. Files written to `out_dir`:
`report.html` (self-contained), `report.json` (every number on the page), `arms.csv`,
`runs.csv`, `best_so_far.png`, `credit_agents.png`, `credit_strategies.png`.
"""

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelarc.errors import ConfigError
from kernelarc.report.arms import arm_keys, arm_label
from kernelarc.report.html_page import render_html
from kernelarc.report.plots import plot_best_so_far, plot_credit
from kernelarc.report.stats import (
    CI_METHODS,
    ArmStats,
    Interval,
    RunResult,
    default_targets,
    run_result,
    summarize_arms,
)
from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import utc_now
from kernelarc.timing_labels import CPU_TIMING_NOTE, TIMING_TAG_VALUE, cpu_timed

REPORT_HTML = "report.html"
"""The page."""
REPORT_JSON = "report.json"
"""Every number of the page."""


@dataclass(frozen=True)
class ReportOptions:
    """How to compare the campaigns."""

    budget: int | None = None
    """Attempts per campaign that count; None: the fewest any campaign made."""
    target: float | None = None
    """Speedup target of every problem; None: 0.9 x the best final speedup of the problem."""
    arm_by: tuple[str, ...] = ()
    """Keys that define the arms; (): the differing overrides (see report.arms)."""
    confidence: float = 0.95
    """Confidence level of the intervals."""
    ci: str = "bootstrap"
    """Interval method: `t` or `bootstrap`."""
    title: str = "KernelArc ablation report"
    """Page title."""

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            msg = f"--budget must be >= 1 (got {self.budget})"
            raise ConfigError(msg)
        if self.ci not in CI_METHODS:
            msg = f"--ci must be one of {', '.join(CI_METHODS)} (got {self.ci!r})"
            raise ConfigError(msg)
        if not 0.5 <= self.confidence < 1.0:
            msg = f"--confidence must be in [0.5, 1) (got {self.confidence})"
            raise ConfigError(msg)


@dataclass(frozen=True)
class Report:
    """A written report."""

    out_dir: Path
    """Where its files are."""
    budget: int
    """Attempts per campaign that counted."""
    arm_keys: list[str]
    """Keys that defined the arms."""
    arms: list[ArmStats]
    """Per (problem, arm)."""
    files: list[Path] = field(default_factory=list)
    """Every file written."""
    notes: list[str] = field(default_factory=list)
    """Caveats shown on the page."""

    @property
    def html(self) -> Path:
        """The HTML page."""
        return self.out_dir / REPORT_HTML


def build_report(
    campaigns: Sequence[CampaignSource], out_dir: Path, options: ReportOptions
) -> Report:
    """Compute the arms' statistics and write every report file into `out_dir`.

    Raises:
        ConfigError: no campaign.
    """
    if not campaigns:
        msg = "no campaign to report on"
        raise ConfigError(msg)
    keys = arm_keys(campaigns, options.arm_by)
    budget = options.budget or min(len(c.attempts) for c in campaigns)
    notes = _notes(campaigns, keys, budget)
    results = [run_result(c, arm_label(c, keys), budget) for c in campaigns]
    problems = sorted({r.problem for r in results})
    targets = (
        dict.fromkeys(problems, options.target)
        if options.target is not None
        else default_targets(results)
    )
    arms = summarize_arms(results, targets, options.confidence, options.ci)
    out_dir.mkdir(parents=True, exist_ok=True)
    images = {
        "Best speedup so far vs candidates evaluated": plot_best_so_far(
            arms, out_dir / "best_so_far.png"
        ),
        "Credit by agent": plot_credit(arms, out_dir / "credit_agents.png", "agent"),
        "Credit by strategy": plot_credit(arms, out_dir / "credit_strategies.png", "strategy"),
    }
    report = Report(out_dir, budget, keys, arms, list(images.values()), notes)
    report.files.append(_write_json(out_dir / REPORT_JSON, report, options, targets))
    cpu = {c.label for c in campaigns if cpu_timed(c.attempts)}
    report.files.append(_write_arms_csv(out_dir / "arms.csv", arms, cpu))
    report.files.append(_write_runs_csv(out_dir / "runs.csv", arms, cpu))
    facts = {
        "campaigns": str(len(campaigns)),
        "problems": ", ".join(problems),
        "arms defined by": ", ".join(keys) or "nothing differs (one arm)",
        "budget": f"the first {budget} attempts of each campaign",
        "targets": ", ".join(f"{p}: {t:.3g}x" for p, t in sorted(targets.items())),
        "intervals": f"{options.confidence:.0%} {_method(options.ci)}",
        "written": utc_now(),
    }
    page = render_html(
        options.title, facts, arms, {k: p.read_bytes() for k, p in images.items()}, notes
    )
    report.html.write_text(page, encoding="utf-8")
    report.files.append(report.html)
    return report


def _notes(campaigns: Sequence[CampaignSource], keys: list[str], budget: int) -> list[str]:
    notes = []
    if cpu_timed(a for c in campaigns for a in c.attempts):
        notes.append(CPU_TIMING_NOTE)
    short = [c.label for c in campaigns if len(c.attempts) < budget]
    if short:
        notes.append(
            f"{len(short)} campaign(s) made fewer than {budget} attempts and keep their last "
            f"best-so-far value: {', '.join(short)}"
        )
    if not keys:
        notes.append("no setting differs between the campaigns: they form one arm")
    return notes


def _method(ci: str) -> str:
    if ci == "t":
        return "Student t intervals, cut to each quantity's range"
    return "percentile bootstrap intervals"


def _interval(interval: Interval) -> dict[str, float | int | None]:
    def clean(v: float) -> float | None:
        return None if math.isnan(v) else v

    return {
        "mean": clean(interval.mean),
        "low": clean(interval.low),
        "high": clean(interval.high),
        "n": interval.n,
    }


def _run_json(run: RunResult, target: float) -> dict[str, Any]:
    return {
        "label": run.label,
        "problem": run.problem,
        "arm": run.arm,
        "seed": run.seed,
        "mlflow_run_id": run.mlflow_run_id,
        "final_best_speedup": run.final_best,
        "final_best_speedup_ci": (
            None
            if run.final_ci is None
            else {"low": run.final_ci[0], "high": run.final_ci[1], "method": run.final_ci[2]}
        ),
        "final_sol_score": run.final_sol,
        "candidates_to_target": run.candidates_to(target),
        "best_so_far": list(run.best_so_far),
        "gains": [g.__dict__ for g in run.gains],
    }


def _write_json(
    path: Path, report: Report, options: ReportOptions, targets: dict[str, float]
) -> Path:
    data = {
        "budget": report.budget,
        "arm_keys": report.arm_keys,
        "targets": targets,
        "confidence": options.confidence,
        "ci": options.ci,
        "notes": report.notes,
        "arms": [
            {
                "problem": a.problem,
                "arm": a.arm,
                "runs": [r.label for r in a.runs],
                "final_best_speedup": _interval(a.final_best),
                "final_sol_score": _interval(a.final_sol),
                "candidates_to_target": _interval(a.to_target),
                "reached_target": a.reached,
                "target": a.target,
                "credit_agents": a.credit_agents,
                "credit_strategies": a.credit_strategies,
                "best_so_far_mean": list(a.curve),
            }
            for a in report.arms
        ],
        "runs": [_run_json(r, a.target) for a in report.arms for r in a.runs],
    }
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def _write_arms_csv(path: Path, arms: Sequence[ArmStats], cpu: set[str]) -> Path:
    """One row per arm; every interval as numeric columns (mean, low, high, n), empty when
    undefined, so a spreadsheet or pandas reads numbers, not "mean [low, high]" strings; the
    `timing` column labels arms timed on a CPU (`cpu` holds those campaigns' labels)."""
    measures = ("final_best_speedup", "final_sol_score", "candidates_to_target")
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = ["problem", "arm", "runs"]
        for measure in measures:
            header += [f"{measure}_{part}" for part in ("mean", "low", "high", "n")]
        writer.writerow([*header, "reached_target", "timing"])
        for a in arms:
            row: list[object] = [a.problem, a.arm, len(a.runs)]
            for interval in (a.final_best, a.final_sol, a.to_target):
                numbers = _interval(interval)
                row += [_csv_number(numbers[part]) for part in ("mean", "low", "high", "n")]
            writer.writerow([*row, a.reached, _timing((r.label for r in a.runs), cpu)])
    return path


def _csv_number(value: float | int | None) -> object:
    return "" if value is None else value


def _timing(labels: Iterable[str], cpu: set[str]) -> str:
    """The `timing` column: the CPU label when any of the campaigns was timed on a CPU."""
    return TIMING_TAG_VALUE if any(label in cpu for label in labels) else ""


def _write_runs_csv(path: Path, arms: Sequence[ArmStats], cpu: set[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = ["campaign", "problem", "arm", "seed", "final_best_speedup", "final_sol_score"]
        interval = ["final_best_speedup_ci_low", "final_best_speedup_ci_high", "ci_method"]
        writer.writerow([*header, "timing", *interval])
        for a in arms:
            for r in a.runs:
                sol = "" if r.final_sol is None else r.final_sol
                timing = _timing([r.label], cpu)
                ci = list(r.final_ci) if r.final_ci is not None else ["", "", ""]
                row = [r.label, r.problem, r.arm, r.seed, r.final_best, sol, timing]
                writer.writerow([*row, *ci])
    return path
