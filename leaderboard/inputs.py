"""What the exporter reads: campaign run dirs or an MLflow experiment, as CampaignSources.

Place in the flow: `kernelarc export` loads inputs here, `leaderboard.export` plans and writes.
The reading is `kernelarc.rundir.reader`'s (run dirs) and `kernelarc.tracking.experiment_source`'s
(MLflow), shared with `kernelarc report`; this module adds the exporter's policy: a campaign with
no attempt, or with an unreadable problem copy, is an error; one without problem files is
exported without them (a warning). An MLflow campaign's problem files are not artifacts: they
come from the run dir named by the parent run's `kernelarc.run_dir` tag when that dir still
exists.
"""

import logging
from collections.abc import Sequence
from pathlib import Path

from kernelarc.errors import ConfigError
from kernelarc.problems.files import Problem
from kernelarc.rundir import ATTEMPTS_FILE, PROBLEM_DIR
from kernelarc.rundir.reader import CampaignSource, read_run_dir
from kernelarc.schema import Definition
from kernelarc.tracking.experiment_source import read_experiment

logger = logging.getLogger(__name__)


def load_run_dirs(run_dirs: Sequence[Path]) -> list[CampaignSource]:
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


def load_run_dir(run_dir: Path) -> CampaignSource:
    """Load one campaign run dir (see load_run_dirs)."""
    source = _exportable(read_run_dir(run_dir))
    if source.problem is None:
        logger.warning(
            "%s: no %s/definition.json; exporting without problem files", run_dir, PROBLEM_DIR
        )
    return source


def load_experiment(tracking_uri: str, experiment: str) -> list[CampaignSource]:
    """Load every campaign of an MLflow experiment (oldest first).

    Raises:
        ConfigError: the experiment is missing or has no campaign, or a campaign has no attempt.
        TrackingError: MLflow or its artifact store failed, or an artifact is invalid.
    """
    campaigns = read_experiment(tracking_uri, experiment)
    if not campaigns:
        msg = f"MLflow experiment {experiment!r} at {tracking_uri} has no campaign run"
        raise ConfigError(msg)
    for campaign in campaigns:
        _exportable(campaign)
        if campaign.run_dir is None and campaign.problem is None:
            logger.warning(
                "%s: the problem files are not MLflow artifacts and the run dir %s is gone; "
                "exporting without problem/ (no --verify, no roofline T_SOL unless recorded)",
                campaign.label,
                campaign.recorded_run_dir or "(none recorded)",
            )
    return campaigns


def _exportable(source: CampaignSource) -> CampaignSource:
    """`source`, or a ConfigError when it has no attempt or an unreadable problem copy."""
    if not source.attempts and source.mlflow_run_id is not None and source.run_dir is None:
        msg = f"{source.label}: empty run: no attempt artifacts (attempts/*/attempt.json)"
        raise ConfigError(msg)
    if not source.attempts:
        msg = (
            f"{source.label}: empty run: no attempts recorded in {ATTEMPTS_FILE}; nothing to export"
        )
        raise ConfigError(msg)
    if source.problem_error:
        msg = f"{source.label}: unreadable run: {source.problem_error}"
        raise ConfigError(msg)
    return source


def check_definitions(inputs: Sequence[CampaignSource]) -> dict[str, Problem]:
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


def _differing_fields(a: Definition, b: Definition) -> list[str]:
    left, right = a.model_dump(mode="json"), b.model_dump(mode="json")
    return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))
