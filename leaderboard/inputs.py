"""What the exporter reads: campaign run dirs or an MLflow experiment, as CampaignInputs.

Place in the flow: `kernelarc export` loads inputs here, `leaderboard.export` plans and writes.
A run dir gives `attempts.jsonl` (the source of truth), `campaign.json`, `config.yaml` and
`problem/`. An MLflow campaign gives its attempts from the artifacts; its problem files are not
artifacts, so they come from the run dir named by the parent run's `kernelarc.run_dir` tag when
that dir still exists, and are missing otherwise.
"""

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelarc.campaign.run_record import CampaignRecord, read_campaign_record
from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.problems.files import Problem, load_problem
from kernelarc.rundir import ATTEMPTS_FILE, CAMPAIGN_FILE, CONFIG_FILE, PROBLEM_DIR
from kernelarc.schema import Attempt, Definition
from kernelarc.tracking.attempts_log import read_attempts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CampaignInput:
    """One campaign, from a run dir or from MLflow."""

    label: str
    """The run dir as given, or `mlflow:<experiment>/<run id>`."""
    attempts: tuple[Attempt, ...]
    """Every attempt, by index."""
    problem: Problem | None
    """The problem files (None: not available)."""
    record: CampaignRecord | None = None
    """campaign.json (None: not available)."""
    config_sha256: str | None = None
    """sha256 of the resolved config.yaml (None: not available)."""
    mlflow_run_id: str | None = None
    """The parent run id, for MLflow inputs."""


def load_run_dirs(run_dirs: Sequence[Path]) -> list[CampaignInput]:
    """Load campaign run dirs, in the order given.

    Raises:
        ConfigError: a dir is missing, is not a run dir, records no attempt, or has an unreadable
            attempts.jsonl, campaign.json or problem/; the message names the dir.
    """
    if not run_dirs:
        msg = "no run dir given; pass one or more campaign run dirs or --experiment NAME"
        raise ConfigError(msg)
    seen: set[Path] = set()
    inputs = []
    for run_dir in run_dirs:
        if run_dir.resolve() in seen:
            msg = f"{run_dir}: given twice; pass each run dir once"
            raise ConfigError(msg)
        seen.add(run_dir.resolve())
        inputs.append(load_run_dir(run_dir))
    return inputs


def load_run_dir(run_dir: Path) -> CampaignInput:
    """Load one campaign run dir (see load_run_dirs)."""
    if not run_dir.is_dir():
        msg = f"{run_dir}: run dir not found; pass the dir of a KernelArc campaign run"
        raise ConfigError(msg)
    log = run_dir / ATTEMPTS_FILE
    if not log.is_file():
        msg = f"{run_dir}: not a KernelArc run dir (no {ATTEMPTS_FILE})"
        raise ConfigError(msg)
    try:
        attempts = read_attempts(log)
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc
    if not attempts:
        msg = f"{run_dir}: empty run: no attempts recorded in {ATTEMPTS_FILE}; nothing to export"
        raise ConfigError(msg)
    return CampaignInput(
        label=str(run_dir),
        attempts=tuple(sorted(attempts, key=lambda a: a.index)),
        problem=_load_problem(run_dir),
        record=_load_record(run_dir),
        config_sha256=_sha256(run_dir / CONFIG_FILE),
    )


def load_experiment(tracking_uri: str, experiment: str) -> list[CampaignInput]:
    """Load every campaign of an MLflow experiment (oldest first).

    Raises:
        ConfigError: the experiment is missing or has no campaign, or a campaign has no attempt.
        TrackingError: MLflow or its artifact store failed, or an artifact is invalid.
    """
    # Imported here: mlflow costs a second and most exports never need it.
    from kernelarc.tracking.mlflow_reader import read_experiment

    campaigns = read_experiment(tracking_uri, experiment)
    if not campaigns:
        msg = f"MLflow experiment {experiment!r} at {tracking_uri} has no campaign run"
        raise ConfigError(msg)
    inputs = []
    for run in campaigns:
        label = f"mlflow:{experiment}/{run.run_id}"
        if not run.attempts:
            msg = f"{label}: empty run: no attempt artifacts (attempts/*/attempt.json)"
            raise ConfigError(msg)
        run_dir = Path(run.run_dir) if run.run_dir else None
        problem = record = None
        if run_dir is not None and run_dir.is_dir():
            problem, record = _load_problem(run_dir), _load_record(run_dir)
        else:
            logger.warning(
                "%s: the problem files are not MLflow artifacts and the run dir %s is gone; "
                "exporting without problem/ (no --verify, no roofline T_SOL unless recorded)",
                label,
                run.run_dir,
            )
        sha = hashlib.sha256(run.config_yaml.encode()).hexdigest() if run.config_yaml else None
        inputs.append(
            CampaignInput(
                label=label,
                attempts=tuple(run.attempts),
                problem=problem,
                record=record,
                config_sha256=sha,
                mlflow_run_id=run.run_id,
            )
        )
    return inputs


def check_definitions(inputs: Sequence[CampaignInput]) -> dict[str, Problem]:
    """The problem files per definition name, from the first input that has them.

    Raises:
        ConfigError: two inputs hold different definitions under one name; the message names
            both inputs and the fields that differ.
    """
    found: dict[str, tuple[Problem, str]] = {}
    for campaign in inputs:
        if campaign.problem is None:
            continue
        name = campaign.problem.name
        if name not in found:
            found[name] = (campaign.problem, campaign.label)
            continue
        first, where = found[name]
        if first.definition != campaign.problem.definition:
            fields = _differing_fields(first.definition, campaign.problem.definition)
            msg = (
                f"conflicting definitions of {name!r}: {where} and {campaign.label} differ in "
                f"{', '.join(fields)}; export runs of different definitions separately or "
                "rename one problem"
            )
            raise ConfigError(msg)
    return {name: problem for name, (problem, _) in found.items()}


def _load_problem(run_dir: Path) -> Problem | None:
    folder = run_dir / PROBLEM_DIR
    if not (folder / "definition.json").is_file():
        logger.warning(
            "%s: no %s/definition.json; exporting without problem files", run_dir, PROBLEM_DIR
        )
        return None
    try:
        return load_problem(folder)
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc


def _load_record(run_dir: Path) -> CampaignRecord | None:
    if not (run_dir / CAMPAIGN_FILE).is_file():
        return None
    try:
        return read_campaign_record(run_dir)
    except ConfigError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"{path}: unreadable run config ({exc})"
        raise ConfigError(msg) from exc


def _differing_fields(a: Definition, b: Definition) -> list[str]:
    left, right = a.model_dump(mode="json"), b.model_dump(mode="json")
    return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))
