"""MLflow outages and `kernelarc sync`: a real `mlflow server` killed mid-campaign and restarted,
a lost ledger, a store that was never reached, a run dir that never had tracking, and a
campaign resumed in its run dir.

The campaign side is the real MlflowTracker fed by a real AttemptLog, exactly as the loop calls
them (append to attempts.jsonl first, then log_attempt); the attempts are hand-built. Everything
is read back with MlflowClient.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelarc.rundir import LEDGER_FILE
from kernelarc.rundir.attempts_log import AttemptLog, read_attempts
from kernelarc.rundir.run_record import CampaignRecord, write_campaign_record
from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.tracking import keys
from kernelarc.tracking.mlflow_sync import sync_run_dir
from kernelarc.tracking.mlflow_tracker import MlflowTracker
from tests.mlflow_server import MlflowServer, free_port
from tests.tracking.conftest import MakeAttempt
from tests.tracking.loop_side import LoopSide

NEW_BEST = Verdict.NEW_BEST
CONFIG_YAML = "name: outage\nseed: 0\nproblem: axpby_h1024\nbudget:\n  candidates: 6\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """One real server for the module (it is killed and restarted by the outage test)."""
    srv = MlflowServer(tmp_path_factory.mktemp("sync_server"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('sync_store')}/mlflow.db"


@pytest.fixture(autouse=True)
def _fast_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead server answers at once (connection refused); do not retry for minutes."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


def _attempts(make_attempt: MakeAttempt) -> list[Attempt]:
    return [
        make_attempt(0, agent="tiler", strategy="tiling", speedup=1.2, verdict=NEW_BEST),
        make_attempt(1, agent="fuser", strategy="fusion", status=EvalStatus.INCORRECT_NUMERICAL),
        make_attempt(2, agent="tiler", strategy="tiling", speedup=2.0, verdict=NEW_BEST),
        make_attempt(3, agent="fuser", strategy="fusion", speedup=1.5),
        make_attempt(4, agent="ghost", strategy="random", speedup=1.1),
    ]


def _campaign(run_dir: Path, tracker: MlflowTracker) -> LoopSide:
    return LoopSide(
        run_dir, tracker, "outage", CONFIG_YAML, {"seed": "0", "budget.candidates": "6"}
    )


def _killed_after_three(
    uri: str, experiment: str, run_dir: Path, make_attempt: MakeAttempt
) -> tuple[MlflowTracker, LoopSide, list[Attempt]]:
    """A campaign that recorded 3 of its attempts and was killed (no finish): its tracker
    flushed what the killed process had sent before it died."""
    first = MlflowTracker(uri, experiment, run_dir=run_dir)
    campaign = _campaign(run_dir, first)
    attempts = _attempts(make_attempt)
    for attempt in attempts[:3]:
        campaign.record_attempt(attempt)
    first.flush()
    return first, campaign, attempts


def _resume(uri: str, experiment: str, run_dir: Path) -> MlflowTracker:
    """A new tracker resuming the campaign of `run_dir` (as `kernelarc resume` does)."""
    tracker = MlflowTracker(uri, experiment, run_dir=run_dir)
    tracker.resume_campaign(
        "outage",
        params={"seed": "0", "budget.candidates": "6"},
        tags={keys.PROBLEM: "axpby_h1024", keys.RUN_DIR: str(run_dir)},
        config_yaml=CONFIG_YAML,
        attempts=read_attempts(run_dir / "attempts.jsonl"),
    )
    return tracker


def _steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    """Every logged step, duplicates included, sorted."""
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _check_complete(client: MlflowClient, parent_id: str, attempts: list[Attempt]) -> None:
    """Every attempt is in the store exactly once, and the campaign is ended and whole."""
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    assert keys.TRACKING_DEGRADED not in parent.data.tags
    assert parent.data.tags[keys.BEST_ATTEMPT] == f"2-{attempts[2].proposal.id}"
    assert parent.data.params["budget.candidates"] == "6"
    assert _steps(client, parent_id, keys.CAMPAIGN_CANDIDATES) == [0, 1, 2, 3, 4]
    best = client.get_metric_history(parent_id, keys.CAMPAIGN_BEST_SPEEDUP)
    assert sorted((m.step, m.value) for m in best) == [
        (0, 1.2),
        (1, 1.2),
        (2, 2.0),
        (3, 2.0),
        (4, 2.0),
    ]
    assert parent.data.metrics[keys.FINAL_BEST_SPEEDUP] == 2.0
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    runs = {r.data.tags[keys.AGENT]: r for r in children}
    assert sorted(runs) == ["fuser", "ghost", "tiler"]
    for agent, run in runs.items():
        own = [a for a in attempts if a.proposal.agent == agent]
        assert run.info.status == "FINISHED"
        run_id = run.info.run_id
        assert _steps(client, run_id, keys.EVAL_STATUS_CODE) == [a.index for a in own]
        listed = {f.path for f in client.list_artifacts(run_id, keys.ATTEMPTS_DIR)}
        assert listed == {keys.attempt_artifact_dir(a.index, a.proposal.id) for a in own}
        for a in own:
            folder = keys.attempt_artifact_dir(a.index, a.proposal.id)
            files = {f.path for f in client.list_artifacts(run_id, folder)}
            assert f"{folder}/{keys.ATTEMPT_JSON}" in files
    table = _table(client, parent_id)
    assert table["columns"] == list(keys.ATTEMPTS_TABLE_COLUMNS)
    assert [row[0] for row in table["data"]] == [0, 1, 2, 3, 4]


def _table(client: MlflowClient, run_id: str) -> dict[str, list[object]]:
    path = client.download_artifacts(run_id, keys.ATTEMPTS_TABLE)
    data: dict[str, list[object]] = json.loads(Path(path).read_text())
    return data


@pytest.mark.slow
def test_server_killed_mid_campaign_then_restarted_and_synced(
    server: MlflowServer, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    run_dir = tmp_path / "run"
    tracker = MlflowTracker(
        server.uri, "outage", run_dir=run_dir, max_consecutive_failures=1, retry_after_s=0
    )
    campaign = _campaign(run_dir, tracker)
    attempts = _attempts(make_attempt)
    for attempt in attempts[:2]:
        campaign.record_attempt(attempt)
    tracker.flush()  # the writer thread sent them before the server goes down
    assert not tracker.degraded

    server.kill()
    for attempt in attempts[2:4]:
        campaign.record_attempt(attempt)  # the campaign goes on; nothing raises
    tracker.flush()  # the writer tried them against the dead server
    assert tracker.degraded
    server.start()
    campaign.record_attempt(attempts[4])  # reaches the server again, and a new agent's run
    campaign.end()

    client = MlflowClient(tracking_uri=server.uri)
    parent_id = tracker.parent_run_id
    assert parent_id is not None
    tiler = tracker.agent_run_ids["tiler"]
    assert _steps(client, tiler, keys.EVAL_STATUS_CODE) == [0], "attempt 2 fell in the outage"
    assert _steps(client, tracker.agent_run_ids["ghost"], keys.EVAL_STATUS_CODE) == [4]
    assert client.get_run(parent_id).data.tags[keys.TRACKING_DEGRADED] == "true"
    assert len((run_dir / "attempts.jsonl").read_text().splitlines()) == 5

    report = sync_run_dir(run_dir, server.uri)
    assert report.parent_run_id == parent_id
    assert report.created == []
    assert report.uploaded == {"metrics": 2, "artifacts": 2, "campaign": 2}
    _check_complete(client, parent_id, attempts)

    # Again, through the CLI and with the store taken from the ledger: nothing to do.
    proc = subprocess.run(
        [sys.executable, "-m", "kernelarc.cli", "sync", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Every attempt was there: say so, not "uploaded: nothing; already there: 0".
    assert "nothing to upload: all 5 attempts are already there" in proc.stdout
    assert "already there: 0" not in proc.stdout
    _check_complete(client, parent_id, attempts)


def test_lost_ledger_entries_are_checked_on_the_server_not_uploaded_twice(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    """As if every request had timed out on the client after the server applied it."""
    run_dir = tmp_path / "run"
    tracker = MlflowTracker(sqlite_uri, "lost-ledger", run_dir=run_dir)
    campaign = _campaign(run_dir, tracker)
    attempts = _attempts(make_attempt)
    for attempt in attempts:
        campaign.record_attempt(attempt)
    campaign.end()
    ledger = run_dir / LEDGER_FILE
    kept = [line for line in ledger.read_text().splitlines() if '"kind":"logged"' not in line]
    ledger.write_text("\n".join(kept) + "\n")

    report = sync_run_dir(run_dir, sqlite_uri)
    assert report.uploaded == {"metrics": 0, "artifacts": 0, "campaign": 0}
    assert report.found == 15
    assert tracker.parent_run_id is not None
    _check_complete(MlflowClient(tracking_uri=sqlite_uri), tracker.parent_run_id, attempts)
    again = sync_run_dir(run_dir, sqlite_uri, verify=True)
    assert again.found == 15
    assert again.uploaded == {"metrics": 0, "artifacts": 0, "campaign": 0}
    assert again.closed is None
    _check_complete(MlflowClient(tracking_uri=sqlite_uri), tracker.parent_run_id, attempts)


def test_campaign_that_never_reached_mlflow_is_created_by_sync(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    run_dir = tmp_path / "run"
    dead = f"http://127.0.0.1:{free_port()}"
    tracker = MlflowTracker(dead, "never-reached", run_dir=run_dir)
    campaign = _campaign(run_dir, tracker)
    attempts = _attempts(make_attempt)
    for attempt in attempts:
        campaign.record_attempt(attempt)
    campaign.end()
    assert tracker.parent_run_id is None

    report = sync_run_dir(run_dir, sqlite_uri)
    assert report.created == ["campaign", "agent tiler", "agent fuser", "agent ghost"]
    assert report.uploaded == {"metrics": 5, "artifacts": 5, "campaign": 5}
    client = MlflowClient(tracking_uri=sqlite_uri)
    _check_complete(client, report.parent_run_id, attempts)
    parent = client.get_run(report.parent_run_id)
    assert parent.info.run_name == "outage"
    assert parent.data.tags[keys.CAMPAIGN_UID] == tracker.campaign_uid
    assert parent.data.tags[keys.PROBLEM] == "axpby_h1024"
    assert parent.info.start_time == 1796205600000  # campaign.json's started_at
    config = client.download_artifacts(report.parent_run_id, keys.CONFIG_YAML)
    assert Path(config).read_text() == CONFIG_YAML
    assert not sync_run_dir(run_dir, sqlite_uri).changed


def test_run_dir_without_tracking_is_uploaded_from_its_files(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    """A `tracking=none` campaign: no ledger; params and tags come from the run dir."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("- guard=off\n- seed=3\n")
    (run_dir / ".hydra" / "hydra.yaml").write_text(
        "hydra:\n  runtime:\n    choices:\n      guard: 'off'\n      hydra/launcher: basic\n"
    )
    (run_dir / "config.yaml").write_text(
        "name: offline\nseed: 3\nproblem: axpby_h1024\ntracking:\n  kind: none\n"
        "  experiment: null\ncoordination:\n  memory: false\n  plateau_patience: 4\n"
    )
    log = AttemptLog(run_dir / "attempts.jsonl")
    attempts = _attempts(make_attempt)
    for attempt in attempts:
        log.append(attempt)
    record = CampaignRecord(
        name="offline",
        problem="axpby_h1024",
        problem_dir=str(run_dir / "problem"),
        source_problem_dir="/nowhere",
        workloads="workload.jsonl",
        device="cpu",
        seed=3,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:05:00+00:00",
        status="FINISHED",
    )
    write_campaign_record(run_dir, record)

    report = sync_run_dir(run_dir, sqlite_uri)
    assert report.experiment == "offline"
    client = MlflowClient(tracking_uri=sqlite_uri)
    parent = client.get_run(report.parent_run_id)
    tags, params = parent.data.tags, parent.data.params
    assert tags[keys.OVERRIDES] == "guard=off seed=3"
    assert tags[f"{keys.CHOICE_PREFIX}guard"] == "off"
    assert f"{keys.CHOICE_PREFIX}hydra/launcher" not in tags
    assert tags[f"{keys.COORDINATION_PREFIX}memory"] == "false"
    assert tags[keys.SEED] == "3"
    assert tags[keys.RUN_DIR] == str(run_dir.resolve())
    assert params["coordination.plateau_patience"] == "4"
    assert params["tracking.experiment"] == "None"
    assert parent.info.status == "FINISHED"
    assert sorted(_steps(client, report.parent_run_id, keys.CAMPAIGN_CANDIDATES)) == [0, 1, 2, 3, 4]
    # No ledger before: sync wrote one, so a second sync finds the same parent run again.
    assert (run_dir / LEDGER_FILE).is_file()
    again = sync_run_dir(run_dir, sqlite_uri)
    assert again.parent_run_id == report.parent_run_id
    assert not again.changed


