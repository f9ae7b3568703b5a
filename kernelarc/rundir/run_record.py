"""campaign.json: what a run dir holds, so export, eval and later tools can read it alone."""

import json
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from kernelarc.errors import ConfigError
from kernelarc.guard.ceilings import ResolvedCeiling
from kernelarc.guard.roofline import Ceiling, roofline_bounds
from kernelarc.rundir import CAMPAIGN_FILE
from kernelarc.schema import Definition, Workload, utc_now
from kernelarc.schema.base import RecordModel
from kernelarc.schema.coordination import CoordinationSettings, TeamMember
from kernelarc.schema.guard_record import RooflineBound
from kernelarc.schema.throughput import ThroughputReport


class CampaignRoofline(RecordModel):
    """The speed of light of the campaign's workloads on its device (T_SOL of the SOL score)."""

    ceiling: ResolvedCeiling
    """Copy bandwidth and matmul rate used, and whether they were measured."""
    bounds: list[RooflineBound]
    """T_SOL per workload, in workload order (empty if the axes did not resolve)."""


class CampaignRecord(RecordModel):
    """Identity and outcome of one campaign run dir."""

    name: str
    """Campaign name."""
    problem: str
    """Definition name."""
    problem_dir: str
    """The copy of the problem files inside the run dir."""
    source_problem_dir: str
    """Where the problem was loaded from."""
    workloads: str
    """Workload file used."""
    device: str
    """cpu or cuda."""
    seed: int
    """Campaign seed."""
    started_at: str
    """ISO start time."""
    finished_at: str | None = None
    """ISO end time (None while running or after a crash)."""
    resumed_at: list[str] = Field(default_factory=list)
    """ISO time of every resume of the campaign after it was stopped (`kernelarc resume`)."""
    status: str = "RUNNING"
    """RUNNING, FINISHED, FAILED or INTERRUPTED (Ctrl-C; `kernelarc resume` continues it)."""
    best_proposal_id: str | None = None
    """Best attempt's proposal id."""
    best_speedup: float | None = None
    """Best geometric-mean speedup."""
    abort_reason: str = ""
    """Why the campaign stopped early, if it did."""
    stop_reason: str = ""
    """Why it stopped: `candidates` (budget.candidates spent), `time_budget` (budget.time_s
    reached), `agents_done` (no agent had anything new), `aborted` (see abort_reason); "" while
    running or after a kill."""
    time_budget_s: float | None = None
    """budget.time_s of the campaign (None: no time budget)."""
    time_used_s: float = 0.0
    """Wall time used so far, every session of a resumed campaign included (updated after each
    attempt and at the end): what a resume subtracts from time_budget_s."""
    deadline_at: str | None = None
    """ISO UTC time (milliseconds) of this session's deadline (None: no time budget)."""
    coordination: CoordinationSettings | None = None
    """The coordination switches in force (None: records older than the switches)."""
    team: list[TeamMember] = Field(default_factory=list)
    """The agents, their strategies and models."""
    conclusions: int = 0
    """Conclusions published (conclusions.jsonl has them and their retractions)."""
    llm_tokens: int = 0
    """Prompt + completion tokens of the team's LLM agents (0: offline team)."""
    llm_cost_usd: float = 0.0
    """Their cost at the configured prices."""
    throughput: ThroughputReport | None = None
    """Candidates per minute, slot use, queue wait and overheads (written at the end)."""
    roofline: CampaignRoofline | None = None
    """Ceilings and the per-workload speed-of-light bounds (None in older run dirs)."""


def campaign_roofline(
    definition: Definition, workloads: list[Workload], ceiling: ResolvedCeiling
) -> CampaignRoofline:
    """The ceiling and every workload's bound (none when a workload's axes do not resolve)."""
    try:
        bounds = roofline_bounds(
            definition,
            workloads,
            Ceiling(ceiling.copy_bytes_per_s, ceiling.matmul_flops_per_s),
        )
    except (ValueError, KeyError):
        bounds = []
    return CampaignRoofline(ceiling=ceiling, bounds=bounds)


def write_campaign_record(run_dir: Path, record: CampaignRecord) -> None:
    """Write campaign.json atomically."""
    tmp = run_dir / (CAMPAIGN_FILE + ".tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(run_dir / CAMPAIGN_FILE)


def read_campaign_record(run_dir: Path) -> CampaignRecord:
    """Read campaign.json of a run dir."""
    path = run_dir / CAMPAIGN_FILE
    try:
        return CampaignRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError as exc:
        msg = f"{path}: not found; is {run_dir} a KernelArc run dir (outputs/<name>/<time>)?"
        raise ConfigError(msg) from exc
    except (json.JSONDecodeError, ValidationError) as exc:
        msg = f"{path}: unreadable campaign record ({exc})"
        raise ConfigError(msg) from exc


def mark_interrupted(run_dir: Path) -> bool:
    """Mark a running campaign's campaign.json INTERRUPTED (Ctrl-C), with its end time; False
    when there is none yet or it is not running."""
    if not (run_dir / CAMPAIGN_FILE).is_file():
        return False
    try:
        record = read_campaign_record(run_dir)
    except ConfigError:
        return False
    if record.status != "RUNNING":
        return False
    update = {
        "status": "INTERRUPTED",
        "finished_at": utc_now(),
        "abort_reason": "interrupted (Ctrl-C / SIGINT); `kernelarc resume RUN_DIR` continues it",
    }
    write_campaign_record(run_dir, record.model_copy(update=update))
    return True


def read_campaign_json(run_dir: Path) -> dict[str, Any]:
    """The run dir's campaign.json as a dict ({} when missing or unreadable)."""
    try:
        data = json.loads((run_dir / CAMPAIGN_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
