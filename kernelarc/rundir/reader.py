"""One reader for recorded campaigns: a run dir into a `CampaignSource`.

Place in the flow: `kernelarc report` (`report/inputs.py`) and `kernelarc export`
(`leaderboard/inputs.py`) both load campaigns here into one `CampaignSource`, and keep only their
own policy on top (the report skips empty runs and scores attempts; the exporter refuses them).
Before, each had its own loader and class, and they drifted (issue #19). An MLflow experiment is
read into the same `CampaignSource` one layer up, by `tracking.experiment_source` (MLflow is
tracking's; the run dir sits below it).

A run dir gives attempts.jsonl (the source of truth), campaign.json, config.yaml, `.hydra/`, the
ledger of what reached MLflow and the problem copy.
"""

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.problems.files import Problem, load_problem
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, CONFIG_FILE, LEDGER_FILE, PROBLEM_DIR
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_config import flatten_config, read_choices, read_config, read_overrides
from kernelarc.rundir.run_record import CampaignRecord, read_campaign_record
from kernelarc.rundir.sync_ledger import SyncLedger
from kernelarc.schema import Attempt

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CampaignSource:
    """One recorded campaign."""

    label: str
    """The run dir as given, or `mlflow:<experiment>/<run id>`."""
    attempts: tuple[Attempt, ...]
    """Every attempt, by index."""
    problem_name: str
    """The definition's name ('' when nothing says)."""
    seed: str
    """The campaign seed ('' when unknown)."""
    config: dict[str, str]
    """The flattened resolved config (MLflow params)."""
    overrides: dict[str, str] = field(default_factory=dict)
    """The job's Hydra overrides, key to value."""
    choices: dict[str, str] = field(default_factory=dict)
    """Hydra's config group choices (`guard: default`)."""
    config_sha256: str | None = None
    """sha256 of the resolved config.yaml (None: not available)."""
    run_dir: Path | None = None
    """The run dir, when it is here."""
    record: CampaignRecord | None = None
    """campaign.json (None: not available)."""
    problem: Problem | None = None
    """The run dir's problem copy (None: not here, or unreadable: see `problem_error`)."""
    problem_error: str = ""
    """Why the run dir's problem copy could not be read ('' when it was, or there is none)."""
    recorded_run_dir: str = ""
    """An MLflow campaign read from MLflow (its run dir is gone, or lost its attempts.jsonl): the
    run dir it recorded when it ran; its problem copy and record are read from there if it is
    still a dir."""
    sol_scores: dict[int, float | None] = field(default_factory=dict)
    """SOL score per attempt index as MLflow logged it (a run dir's are computed by whoever
    needs them, `report.sol_score.SolScorer`)."""
    mlflow_run_id: str | None = None
    """The campaign's parent run, when known."""
    tracking_uri: str | None = None
    """The store holding the parent run, when known."""
    experiment: str | None = None
    """Its experiment name, when known."""


def read_run_dir(run_dir: Path) -> CampaignSource:
    """One campaign from its run dir.

    Raises:
        ConfigError: the dir is missing, holds no attempts.jsonl, or its attempts.jsonl or
            campaign.json is unreadable; the message names the dir.
    """
    if not run_dir.is_dir():
        msg = f"{run_dir}: run dir not found; pass the dir of a KernelArc campaign run"
        raise ConfigError(msg)
    log = run_dir / ATTEMPTS_FILE
    if not log.is_file():
        msg = f"{run_dir}: not a KernelArc run dir (no {ATTEMPTS_FILE})"
        raise ConfigError(msg)
    try:
        attempts = tuple(sorted(read_attempts(log), key=lambda a: a.index))
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc
    record = read_record(run_dir)
    config = read_config(run_dir)
    problem, problem_error = read_problem_copy(run_dir)
    ledger = SyncLedger(run_dir / LEDGER_FILE)
    entry = ledger.campaign()
    uri = entry.uri if entry is not None and entry.uri else None
    view = ledger.view(uri) if uri else None
    name = record.problem if record is not None else str(config.get("problem", ""))
    seed = record.seed if record is not None else config.get("seed", "")
    return CampaignSource(
        label=str(run_dir),
        attempts=attempts,
        problem_name=attempts[0].problem if attempts else name,
        seed=str(seed),
        config=flatten_config(config),
        overrides=parse_overrides(read_overrides(run_dir)),
        choices=read_choices(run_dir),
        config_sha256=_sha256(run_dir / CONFIG_FILE),
        run_dir=run_dir,
        record=record,
        problem=problem,
        problem_error=problem_error,
        mlflow_run_id=view.parent_run_id if view else None,
        tracking_uri=uri if view and view.parent_run_id else None,
        experiment=entry.experiment if entry is not None else None,
    )


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """Hydra overrides as key to value (`+key=v` and `++key=v` as `key`; deletions dropped)."""
    out: dict[str, str] = {}
    for item in overrides:
        if "=" not in item or item.startswith("~"):
            continue
        key, value = item.split("=", 1)
        out[key.lstrip("+")] = value
    return out


def read_record(run_dir: Path) -> CampaignRecord | None:
    """campaign.json (None when the run has none yet); a ConfigError naming the run when it
    cannot be read. Public for `tracking.experiment_source`, which reads the record of an MLflow
    campaign's run dir that lost its attempts.jsonl."""
    if not (run_dir / CAMPAIGN_FILE).is_file():
        return None
    try:
        return read_campaign_record(run_dir)
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc


def read_problem_copy(run_dir: Path) -> tuple[Problem | None, str]:
    """The run dir's problem copy and '' ((None, '') when it has none; (None, why) when it is
    unreadable, so a caller decides whether that is fatal). Public for
    `tracking.experiment_source`: an MLflow campaign's problem files are not artifacts."""
    folder = run_dir / PROBLEM_DIR
    if not (folder / "definition.json").is_file():
        return None, ""
    try:
        return load_problem(folder), ""
    except KernelarcError as exc:
        return None, str(exc)


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"{path}: unreadable run config ({exc})"
        raise ConfigError(msg) from exc