def test_resumed_campaign_continues_its_runs(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    """A campaign killed after 3 attempts (no finish), then resumed from its run dir."""
    run_dir = tmp_path / "run"
    first, campaign, attempts = _killed_after_three(sqlite_uri, "resumed", run_dir, make_attempt)
    parent_id = first.parent_run_id
    assert parent_id is not None

    second = _resume(sqlite_uri, "resumed", run_dir)
    assert second.parent_run_id == parent_id
    assert second.campaign_uid == first.campaign_uid
    assert second.agent_run_ids == first.agent_run_ids
    client = MlflowClient(tracking_uri=sqlite_uri)
    assert client.get_run(parent_id).info.status == "RUNNING"
    campaign.tracker = second
    for attempt in attempts[3:]:
        campaign.record_attempt(attempt)
    campaign.end()

    # Best-so-far went on from the replayed attempts (2.0 at steps 3 and 4), nothing twice.
    _check_complete(client, parent_id, attempts)
    assert not sync_run_dir(run_dir, sqlite_uri).changed


def test_a_resume_reuses_an_agent_run_the_ledger_never_noted(
    sqlite_uri: str, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    """Killed between creating an agent's run in the store and noting it in the ledger: the
    resumed campaign finds the run under its campaign run instead of making a second one."""
    run_dir = tmp_path / "run"
    first, campaign, attempts = _killed_after_three(sqlite_uri, "unnoted", run_dir, make_attempt)
    parent_id = first.parent_run_id
    assert parent_id is not None and first.agent_run_ids
    ledger = run_dir / LEDGER_FILE
    kept = [
        line for line in ledger.read_text().splitlines() if json.loads(line).get("kind") != "agent"
    ]
    assert len(kept) < len(ledger.read_text().splitlines())  # the agent runs were noted
    ledger.write_text("".join(line + "\n" for line in kept))

    second = _resume(sqlite_uri, "unnoted", run_dir)
    assert second.parent_run_id == parent_id
    assert second.agent_run_ids == first.agent_run_ids
    campaign.tracker = second
    for attempt in attempts[3:]:
        campaign.record_attempt(attempt)
    campaign.end()
    client = MlflowClient(tracking_uri=sqlite_uri)
    experiment = client.get_experiment_by_name("unnoted")
    assert experiment is not None
    agents = [
        r
        for r in client.search_runs([experiment.experiment_id])
        if r.data.tags.get(keys.KIND) == keys.KIND_AGENT
    ]
    names = [r.data.tags[keys.AGENT] for r in agents]
    assert len(names) == len(set(names)), names  # one run per agent, none doubled
    assert {r.info.run_id for r in agents} == set(second.agent_run_ids.values())
    assert set(first.agent_run_ids.items()) <= set(second.agent_run_ids.items())
