"""MlflowTracker against real MLflow stores (SQLite under tmp_path, and a real `mlflow server`).

Everything is read back with MlflowClient, as a person or a later tool would.
"""

import enum
import json
import socket
import threading
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils import validation

from kernelarc.errors import ConfigError
from kernelarc.report.sol_score import SolScorer
from kernelarc.schema import Attempt, EvalStatus, Trace, Verdict
from kernelarc.tracking import keys, make_tracker
from kernelarc.tracking.mlflow_tracker import MlflowTracker
from kernelarc.tracking.null_tracker import NullTracker

MakeAttempt = Callable[..., Attempt]
NEW_BEST = Verdict.NEW_BEST

CONFIG_YAML = "campaign:\n  name: demo\n  budget: 6\n"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite store for the module (creating its tables takes seconds); tests use their own
    experiment names."""
    return tmp_path_factory.mktemp("mlflow_store")


@pytest.fixture
def sqlite_uri(store_dir: Path) -> str:
    return f"sqlite:///{store_dir}/mlflow.db"


def _run_campaign(
    tracker: MlflowTracker, make_attempt: MakeAttempt, run_dir: Path
) -> list[Attempt]:
    tracker.start_campaign(
        "demo-2026-12-02",
        params={"campaign.budget": "6", "llm.prompt": "p" * 7000, "prices[gpt]": "1.5"},
        tags={keys.PROBLEM: "axpby_h1024", keys.RUN_DIR: str(run_dir)},
        config_yaml=CONFIG_YAML,
    )
    tracker.start_agent("tiler", "tiling")
    tracker.start_agent("fuser", "fusion")
    tracker.start_agent("tiler", "tiling")  # idempotent
    tracker.start_agent("idler", "memory")  # never proposes: no (empty) child run
    attempts = [
        make_attempt(0, agent="tiler", strategy="tiling", speedup=1.2, verdict=Verdict.NEW_BEST),
        make_attempt(1, agent="fuser", strategy="fusion", status=EvalStatus.INCORRECT_NUMERICAL),
        # A guard roofline bound of 0.5 ms: T_k 1 ms, T_b (reference) 2 ms -> SOL score 0.75.
        make_attempt(
            2,
            agent="tiler",
            strategy="tiling",
            speedup=2.0,
            latency_ms=0.5,
            verdict=NEW_BEST,
            roofline_ms=0.5,
        ),
        # Faster-looking than the incumbent but not accepted (a CHALLENGER): not the best.
        make_attempt(3, agent="fuser", strategy="fusion", speedup=2.4, verdict=Verdict.CHALLENGER),
        # An agent never announced with start_agent gets its run on its first attempt.
        make_attempt(4, agent="ghost", strategy="random", status="INFRA_ERROR"),
    ]
    for attempt in attempts:
        tracker.log_attempt(attempt)
    tracker.finish("FINISHED", {"campaign/wall_s": 12.5})
    return attempts


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _check_campaign(
    client: MlflowClient,
    tracker: MlflowTracker,
    attempts: list[Attempt],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent_id = tracker.parent_run_id
    assert parent_id is not None
    assert not tracker.degraded
    experiment = client.get_experiment_by_name(tracker.experiment_name)
    assert experiment is not None
    assert experiment.experiment_id == tracker.experiment_id
    # The MLflow UI opens it on the runs table, not on the GenAI overview.
    assert experiment.tags[keys.EXPERIMENT_KIND_TAG] == keys.EXPERIMENT_KIND

    parent = client.get_run(parent_id)
    assert parent.info.run_name == "demo-2026-12-02"
    assert parent.info.status == "FINISHED"
    assert parent.data.tags[keys.KIND] == keys.KIND_CAMPAIGN
    assert parent.data.tags[keys.PROBLEM] == "axpby_h1024"
    assert parent.data.tags[keys.BEST_ATTEMPT] == f"2-{attempts[2].proposal.id}"
    assert parent.data.tags[keys.BEST_AGENT] == "tiler"
    assert parent.data.tags[keys.BEST_STRATEGY] == "tiling"
    assert parent.data.tags[keys.HARDWARE] == "cpu"
    assert parent.data.tags[keys.CAMPAIGN_UID] == tracker.campaign_uid
    assert keys.TRACKING_DEGRADED not in parent.data.tags
    params = parent.data.params
    assert params["campaign.budget"] == "6"
    assert params["prices_gpt_"] == "1.5"
    assert len(params["llm.prompt"]) == validation.MAX_PARAM_VAL_LENGTH
    assert params["llm.prompt"].endswith("[truncated]")
    assert parent.data.metrics["campaign/wall_s"] == 12.5
    assert parent.data.metrics[keys.FINAL_BEST_SPEEDUP] == 2.0
    assert parent.data.metrics[keys.FINAL_BEST_LATENCY_MS] == 0.5
    assert parent.data.metrics[keys.FINAL_ATTEMPTS] == 5
    assert parent.data.metrics[keys.FINAL_PASSED] == 3
    assert _history(client, parent_id, keys.status_count_key("PASSED")) == [
        (0, 1.0),
        (2, 2.0),
        (3, 3.0),
    ]
    assert _history(client, parent_id, keys.CAMPAIGN_BEST_LATENCY_MS)[-1] == (4, 0.5)
    assert _history(client, parent_id, keys.CAMPAIGN_BEST_SOL_SCORE) == [
        (2, 0.75),
        (3, 0.75),
        (4, 0.75),
    ]
    assert parent.data.metrics[keys.FINAL_BEST_SOL_SCORE] == 0.75

    assert _history(client, parent_id, keys.CAMPAIGN_BEST_SPEEDUP) == [
        (0, 1.2),
        (1, 1.2),
        (2, 2.0),
        (3, 2.0),
        (4, 2.0),
    ]
    assert _history(client, parent_id, keys.CAMPAIGN_CANDIDATES)[-1] == (4, 5.0)
    assert _history(client, parent_id, keys.CAMPAIGN_FAILURES)[-1] == (4, 2.0)

    children = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    by_name = {run.info.run_name: run for run in children}
    assert set(by_name) == {"tiler", "fuser", "ghost"}, "an agent with no attempt has no run"
    assert tracker.agent_run_ids == {name: run.info.run_id for name, run in by_name.items()}
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags[keys.KIND] == keys.KIND_AGENT
        assert run.data.tags[keys.AGENT] == run.info.run_name
        assert run.data.tags[keys.PROBLEM] == "axpby_h1024"
    assert by_name["fuser"].data.tags[keys.STRATEGY] == "fusion"

    tiler, fuser = by_name["tiler"].info.run_id, by_name["fuser"].info.run_id
    assert _history(client, tiler, keys.EVAL_SPEEDUP) == [(0, 1.2), (2, 2.0)]
    assert _history(client, tiler, keys.EVAL_LATENCY_MS) == [(0, 0.25), (2, 0.5)]
    assert _history(client, tiler, keys.EVAL_SOL_SCORE) == [(2, 0.75)]
    assert _history(client, fuser, keys.EVAL_PASSED) == [(1, 0.0), (3, 1.0)]
    assert _history(client, fuser, keys.EVAL_STATUS_CODE) == [
        (1, float(keys.STATUS_CODES["INCORRECT_NUMERICAL"])),
        (3, 0.0),
    ]
    assert client.get_metric_history(fuser, keys.EVAL_SPEEDUP)[0].step == 3
    assert _history(client, fuser, keys.status_count_key("INCORRECT_NUMERICAL")) == [(1, 1.0)]
    assert _history(client, tiler, keys.status_count_key("PASSED")) == [(0, 1.0), (2, 2.0)]
    ghost = by_name["ghost"].info.run_id
    assert _history(client, ghost, keys.EVAL_STATUS_CODE) == [(4, 100.0)]

    folder = keys.attempt_artifact_dir(2, attempts[2].proposal.id)
    assert folder == f"attempts/0002-{attempts[2].proposal.id}"
    listed = {a.path for a in client.list_artifacts(tiler, folder)}
    assert listed == {f"{folder}/sources", f"{folder}/trace.jsonl", f"{folder}/attempt.json"}
    fail_folder = keys.attempt_artifact_dir(1, attempts[1].proposal.id)
    assert f"{fail_folder}/stderr.txt" in {
        a.path for a in client.list_artifacts(fuser, fail_folder)
    }

    got = Path(client.download_artifacts(tiler, folder, str(tmp_path / "dl")))
    source = attempts[2].proposal.solution.sources[0]
    assert (got / "sources" / source.path).read_text() == source.content
    trace_lines = (got / "trace.jsonl").read_text().splitlines()
    assert [Trace.model_validate_json(line) for line in trace_lines] == attempts[2].traces
    assert Attempt.model_validate_json((got / "attempt.json").read_text()) == attempts[2]

    config = Path(client.download_artifacts(parent_id, keys.CONFIG_YAML, str(tmp_path / "cfg")))
    assert config.read_text() == CONFIG_YAML

    # MlflowClient.load_table searches runs through the fluent API, i.e. the *global* tracking
    # URI, not the client's (mlflow 3.17.2); without this it reads ./mlflow.db of the cwd.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracker.tracking_uri)
    table = client.load_table(
        experiment.experiment_id, keys.ATTEMPTS_TABLE, run_ids=[parent_id]
    ).sort_values("index")
    assert list(table["index"]) == [0, 1, 2, 3, 4]
    assert list(table["agent"]) == ["tiler", "fuser", "tiler", "fuser", "ghost"]
    assert list(table["status"]) == [
        "PASSED",
        "INCORRECT_NUMERICAL",
        "PASSED",
        "PASSED",
        "INFRA_ERROR",
    ]
    assert list(table["proposal_id"]) == [a.proposal.id for a in attempts]
    assert table["speedup"].tolist()[2] == 2.0
    assert table["speedup"].isna().tolist() == [False, True, False, False, True]
    assert list(table.columns) == list(keys.ATTEMPTS_TABLE_COLUMNS)
    assert list(table["verdict"])[:4] == ["NEW_BEST", "FAILED", "NEW_BEST", "CHALLENGER"]
    assert table["artifacts"].tolist()[2] == f"runs:/{tiler}/{folder}"
    logged = json.loads(client.get_run(parent_id).data.tags[keys.LOGGED_ARTIFACTS_TAG])
    assert {"path": keys.ATTEMPTS_TABLE, "type": "table"} in logged


def test_campaign_on_local_sqlite_store(
    sqlite_uri: str,
    store_dir: Path,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = sqlite_uri
    tracker = MlflowTracker(uri, "demo", sol_score=SolScorer())
    attempts = _run_campaign(tracker, make_attempt, tmp_path)
    _check_campaign(MlflowClient(tracking_uri=uri), tracker, attempts, tmp_path, monkeypatch)
    # Artifacts go next to the database, not into the current directory.
    assert any((store_dir / "mlartifacts").rglob("attempt.json"))
    hint = tracker.ui_hint()
    assert hint is not None
    assert str(tracker.parent_run_id) in hint
    assert f"mlflow ui --backend-store-uri {uri}" in hint


@pytest.mark.slow
def test_campaign_on_mlflow_server(
    mlflow_server: str,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker = MlflowTracker(mlflow_server, "demo", sol_score=SolScorer())
    attempts = _run_campaign(tracker, make_attempt, tmp_path)
    client = MlflowClient(tracking_uri=mlflow_server)
    _check_campaign(client, tracker, attempts, tmp_path, monkeypatch)
    assert tracker.ui_hint() == (
        f"MLflow run: {mlflow_server}/#/experiments/{tracker.experiment_id}"
        f"/runs/{tracker.parent_run_id}"
    )


def test_concurrent_log_attempt_from_agent_threads(
    sqlite_uri: str, make_attempt: MakeAttempt
) -> None:
    uri = sqlite_uri
    tracker = MlflowTracker(uri, "concurrent")
    tracker.start_campaign("c", params={}, tags={}, config_yaml="")
    agents, per_agent = 4, 5
    barrier = threading.Barrier(agents)
    errors: list[BaseException] = []

    def agent_loop(a: int) -> None:
        barrier.wait()
        try:
            for i in range(per_agent):
                tracker.log_attempt(make_attempt(a * per_agent + i, agent=f"agent{a}"))
        except BaseException as exc:  # surfaced below: a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=agent_loop, args=(a,)) for a in range(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tracker.finish("FINISHED", {})
    assert errors == []
    assert not tracker.degraded
    client = MlflowClient(tracking_uri=uri)
    runs = tracker.agent_run_ids
    assert sorted(runs) == [f"agent{a}" for a in range(agents)]
    for a in range(agents):
        steps = [step for step, _ in _history(client, runs[f"agent{a}"], keys.EVAL_PASSED)]
        assert steps == [a * per_agent + i for i in range(per_agent)]
    assert tracker.parent_run_id is not None
    candidates = _history(client, tracker.parent_run_id, keys.CAMPAIGN_CANDIDATES)
    assert max(value for _, value in candidates) == agents * per_agent


def test_failing_artifact_store_degrades_but_keeps_metrics(
    sqlite_uri: str,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The artifact root is a file, so every artifact upload fails; runs and metrics still land."""
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    uri = sqlite_uri
    tracker = MlflowTracker(uri, "degraded", artifact_location=blocker.as_uri())
    tracker.start_campaign("c", params={"a": "1"}, tags={}, config_yaml="x: 1\n")
    tracker.log_attempt(make_attempt(0))
    tracker.finish("FAILED", {})

    assert tracker.degraded
    assert "tracking is degraded" in caplog.text
    client = MlflowClient(tracking_uri=uri)
    assert tracker.parent_run_id is not None
    parent = client.get_run(tracker.parent_run_id)
    assert parent.info.status == "FAILED"
    assert parent.data.tags[keys.TRACKING_DEGRADED] == "true"
    assert parent.data.params == {"a": "1"}
    child = tracker.agent_run_ids["tiler"]
    assert client.get_run(child).info.status == "FAILED"
    assert _history(client, child, keys.EVAL_SPEEDUP) == [(0, 1.5)]


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


