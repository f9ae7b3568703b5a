"""scores.csv and manifest.json of an export: scores per problem and where everything came from.

Place in the flow: `leaderboard.export.write_export` renders a Plan with these. Deterministic:
no clock (the export time comes from the plan), sorted keys, stable row order.
"""

import csv
import io
import math
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from kernelarc import __version__
from kernelarc.rundir.reader import CampaignSource
from kernelarc.timing_labels import CPU_TIMING_NOTE, TIMING_TAG_VALUE, cpu_timed
from leaderboard.plan import Plan

if TYPE_CHECKING:
    from kernelarc.guard.score import SpeedupInterval
    from kernelarc.schema import Attempt

FORMAT = "kernelarc-leaderboard/1"
"""manifest.json `format` value; bump on incompatible changes."""
SCORES_COLUMNS = (
    "problem",
    "category",
    "latency_ms",
    "reference_latency_ms",
    "speedup",
    "t_sol_ms",
    "t_b_ms",
    "sol_score",
    "hardware",
    "t_b_source",
    "t_sol_source",
    "campaign",
    "attempt_index",
    "proposal_id",
    "timing",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_ci_method",
)
"""scores.csv header, in order (`timing` labels CPU-timed rows: a pipeline check; the
`speedup_ci_*` columns are empty for attempts recorded without an interval)."""
SCORING = {
    "sol_score": "S = 1/(1 + max(T_k - T_SOL, 0)/(T_b - T_SOL)), in [0, 1]; T_b <= T_SOL: 1 if "
    "T_k <= T_SOL else 0; per problem the mean of S over workloads; empty without T_SOL; the "
    "same number as the campaign's MLflow eval/sol_score and kernelarc report "
    "(kernelarc.guard.score.score_attempt)",
    "t_b": "per workload: the trace's reference latency (timed by the same evaluation)",
    "t_sol": "per workload: the guard's recorded roofline bound, else the roofline of "
    "kernelarc.guard.roofline with default ceilings, else none (t_sol_source says which)",
    "latencies": "scores.csv latency columns are geometric means over workloads, in ms",
    "speedup": "the official protocol's speedup (reference median / solution median, geometric "
    "mean over workloads); speedup_ci_low/high: its confidence interval from the runner's "
    "interleaved reference/solution timing, speedup_ci_method says how it was made and how "
    "workloads were combined (kernelarc.guard.score.speedup_interval)",
    "selection": "accepted attempts only (PASSED, NEW_BEST, confirmed where recorded); per "
    "problem the lowest latency, GPU-timed before CPU-timed, then the older attempt; never one "
    "slower than its campaign's reference (geometric mean over workloads of T_k / the median "
    "reference latency of the campaign's PASSED evaluations on the same hardware and timing "
    "method): then the next ranked attempt not slower, else the campaign's PASSED attempt of "
    "the reference itself, else none",
}
"""How the numbers were made, written into the manifest."""


def scores_csv(plan: Plan) -> str:
    """One row per exported problem, by name."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SCORES_COLUMNS)
    for item in plan.problems:
        chosen = item.choice.chosen
        s = chosen.score
        writer.writerow(
            [
                item.name,
                item.category,
                _num(s.latency_ms),
                _num(s.reference_latency_ms),
                _num(s.speedup),
                _num(s.t_sol_ms),
                _num(s.t_b_ms),
                _num(s.sol_score),
                s.hardware,
                s.t_b_source,
                s.t_sol_source,
                chosen.campaign,
                chosen.attempt.index,
                chosen.attempt.proposal.id,
                _timing(chosen.attempt),
                *_interval_cells(s.interval),
            ]
        )
    return buffer.getvalue()


def _interval_cells(interval: "SpeedupInterval | None") -> list[str]:
    """scores.csv's low, high and method cells (empty without an interval)."""
    if interval is None:
        return ["", "", ""]
    return [_num(interval.low), _num(interval.high), interval.method]


def _timing(attempt: "Attempt") -> str:
    """The CPU label for an attempt timed on the CPU, else empty."""
    return TIMING_TAG_VALUE if cpu_timed([attempt]) else ""


