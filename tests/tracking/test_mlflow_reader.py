"""read_experiment against a real SQLite MLflow store written by the real MlflowTracker."""

import tempfile
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelarc.errors import ConfigError, TrackingError
from kernelarc.report.sol_score import SolScorer
from kernelarc.schema import Attempt, EvalStatus
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_reader import read_experiment
from kernelarc.tracking.mlflow_tracker import MlflowTracker
from tests.tracking.conftest import MakeAttempt


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One store for the module (creating its tables takes seconds); tests use own experiments."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow_reader')}/mlflow.db"


def _campaign(
    uri: str, experiment: str, run_dir: str, attempts: list[Attempt], config: str
) -> MlflowTracker:
    tracker = MlflowTracker(uri, experiment, sol_score=SolScorer())
    tracker.start_campaign(
        experiment, params={"seed": "0"}, tags={keys.RUN_DIR: run_dir}, config_yaml=config
    )
    for attempt in attempts:
        tracker.log_attempt(attempt)
    tracker.finish("FINISHED", {})
    return tracker


def test_reads_every_campaign_with_its_attempts(sqlite_uri: str, make_attempt: MakeAttempt) -> None:
    first = [
        make_attempt(0, agent="tiler"),
        make_attempt(1, agent="fuser", status=EvalStatus.INCORRECT_NUMERICAL),
        make_attempt(
            2, agent="tiler", speedup=2.0, extra_sources={"lib/a.py": "A = 1\n"}, roofline_ms=0.5
        ),
    ]
    second = [make_attempt(0, agent="ghost", status="INFRA_ERROR")]
    t1 = _campaign(sqlite_uri, "reader", "/runs/one", first, "seed: 0\n")
    t2 = _campaign(sqlite_uri, "reader", "/runs/two", second, "seed: 1\n")

    runs = read_experiment(sqlite_uri, "reader")

    assert [r.run_id for r in runs] == [t1.parent_run_id, t2.parent_run_id]
    assert runs[0].attempts == first
    assert runs[1].attempts == second
    assert [r.run_dir for r in runs] == ["/runs/one", "/runs/two"]
    assert [r.config_yaml for r in runs] == ["seed: 0\n", "seed: 1\n"]
    assert runs[0].run_name == "reader"
    assert runs[0].params == {"seed": "0"}
    assert runs[0].sol_scores == {2: 0.75}  # T_k 1 ms, reference 2 ms, bound 0.5 ms
    assert not runs[0].degraded


def test_missing_experiment(sqlite_uri: str) -> None:
    with pytest.raises(ConfigError, match="MLflow experiment 'nope' not found"):
        read_experiment(sqlite_uri, "nope")


def test_experiment_without_campaigns_is_empty(sqlite_uri: str) -> None:
    MlflowClient(tracking_uri=sqlite_uri).create_experiment("empty")
    assert read_experiment(sqlite_uri, "empty") == []


def test_invalid_attempt_artifact_names_the_run(sqlite_uri: str) -> None:
    client = MlflowClient(tracking_uri=sqlite_uri)
    exp = client.create_experiment("broken")
    parent = client.create_run(exp, tags={keys.KIND: keys.KIND_CAMPAIGN}).info.run_id
    child = client.create_run(exp, tags={keys.PARENT_RUN_ID: parent}).info.run_id
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / keys.ATTEMPT_JSON
        path.write_text('{"index": 0}')
        client.log_artifact(child, str(path), artifact_path="attempts/0000-p-broken")
    with pytest.raises(
        TrackingError, match=rf"MLflow run {child}: artifact attempts/0000-p-broken"
    ):
        read_experiment(sqlite_uri, "broken")


def test_unreachable_server_is_a_tracking_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with pytest.raises(TrackingError, match=r"MLflow at http://127.0.0.1:9: cannot look up"):
        read_experiment("http://127.0.0.1:9", "x")
