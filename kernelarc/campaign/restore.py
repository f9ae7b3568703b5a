"""Resume: what a killed campaign's run dir gives back to the campaign loop.

Place in the flow: `assemble_campaign` with `resume` set reads the run dir's attempts.jsonl through
`recorded_attempts` (a truncated last line, a kill mid-write, is dropped), rebuilds the shared
`CampaignState` with `restore_state`, then hands the same attempts to the coordinator (board and
plateau counters) and to every agent that has a `restore` hook. attempts.jsonl is the only
source: an attempt that was being evaluated when the process died is not in it, so its proposal
is free to be proposed and evaluated again, and it is counted once. The wall time the campaign
had used (campaign.json `time_used_s`) is what its time budget starts from (`time_used_before`).
"""

import logging
from collections.abc import Sequence
from pathlib import Path

from kernelarc.agents import Agent, ResumableAgent
from kernelarc.campaign.coordinator import Coordinator
from kernelarc.campaign.state import CampaignState
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError, TrackingError
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, CONFIG_FILE
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_record import CampaignRecord, read_campaign_record
from kernelarc.schema import Attempt, EvalStatus, Verdict, utc_now

logger = logging.getLogger(__name__)


def check_resumable(run_dir: Path, *, config: bool = True) -> None:
    """Fail unless `run_dir` is a campaign run dir: attempts.jsonl or campaign.json (a campaign
    killed before its first attempt has only the latter), and config.yaml when `config` (the
    command line runs with it; `run_campaign` is handed its config).

    Raises:
        ConfigError: names the path, what is missing and the fix.
    """
    fix = (
        "resume=RUN_DIR (or `kernelarc resume RUN_DIR`) takes the run dir of a campaign that "
        "was stopped, e.g. outputs/<name>/<time>, the folder that holds its config.yaml and "
        "attempts.jsonl"
    )
    if not run_dir.is_dir():
        msg = f"resume={run_dir}: no such directory; {fix}"
        raise ConfigError(msg)
    missing = [CONFIG_FILE] if config and not (run_dir / CONFIG_FILE).is_file() else []
    if not (run_dir / ATTEMPTS_FILE).is_file() and not (run_dir / CAMPAIGN_FILE).is_file():
        missing.append(f"{ATTEMPTS_FILE} (or {CAMPAIGN_FILE})")
    if missing:
        msg = f"resume={run_dir}: not a campaign run dir, {' and '.join(missing)} missing; {fix}"
        raise ConfigError(msg)


def recorded_attempts(run_dir: Path) -> list[Attempt]:
    """The attempts of a run dir's attempts.jsonl, oldest first ([] when there is none yet).

    Raises:
        ConfigError: a complete line is not an Attempt, or the indices are not 0..N-1 in order
            (the file was edited or mixes two campaigns).
    """
    path = run_dir / ATTEMPTS_FILE
    if not path.is_file():
        return []
    try:
        attempts = read_attempts(path)
    except TrackingError as exc:
        msg = f"cannot resume from {run_dir}: {exc}"
        raise ConfigError(msg) from exc
    indices = [a.index for a in attempts]
    if indices != list(range(len(attempts))):
        msg = (
            f"cannot resume from {path}: attempt indices are {indices[:20]}, not 0..N-1 in "
            "order; the file was edited or mixes two campaigns (restore it from a backup)"
        )
        raise ConfigError(msg)
    return attempts


def restore_state(state: CampaignState, attempts: Sequence[Attempt]) -> None:
    """Replay recorded attempts into a fresh `state` as the loop recorded them: the budget they
    took, their proposal ids, the incumbent (the last NEW_BEST), failures, the infrastructure
    failures in a row at the end, guard evaluations and drafts."""
    for attempt in attempts:
        state.attempts.append(attempt)
        state.seen_ids.add(attempt.proposal.id)
        if attempt.verdict == Verdict.NEW_BEST:
            state.best = attempt
        if attempt.status != EvalStatus.PASSED:
            state.failures += 1
        if attempt.traces:
            state.infra_failures_in_a_row = 0
        elif attempt.status == "INFRA_ERROR":
            state.infra_failures_in_a_row += 1
        state.guard_evaluations += attempt.guard.extra_evaluations if attempt.guard else 0
        state.drafts += int(attempt.proposal.draft)
    state.reserved = len(state.attempts)


def check_resume_dir(cfg: CampaignConfig, run_dir: Path) -> None:
    """`run_dir` must be the campaign run dir `cfg.resume` names.

    Raises:
        ConfigError: it is not a run dir, or not the one `cfg.resume` names.
    """
    assert cfg.resume is not None
    check_resumable(run_dir, config=False)
    if Path(cfg.resume).resolve() != run_dir.resolve():
        msg = (
            f"resume={cfg.resume} but the campaign would write to {run_dir}; a resumed campaign "
            "writes into the run dir it resumes (the CLI sets hydra.run.dir to it)"
        )
        raise ConfigError(msg)


def time_used_before(run_dir: Path) -> float:
    """The wall time a campaign being resumed had used (campaign.json; 0 when unreadable)."""
    try:
        return read_campaign_record(run_dir).time_used_s
    except ConfigError:
        return 0.0


def resume_into(
    run_dir: Path,
    fresh: CampaignRecord,
    state: CampaignState,
    coordinator: Coordinator,
    team: Sequence[Agent],
) -> tuple[CampaignRecord, int]:
    """Take a killed campaign's run dir back into a fresh state, coordinator and team; the
    campaign.json to write (recorded start, one more resume time) and the attempts restored."""
    attempts = recorded_attempts(run_dir)
    restore_state(state, attempts)
    coordinator.restore(attempts)
    if coordinator.board is not None:
        state.conclusions = len(coordinator.board.conclusions())
        state.retracted = sum(c.retracted for c in coordinator.board.conclusions())
    for agent in team:
        if isinstance(agent, ResumableAgent):
            agent.restore([a for a in attempts if a.proposal.agent == agent.name])
    logger.info(
        "resuming %s: %d of %d candidates done, best %s",
        run_dir,
        len(attempts),
        state.budget,
        f"{state.best_speedup:.3f}x" if state.best_speedup else "none",
    )
    return _resumed_record(run_dir, fresh), len(attempts)


def _resumed_record(run_dir: Path, fresh: CampaignRecord) -> CampaignRecord:
    """campaign.json of a resumed campaign: the recorded start, one more resume time."""
    try:
        recorded = read_campaign_record(run_dir)
    except ConfigError as exc:
        logger.warning("resume: %s; writing a new campaign.json", exc)
        return fresh.model_copy(update={"resumed_at": [utc_now()]})
    return fresh.model_copy(
        update={
            "started_at": recorded.started_at,
            "resumed_at": [*recorded.resumed_at, utc_now()],
        }
    )
