"""Which MLflow store a `kernelarc` command talks to when none is named, and how long it waits
for one that does not answer.

Place in the flow: `campaign`, `sync`, `report` and `export --experiment` all default to the same
store (sqlite in the launch directory) and all cap MLflow's HTTP retries; the rule lives here so
the command modules share it without importing each other. Nothing here imports mlflow.
"""

import os
from pathlib import Path


def local_mlflow_uri() -> str:
    """The campaign's default store: sqlite in the current directory (Hydra does not change the
    working directory)."""
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def env_or_local_mlflow_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the campaign's default store: sqlite in the current dir."""
    return os.environ.get("MLFLOW_TRACKING_URI") or local_mlflow_uri()


def limit_mlflow_retries() -> None:
    """A dead tracking server must cost seconds, not minutes of retries (unless set already)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
