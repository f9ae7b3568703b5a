"""Assembling a campaign before any agent starts: the problem and its copy in the run dir, the
team, the executor (prepared: every slot's first runner started), the roofline ceilings, the
coordinator, campaign.json, the attempt log and the shared state, and with `resume` set what the
killed campaign left (restore.py). Nothing is evaluated here.

Place in the flow: `loop.run_campaign` is `assemble_campaign`, then `loop.run_assembled`, then
`loop.finish_campaign`. The executor is closed again when anything after it fails, so a campaign
that cannot start leaves no warm sandboxes, Docker containers or Ray actors behind.
"""

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelarc.agents import Agent, make_team
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.campaign.device import resolve_device
from kernelarc.campaign.restore import check_resume_dir, resume_into, time_used_before
from kernelarc.campaign.state import CampaignState
from kernelarc.campaign.time_budget import TimeBudget
from kernelarc.config import CampaignConfig
from kernelarc.executor import Executor, make_executor
from kernelarc.guard.ceilings import ResolvedCeiling, resolve_ceiling
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.problems.files import Problem
from kernelarc.rundir import ATTEMPTS_FILE, PROBLEM_DIR
from kernelarc.rundir.attempts_log import AttemptLog
from kernelarc.rundir.run_record import (
    CampaignRecord,
    campaign_roofline,
    write_campaign_record,
)
from kernelarc.schema import utc_now
from kernelarc.schema.coordination import TeamMember

logger = logging.getLogger(__name__)


@dataclass
class AssembledCampaign:
    """Everything a campaign runs with, built by `assemble_campaign` before any agent starts."""

    cfg: CampaignConfig
    run_dir: Path
    problem: Problem
    team: list[Agent]
    executor: Executor
    """Prepared (every slot's first runner started); closed by `run_assembled`."""
    device: str
    ceiling: ResolvedCeiling
    coordinator: Coordinator
    record: CampaignRecord
    """campaign.json as written at the start (a resume's, with its earlier sessions)."""
    log: AttemptLog
    state: CampaignState
    restored: int
    """Attempts restored from an earlier session (not this process's throughput)."""


def assemble_campaign(
    cfg: CampaignConfig, run_dir: Path, team: list[Agent] | None = None
) -> AssembledCampaign:
    """Build the campaign: problem, team, executor (prepared), the run dir's problem copy, the
    roofline ceilings, the coordinator, campaign.json and the attempt log, and, with
    `cfg.resume`, everything an earlier session left (restore.py). Nothing is evaluated.

    Raises:
        ConfigError: the problem, device or team cannot be set up, or the run dir to resume is
            not one; the executor is closed again when anything after it fails.
    """
    resuming = cfg.resume is not None
    if resuming:
        check_resume_dir(cfg, run_dir)
    # The time budget starts now: set-up counts (a resume goes on from the time it had used).
    clock = TimeBudget(cfg.budget.time_s, time_used_before(run_dir) if resuming else 0.0)
    problem = resolve_problem(cfg.problem, cfg.workloads)
    kinds = [""] * len(team) if team is not None else [spec.kind for spec in cfg.agents.team]
    team = team if team is not None else make_team(list(cfg.agents.team), cfg.seed, llm=cfg.llm)
    executor = make_executor(
        cfg.executor, cfg.sandbox, cfg.device, cfg.budget.max_parallel, resolve_device
    )
    try:
        return _assemble_with(cfg, run_dir, problem, team, kinds, executor, clock)
    except BaseException:
        executor.close()  # its warm sandboxes, Docker containers or Ray actors
        raise


def _assemble_with(
    cfg: CampaignConfig,
    run_dir: Path,
    problem: Problem,
    team: list[Agent],
    kinds: list[str],
    executor: Executor,
    clock: TimeBudget,
) -> AssembledCampaign:
    resuming = cfg.resume is not None
    device = executor.device
    run_dir.mkdir(parents=True, exist_ok=True)
    problem_copy = run_dir / PROBLEM_DIR
    if not (resuming and (problem_copy / "definition.json").is_file()):
        _copy_problem(problem, problem_copy, cfg.workloads)
    # Ceilings before any candidate runs: measured on an idle GPU (cached per model/driver).
    ceiling = resolve_ceiling(cfg.guard.roofline, device, cfg.sandbox.gpu)
    if ceiling.note:
        logger.warning("roofline ceilings: %s", ceiling.note)
    # Every slot's first runner starts now, not on its first candidate's path: the same device,
    # timeout and problem dir every evaluation below uses (`_request`, `_evaluate`).
    executor.prepare(timeout_s=cfg.eval.timeout_s, problem_dir=str(problem.path.resolve()))
    coordinator = Coordinator(cfg.coordination, problem, device, team, run_dir)
    record = CampaignRecord(
        name=cfg.name,
        problem=problem.name,
        problem_dir=str(problem_copy),
        source_problem_dir=str(problem.path.resolve()),
        workloads=cfg.workloads,
        device=device,
        seed=cfg.seed,
        started_at=utc_now(),
        coordination=coordinator.settings(cfg.guard.enabled and cfg.coordination.guard),
        team=[
            TeamMember(
                name=agent.name,
                strategy=agent.strategy,
                kind=kind,
                model=getattr(agent, "model", None),
            )
            for agent, kind in zip(team, kinds, strict=True)
        ],
        roofline=campaign_roofline(problem.definition, list(problem.workloads), ceiling),
        time_budget_s=cfg.budget.time_s,
        time_used_s=round(clock.used_before_s, 3),
        deadline_at=clock.deadline_at(),
    )
    # The log first: it cuts a truncated last line (a kill mid-write) before it is read back.
    log = AttemptLog(run_dir / ATTEMPTS_FILE)
    state = CampaignState(budget=cfg.budget.candidates, roster=coordinator.roster, clock=clock)
    restored = 0
    if resuming:
        record, restored = resume_into(run_dir, record, state, coordinator, team)
    write_campaign_record(run_dir, record)
    return AssembledCampaign(
        cfg=cfg,
        run_dir=run_dir,
        problem=problem,
        team=team,
        executor=executor,
        device=device,
        ceiling=ceiling,
        coordinator=coordinator,
        record=record,
        log=log,
        state=state,
        restored=restored,
    )


def _copy_problem(problem: Problem, dest: Path, workloads: str) -> Path:
    """Keep the exact problem files with the run, so export and eval never depend on the source."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem.path / "definition.json", dest / "definition.json")
    shutil.copyfile(problem.path / workloads, dest / "workload.jsonl")
    return dest