def build_manifest(plan: Plan) -> dict[str, object]:
    """The manifest as a JSON-ready dict."""
    libraries: dict[str, set[str]] = {}
    hardware: set[str] = set()
    problems: dict[str, object] = {}
    for item in plan.problems:
        chosen = item.choice.chosen
        attempt = chosen.attempt
        for trace in attempt.traces:
            if trace.evaluation is not None:
                hardware.add(trace.evaluation.environment.hardware)
                for lib, version in trace.evaluation.environment.libs.items():
                    libraries.setdefault(lib, set()).add(version)
        problems[item.name] = {
            "campaign": chosen.campaign,
            "attempt_index": attempt.index,
            "proposal_id": attempt.proposal.id,
            "solution": item.solution.name,
            "agent": attempt.proposal.agent,
            "strategy": attempt.proposal.strategy,
            "finished_at": attempt.finished_at,
            "accepted_candidates": len(item.choice.ranked),
            "reason": item.choice.reason,
            "sol_score": _float(chosen.score.sol_score),
            "speedup": _float(chosen.score.speedup),
            "speedup_ci": _interval_json(chosen.score.interval),
            "latency_ms": _float(chosen.score.latency_ms),
            "t_b_source": chosen.score.t_b_source,
            "t_sol_source": chosen.score.t_sol_source,
            "problem_files": item.problem is not None,
            "timing": _timing(attempt) or "gpu",
        }
    return {
        "format": FORMAT,
        "exported_at": plan.exported_at,
        "exported_at_source": plan.exported_at_source,
        "exporter": {"kernelarc": __version__, "git_sha": _git_sha()},
        "campaigns": [_campaign(c) for c in plan.inputs],
        "hardware": sorted(hardware),
        "libraries": {lib: sorted(v) for lib, v in sorted(libraries.items())},
        "problems": problems,
        "without_accepted_attempt": dict(plan.unqualified),
        "scoring": SCORING,
    }


def _campaign(campaign: CampaignSource) -> dict[str, object]:
    record = campaign.record
    return {
        "source": campaign.label,
        "mlflow_run_id": campaign.mlflow_run_id,
        "name": record.name if record else None,
        "problem": record.problem if record else None,
        "device": record.device if record else None,
        "seed": record.seed if record else None,
        "status": record.status if record else None,
        "started_at": record.started_at if record else None,
        "finished_at": record.finished_at if record else None,
        "attempts": len(campaign.attempts),
        "config_sha256": campaign.config_sha256,
        "problem_files": campaign.problem is not None,
        # Campaigns do not record these yet (local sandbox, no container image).
        "git_sha": None,
        "image_ids": None,
    }


def _git_sha() -> str | None:
    """HEAD of the checkout the exporter runs from, or None outside a git checkout."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and sha else None


def _float(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _num(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:.6g}"


def describe_plan(plan: Plan) -> str:
    """The `--dry-run` text: what would be exported, and why each choice was made."""
    lines = [f"{len(plan.inputs)} campaign(s):"]
    for campaign in plan.inputs:
        files = "problem files" if campaign.problem is not None else "NO problem files"
        lines.append(f"  {campaign.label}: {len(campaign.attempts)} attempts, {files}")
    lines.append(f"would export {len(plan.problems)} problem(s):")
    for item in plan.problems:
        chosen = item.choice.chosen
        s = chosen.score
        lines.append(
            f"  {item.name}: {chosen.attempt.proposal.id} by {chosen.attempt.proposal.agent}, "
            f"SOL score {_num(s.sol_score) or 'n/a'}, latency {_num(s.latency_ms)} ms, "
            f"speedup {_num(s.speedup)}x, T_b {_num(s.t_b_ms)} ms ({s.t_b_source}), "
            f"T_SOL {_num(s.t_sol_ms) or 'n/a'} ms ({s.t_sol_source or 'no bound'})"
        )
        lines.append(f"    why: {item.choice.reason} ({len(item.choice.ranked)} accepted)")
        if cpu_timed([chosen.attempt]):
            lines.append(f"    timing: {CPU_TIMING_NOTE}")
        for rank, other in enumerate(item.choice.ranked[1:4], start=2):
            lines.append(
                f"    #{rank}: attempt {other.attempt.index} of {other.campaign}, SOL score "
                f"{_num(other.score.sol_score) or 'n/a'}, latency {_num(other.score.latency_ms)} ms"
            )
    if plan.unqualified:
        lines.append("no accepted attempt (not exported):")
        lines.extend(f"  {p}: {why}" for p, why in plan.unqualified.items())
    lines.append(f"exported_at {plan.exported_at} ({plan.exported_at_source})")
    return "\n".join(lines) + "\n"


def _interval_json(interval: "SpeedupInterval | None") -> dict[str, object] | None:
    """manifest.json's interval of a problem's speedup (None without one)."""
    if interval is None:
        return None
    return {
        "low": _float(interval.low),
        "high": _float(interval.high),
        "estimate": _float(interval.estimate),
        "method": interval.method,
    }
