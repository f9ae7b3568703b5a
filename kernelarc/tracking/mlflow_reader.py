"""Read campaigns back from MLflow: each parent run's attempts, from its agents' artifacts.

Place in the flow: `kernelarc export --experiment NAME` calls `read_experiment`, and the
leaderboard exporter treats each returned campaign like a run dir. What `MlflowTracker` wrote is
read back: the parent run (tag `kernelarc.kind = campaign`, tag `kernelarc.run_dir`, artifact
`config.yaml`) and its child runs' `attempts/<index>-<proposal_id>/attempt.json`. The problem
files are not MLflow artifacts; the caller finds them through the run-dir tag.
Like every module that imports mlflow, it is a `tracking/mlflow_*.py` (ruff's banned-api rule).
"""

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Experiment, Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from pydantic import ValidationError

from kernelarc.errors import ConfigError, TrackingError
from kernelarc.schema import Attempt
from kernelarc.tracking import keys

logger = logging.getLogger(__name__)

_PAGE = 1000
_BACKEND_ERRORS = (MlflowException, OSError)


@dataclass(frozen=True)
class CampaignRun:
    """One campaign as MLflow holds it."""

    run_id: str
    """The parent run's id."""
    run_name: str
    """The parent run's name (the campaign name)."""
    tags: dict[str, str]
    """The parent run's tags."""
    attempts: list[Attempt]
    """Every attempt found in the child runs' artifacts, by index."""
    config_yaml: str | None
    """The resolved config artifact, if logged."""
    params: dict[str, str] = field(default_factory=dict)
    """The parent run's params (the flattened config)."""
    sol_scores: dict[int, float] = field(default_factory=dict)
    """`eval/sol_score` per attempt index, as logged (attempts without one are absent)."""

    @property
    def run_dir(self) -> str | None:
        """The campaign's run dir as recorded when it ran (it may no longer exist)."""
        return self.tags.get(keys.RUN_DIR)

    @property
    def degraded(self) -> bool:
        """True when the tracker recorded failed logging calls (attempts may be missing)."""
        return self.tags.get(keys.TRACKING_DEGRADED) == "true"


def read_experiment(tracking_uri: str, experiment: str) -> list[CampaignRun]:
    """Every campaign (parent run) of an experiment, oldest first, with its attempts.

    Raises:
        ConfigError: the experiment does not exist.
        TrackingError: the tracking server or artifact store failed, or an attempt.json artifact
            is not a valid Attempt; the message names the run and the artifact.
    """
    client = MlflowClient(tracking_uri=tracking_uri)
    exp = _get_experiment(client, tracking_uri, experiment)
    if exp is None:
        msg = (
            f"MLflow experiment {experiment!r} not found at {tracking_uri}; pass the campaign "
            "name (the experiment name) and the store the campaign logged to (--tracking-uri)"
        )
        raise ConfigError(msg)
    kind = f"tags.`{keys.KIND}` = '{keys.KIND_CAMPAIGN}'"
    parents = _search(client, exp.experiment_id, kind)
    parents.sort(key=lambda r: (r.info.start_time or 0, r.info.run_id))
    return [_read_campaign(client, exp.experiment_id, run) for run in parents]


def _get_experiment(client: MlflowClient, uri: str, name: str) -> Experiment | None:
    try:
        return client.get_experiment_by_name(name)
    except _BACKEND_ERRORS as exc:
        msg = f"MLflow at {uri}: cannot look up experiment {name!r} ({exc})"
        raise TrackingError(msg) from exc


def _search(client: MlflowClient, experiment_id: str, filter_string: str) -> list[Run]:
    runs: list[Run] = []
    token: str | None = None
    try:
        while True:
            page = client.search_runs(
                [experiment_id], filter_string=filter_string, max_results=_PAGE, page_token=token
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs
    except _BACKEND_ERRORS as exc:
        msg = f"MLflow: cannot search runs of experiment {experiment_id} ({exc})"
        raise TrackingError(msg) from exc


def _read_campaign(client: MlflowClient, experiment_id: str, parent: Run) -> CampaignRun:
    run_id = parent.info.run_id
    children = _search(client, experiment_id, f"tags.`{keys.PARENT_RUN_ID}` = '{run_id}'")
    by_index: dict[int, Attempt] = {}
    sol_scores: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="kernelarc-mlflow-read-") as tmp:
        for child in sorted(children, key=lambda r: r.info.run_id):
            sol_scores.update(_metric_by_step(client, child.info.run_id, keys.EVAL_SOL_SCORE))
            for attempt in _child_attempts(client, child.info.run_id, Path(tmp)):
                previous = by_index.setdefault(attempt.index, attempt)
                if previous != attempt:
                    msg = (
                        f"MLflow run {run_id}: two different attempts with index "
                        f"{attempt.index} ({previous.proposal.id}, {attempt.proposal.id})"
                    )
                    raise TrackingError(msg)
        config = _read_text(client, run_id, keys.CONFIG_YAML, Path(tmp))
    tags = dict(parent.data.tags)
    run = CampaignRun(
        run_id=run_id,
        run_name=parent.info.run_name or "",
        tags=tags,
        attempts=[by_index[i] for i in sorted(by_index)],
        config_yaml=config,
        params=dict(parent.data.params),
        sol_scores=sol_scores,
    )
    if run.degraded:
        logger.warning(
            "MLflow run %s is marked %s: some attempts may be missing from its artifacts",
            run_id,
            keys.TRACKING_DEGRADED,
        )
    return run


def _metric_by_step(client: MlflowClient, run_id: str, key: str) -> dict[int, float]:
    try:
        return {m.step: m.value for m in client.get_metric_history(run_id, key)}
    except _BACKEND_ERRORS as exc:
        msg = f"MLflow run {run_id}: cannot read metric {key} ({exc})"
        raise TrackingError(msg) from exc


def _child_attempts(client: MlflowClient, run_id: str, tmp: Path) -> list[Attempt]:
    dest = tmp / run_id
    dest.mkdir()
    try:
        listed = client.list_artifacts(run_id, keys.ATTEMPTS_DIR)
        if not listed:
            return []
        local = Path(client.download_artifacts(run_id, keys.ATTEMPTS_DIR, str(dest)))
    except _BACKEND_ERRORS as exc:
        msg = f"MLflow run {run_id}: cannot download the {keys.ATTEMPTS_DIR}/ artifacts ({exc})"
        raise TrackingError(msg) from exc
    attempts = []
    for path in sorted(local.glob(f"*/{keys.ATTEMPT_JSON}")):
        try:
            attempts.append(Attempt.model_validate_json(path.read_bytes()))
        except ValidationError as exc:
            where = f"{keys.ATTEMPTS_DIR}/{path.parent.name}/{keys.ATTEMPT_JSON}"
            msg = f"MLflow run {run_id}: artifact {where} is not a valid Attempt ({exc})"
            raise TrackingError(msg) from exc
    return attempts


def _read_text(client: MlflowClient, run_id: str, artifact: str, tmp: Path) -> str | None:
    try:
        if not any(f.path == artifact for f in client.list_artifacts(run_id)):
            return None
        local = client.download_artifacts(run_id, artifact, str(tmp))
        return Path(local).read_text(encoding="utf-8")
    except _BACKEND_ERRORS as exc:
        msg = f"MLflow run {run_id}: cannot download {artifact} ({exc})"
        raise TrackingError(msg) from exc
