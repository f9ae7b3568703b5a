"""Log an ablation report's folder to MLflow as a run of its own (`kernelarc.kind = report`).

Place in the flow: `kernelarc report` calls `log_report_run` after writing the report; the MLflow
UI then shows report.html (inline) and the PNGs next to the campaigns they compare.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

# Telemetry is read when mlflow is imported, so this must come first.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.tracking import MlflowClient

from kernelarc.errors import TrackingError
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_payload import (
    MAX_TAG_VALUE,
    clean_tags,
    cut,
    default_artifact_location,
    ensure_experiment,
)
from kernelarc.tracking.mlflow_tracker_calls import BACKEND_ERRORS

REPORT_RUNS_TAG = "kernelarc.report_runs"
"""Space-separated parent run ids of the campaigns a report compares."""


def log_report_run(
    tracking_uri: str,
    experiment: str,
    report_dir: Path,
    run_name: str,
    campaign_run_ids: Sequence[str],
    tags: Mapping[str, str] | None = None,
) -> str:
    """Create a FINISHED run in `experiment` holding `report_dir` under `report/`; its run id.

    Raises:
        TrackingError: the store failed; the message names it.
    """
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        location = default_artifact_location(tracking_uri)
        experiment_id = ensure_experiment(client, experiment, location)
        run_tags = {
            **clean_tags(tags or {}),
            keys.KIND: keys.KIND_REPORT,
            REPORT_RUNS_TAG: cut(" ".join(campaign_run_ids), MAX_TAG_VALUE),
        }
        run = client.create_run(experiment_id, tags=run_tags, run_name=run_name)
        run_id: str = run.info.run_id
        client.log_artifacts(run_id, str(report_dir), artifact_path=keys.REPORT_DIR)
        client.set_terminated(run_id, status="FINISHED")
    except BACKEND_ERRORS as exc:
        msg = (
            f"MLflow at {tracking_uri}: cannot log the report to experiment {experiment!r} "
            f"({type(exc).__name__}: {exc}); the report files are in {report_dir}"
        )
        raise TrackingError(msg) from exc
    return run_id
