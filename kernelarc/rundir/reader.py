"""One reader for recorded campaigns: a run dir, or the MLflow experiment it logged to.

Place in the flow: `kernelarc report` (`report/inputs.py`) and `kernelarc export`
(`leaderboard/inputs.py`) both load campaigns here into one `CampaignSource`, and keep only their
own policy on top (the report skips empty runs and scores attempts; the exporter refuses them).
Before, each had its own loader and class, and they drifted (issue #19).

A run dir gives attempts.jsonl (the source of truth), campaign.json, config.yaml, `.hydra/`, the
ledger of what reached MLflow and the problem copy. An MLflow campaign gives its attempts from the
artifacts, its params, tags and logged SOL scores; its problem files are not artifacts, so when
the run dir named by its `kernelarc.run_dir` tag is still here the campaign is read from there
(with the MLflow ids kept), and it has no problem files otherwise.
"""

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.problems.files import Problem, load_problem
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, CONFIG_FILE, LEDGER_FILE, PROBLEM_DIR
from kernelarc.rundir.attempts_log import read_attempts
from kernelarc.rundir.run_config import flatten_config, read_choices, read_config, read_overrides
from kernelarc.rundir.run_record import CampaignRecord, read_campaign_record
from kernelarc.rundir.sync_ledger import SyncLedger
from kernelarc.schema import Attempt
from kernelarc.tracking import keys

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
    record = _record(run_dir)
    config = read_config(run_dir)
    problem, problem_error = _problem_copy(run_dir)
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


def read_experiment(tracking_uri: str, experiment: str) -> list[CampaignSource]:
    """Every campaign of an MLflow experiment, oldest first (from its run dir when it is here).

    Raises:
        ConfigError: no such experiment, or a local run dir it names is unreadable.
        TrackingError: MLflow or its artifact store failed, or an artifact is invalid.
    """
    # Imported here: mlflow costs a second and readers of run dirs do not need it.
    from kernelarc.tracking.mlflow_reader import read_experiment as read_mlflow

    out = []
    for run in read_mlflow(tracking_uri, experiment):
        run_dir = Path(run.run_dir) if run.run_dir else None
        if run_dir is not None and (run_dir / ATTEMPTS_FILE).is_file():
            local = read_run_dir(run_dir)
            out.append(
                replace(
                    local,
                    mlflow_run_id=run.run_id,
                    tracking_uri=tracking_uri,
                    experiment=experiment,
                )
            )
            continue
        attempts = tuple(sorted(run.attempts, key=lambda a: a.index))
        sha = hashlib.sha256(run.config_yaml.encode()).hexdigest() if run.config_yaml else None
        # A run dir still here but without its attempts.jsonl: its problem copy and record.
        problem, problem_error, record = None, "", None
        if run_dir is not None and run_dir.is_dir():
            problem, problem_error = _problem_copy(run_dir)
            record = _record(run_dir)
        out.append(
            CampaignSource(
                label=f"mlflow:{experiment}/{run.run_id}",
                attempts=attempts,
                problem_name=attempts[0].problem if attempts else run.tags.get(keys.PROBLEM, ""),
                seed=run.params.get("seed", run.tags.get(keys.SEED, "")),
                config=dict(run.params),
                overrides=parse_overrides(run.tags.get(keys.OVERRIDES, "").split()),
                choices={
                    k.removeprefix(keys.CHOICE_PREFIX): v
                    for k, v in run.tags.items()
                    if k.startswith(keys.CHOICE_PREFIX)
                },
                config_sha256=sha,
                record=record,
                problem=problem,
                problem_error=problem_error,
                sol_scores=dict(run.sol_scores),
                recorded_run_dir=run.run_dir or "",
                mlflow_run_id=run.run_id,
                tracking_uri=tracking_uri,
                experiment=experiment,
            )
        )
    return out


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """Hydra overrides as key to value (`+key=v` and `++key=v` as `key`; deletions dropped)."""
    out: dict[str, str] = {}
    for item in overrides:
        if "=" not in item or item.startswith("~"):
            continue
        key, value = item.split("=", 1)
        out[key.lstrip("+")] = value
    return out


def _record(run_dir: Path) -> CampaignRecord | None:
    """campaign.json (None when the run has none yet); a ConfigError naming the run when it
    cannot be read."""
    if not (run_dir / CAMPAIGN_FILE).is_file():
        return None
    try:
        return read_campaign_record(run_dir)
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc


def _problem_copy(run_dir: Path) -> tuple[Problem | None, str]:
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