def test_dead_server_never_raises(
    monkeypatch: pytest.MonkeyPatch, make_attempt: MakeAttempt, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    tracker = make_tracker(
        "mlflow", tracking_uri=f"http://127.0.0.1:{_dead_port()}", experiment="x"
    )
    tracker.start_campaign("c", params={"a": "1"}, tags={}, config_yaml="")
    tracker.start_agent("tiler", "tiling")
    for index in range(3):
        tracker.log_attempt(make_attempt(index))
    tracker.finish("KILLED", {"campaign/wall_s": 1.0})
    assert tracker.degraded
    assert "could not get or create the experiment" in caplog.text
    hint = tracker.ui_hint()
    assert hint is not None
    assert "degraded" in hint


def test_consecutive_failures_stop_contacting_the_backend(
    sqlite_uri: str,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    uri = sqlite_uri
    tracker = MlflowTracker(
        uri, "breaker", artifact_location=blocker.as_uri(), max_consecutive_failures=1
    )
    tracker.start_campaign("c", params={}, tags={}, config_yaml="x: 1\n")  # config.yaml fails
    tracker.log_attempt(make_attempt(0))
    tracker.finish("FINISHED", {})
    assert "not contacting" in caplog.text
    assert tracker.agent_run_ids == {}, "no child run is created once the breaker tripped"
    assert tracker.parent_run_id is not None
    client = MlflowClient(tracking_uri=uri)
    assert client.get_metric_history(tracker.parent_run_id, keys.CAMPAIGN_CANDIDATES) == []
    # The closing calls still go out, so the run does not look as if it were still running.
    parent = client.get_run(tracker.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags[keys.TRACKING_DEGRADED] == "true"


def test_finish_rejects_unknown_status(tmp_path: Path) -> None:
    tracker = MlflowTracker(f"sqlite:///{tmp_path}/never_opened.db", "x")
    with pytest.raises(ValueError, match="FINISHED"):
        tracker.finish("DONE", {})
    assert not (tmp_path / "never_opened.db").exists()


def test_start_campaign_twice_is_a_programming_error(sqlite_uri: str) -> None:
    tracker = MlflowTracker(sqlite_uri, "twice")
    tracker.start_campaign("c", params={}, tags={}, config_yaml="")
    with pytest.raises(RuntimeError, match="already"):
        tracker.start_campaign("c", params={}, tags={}, config_yaml="")


def test_limits_match_mlflow() -> None:
    from kernelarc.tracking import mlflow_payload

    assert mlflow_payload.MAX_PARAM_VALUE == validation.MAX_PARAM_VAL_LENGTH
    assert mlflow_payload.MAX_TAG_VALUE == validation.MAX_TAG_VAL_LENGTH
    assert mlflow_payload.MAX_KEY == validation.MAX_ENTITY_KEY_LENGTH
    assert mlflow_payload.MAX_PARAMS_PER_BATCH == validation.MAX_PARAMS_TAGS_PER_BATCH


def _attempt_statuses() -> set[str]:
    """Every value Attempt.status may take, read from the model so a new status is not missed."""
    values: set[str] = set()
    for arg in typing.get_args(Attempt.model_fields["status"].annotation):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            values |= {member.value for member in arg}
        else:
            values |= set(typing.get_args(arg))
    return values


def test_status_codes_cover_every_status() -> None:
    assert {s.value for s in EvalStatus} | {"INFRA_ERROR", "REJECTED_GUARD"} <= _attempt_statuses()
    assert set(keys.STATUS_CODES) == _attempt_statuses()
    assert len(set(keys.STATUS_CODES.values())) == len(keys.STATUS_CODES)
    assert keys.status_code("SOMETHING_NEW") == keys.UNKNOWN_STATUS_CODE


def test_make_tracker_kinds(sqlite_uri: str) -> None:
    assert isinstance(make_tracker("none"), NullTracker)
    tracker = make_tracker("mlflow", tracking_uri=sqlite_uri, experiment="e")
    assert isinstance(tracker, MlflowTracker)
    with pytest.raises(ConfigError, match="valid kinds: mlflow, none"):
        make_tracker("wandb")
    with pytest.raises(ConfigError, match=r"missing \['experiment'\]"):
        make_tracker("mlflow", tracking_uri="sqlite:///x.db")
    with pytest.raises(ConfigError, match=r"unknown options \['colour'\]"):
        make_tracker("mlflow", tracking_uri="sqlite:///x.db", experiment="e", colour="red")
    with pytest.raises(ConfigError, match="takes no options"):
        make_tracker("none", tracking_uri="x")


def test_null_tracker_is_silent(make_attempt: MakeAttempt) -> None:
    tracker = NullTracker()
    tracker.start_campaign("c", params={}, tags={}, config_yaml="")
    tracker.start_agent("a", "s")
    tracker.log_attempt(make_attempt(0))
    tracker.finish("FINISHED", {})
    assert not tracker.degraded
    assert tracker.ui_hint() is None


def test_nested_source_paths_keep_their_folders(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    uri = sqlite_uri
    tracker = MlflowTracker(uri, "nested")
    tracker.start_campaign("c", params={}, tags={}, config_yaml="")
    attempt = make_attempt(7, extra_sources={"pkg/helpers.py": "H = 1\n"})
    tracker.log_attempt(attempt)
    tracker.finish("FINISHED", {})
    client = MlflowClient(tracking_uri=uri)
    folder = keys.attempt_artifact_dir(7, attempt.proposal.id)
    got = Path(client.download_artifacts(tracker.agent_run_ids["tiler"], folder, str(tmp_path)))
    assert (got / "sources" / "pkg" / "helpers.py").read_text() == "H = 1\n"
    assert json.loads((got / "attempt.json").read_text())["index"] == 7
