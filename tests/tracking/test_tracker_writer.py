"""MlflowTracker's one writer thread against a real `mlflow server` behind a real slow or failing
HTTP proxy (`gated_proxy`): callers are not held up, `finish` sends everything in order or gives
up after its bounded wait, and the ledger lists only what truly reached MLflow.

Assertions are on ordering and queueing (what the server had answered when a call returned,
what arrived in which order), never on wall-clock durations.
"""

import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelarc.rundir import LEDGER_FILE
from kernelarc.rundir.sync_ledger import PARTS, LedgerView, SyncLedger
from kernelarc.schema import Attempt, EvalStatus, Verdict
from kernelarc.tracking import keys, make_tracker
from kernelarc.tracking.mlflow_sync import sync_run_dir
from kernelarc.tracking.mlflow_tracker import MlflowTracker
from kernelarc.tracking.tracker_queue import WriterQueue
from tests.tracking.conftest import MakeAttempt
from tests.tracking.gated_proxy import HANG_GUARD_S, GatedProxy, Request
from tests.tracking.loop_side import LoopSide

CONFIG_YAML = "name: writer\nseed: 0\nproblem: axpby_h1024\n"


@pytest.fixture
def proxy(mlflow_server: str) -> Iterator[GatedProxy]:
    """A slow/failing front for the session's real `mlflow server`."""
    with GatedProxy(mlflow_server) as gated:
        yield gated


@pytest.fixture(autouse=True)
def _no_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """An injected HTTP 500 fails the call at once instead of being retried for minutes."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(HANG_GUARD_S) + 30))


def _attempts(make_attempt: MakeAttempt) -> list[Attempt]:
    return [
        make_attempt(0, agent="tiler", strategy="tiling", speedup=1.2, verdict=Verdict.NEW_BEST),
        make_attempt(1, agent="fuser", strategy="fusion", status=EvalStatus.INCORRECT_NUMERICAL),
        make_attempt(2, agent="tiler", strategy="tiling", speedup=2.0, verdict=Verdict.NEW_BEST),
        make_attempt(3, agent="fuser", strategy="fusion", speedup=1.5),
        make_attempt(4, agent="tiler", strategy="tiling", speedup=1.1),
    ]


def _campaign(run_dir: Path, tracker: MlflowTracker) -> LoopSide:
    return LoopSide(run_dir, tracker, "writer", CONFIG_YAML, {"seed": "0"})


def _ledger(run_dir: Path, uri: str) -> LedgerView:
    return SyncLedger(run_dir / LEDGER_FILE).view(uri)


def _batch_steps(requests: list[Request], run_id: str) -> list[int]:
    """The step of each `log-batch` request with metrics on `run_id`, in arrival order."""
    out = []
    for request in requests:
        data = request.json()
        if not request.path.endswith("/runs/log-batch") or data.get("run_id") != run_id:
            continue
        metrics = data.get("metrics")
        if isinstance(metrics, list) and metrics:
            out.append(int(metrics[0]["step"]))
    return out


def _steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _check_complete(client: MlflowClient, tracker: MlflowTracker, attempts: list[Attempt]) -> None:
    """What a reader sees: every attempt's metrics on its agent's run, the campaign's counts,
    the attempts table, and every run ended."""
    parent = tracker.parent_run_id
    assert parent is not None
    runs = tracker.agent_run_ids
    for agent, run_id in runs.items():
        own = [a.index for a in attempts if a.proposal.agent == agent]
        assert _steps(client, run_id, keys.EVAL_STATUS_CODE) == own
        assert client.get_run(run_id).info.status == "FINISHED"
    history = client.get_metric_history(parent, keys.CAMPAIGN_CANDIDATES)
    assert sorted((m.step, m.value) for m in history) == [(i, float(i + 1)) for i in range(5)]
    assert client.get_run(parent).info.status == "FINISHED"
    listed = {f.path for f in client.list_artifacts(parent)}
    assert keys.ATTEMPTS_TABLE in listed


def test_slow_server_does_not_hold_up_callers_and_finish_sends_all_in_order(
    proxy: GatedProxy, tmp_path: Path, make_attempt: MakeAttempt
) -> None:
    run_dir = tmp_path / "run"
    tracker = MlflowTracker(proxy.uri, "writer-slow", run_dir=run_dir)
    campaign = _campaign(run_dir, tracker)  # the gate is open: the campaign run exists
    attempts = _attempts(make_attempt)
    answered_before = proxy.answered
    first_request = len(proxy.arrived)
    proxy.close_gate()  # from now on the server answers nothing until the gate opens

    state_lock = threading.Lock()  # the loop calls log_attempt holding its state lock
    for attempt in attempts:
        with state_lock:
            campaign.record_attempt(attempt)
    proxy.wait_for_held()
    # Every attempt was handed over while the server had not answered one request since the
    # gate closed, and a request is waiting there: the writer thread waits, not the callers.
    assert proxy.answered == answered_before
    assert proxy.in_flight == 1
    assert not tracker.degraded

    proxy.open_gate()
    campaign.end()
    assert not tracker.degraded
    # One writer: never two calls at the server at once, and per run the batches arrive in
    # the order the attempts were reported (the summary batch last).
    assert proxy.max_in_flight == 1
    sent = proxy.arrived[first_request:]
    parent = tracker.parent_run_id
    assert parent is not None
    assert _batch_steps(sent, parent) == [0, 1, 2, 3, 4, 4]
    assert _batch_steps(sent, tracker.agent_run_ids["tiler"]) == [0, 2, 4]
    assert _batch_steps(sent, tracker.agent_run_ids["fuser"]) == [1, 3]

    _check_complete(MlflowClient(tracking_uri=proxy.uri), tracker, attempts)
    view = _ledger(run_dir, proxy.uri)
    assert view.done == {(i, part) for i in range(5) for part in PARTS}
    assert view.closed == "FINISHED"
    assert not sync_run_dir(run_dir, proxy.uri).changed  # the ledger says it all arrived


def test_finish_gives_up_after_its_wait_and_sync_uploads_the_rest(
    proxy: GatedProxy,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run_dir = tmp_path / "run"
    # Through make_tracker, as the campaign's `tracking.finish_timeout_s` reaches it.
    tracker = make_tracker(
        "mlflow",
        tracking_uri=proxy.uri,
        experiment="writer-stuck",
        run_dir=run_dir,
        finish_timeout_s=0.2,
    )
    assert isinstance(tracker, MlflowTracker)
    campaign = _campaign(run_dir, tracker)
    attempts = _attempts(make_attempt)
    answered_before = proxy.answered
    proxy.close_gate()
    for attempt in attempts:
        campaign.record_attempt(attempt)
    proxy.wait_for_held()

    campaign.end()  # returns although the server still holds the writer's call
    assert proxy.answered == answered_before
    assert tracker.degraded
    assert "kernelarc sync" in caplog.text

    proxy.open_gate()
    assert tracker.flush(HANG_GUARD_S)  # the call that was in flight returned; nothing follows
    view = _ledger(run_dir, proxy.uri)
    assert view.done == set(), "no part of an attempt reached MLflow, and the ledger says so"
    assert view.closed is None

    report = sync_run_dir(run_dir, proxy.uri)
    assert report.parent_run_id == tracker.parent_run_id
    assert report.uploaded == {"metrics": 5, "artifacts": 5, "campaign": 5}
    _check_complete(MlflowClient(tracking_uri=proxy.uri), tracker, attempts)


def _fails_step_1(request: Request) -> bool:
    """HTTP 500 for the metric batches of attempt 1 (its agent's and the campaign's)."""
    if not request.path.endswith("/runs/log-batch"):
        return False
    metrics = request.json().get("metrics")
    return isinstance(metrics, list) and any(int(m["step"]) == 1 for m in metrics)


def test_failing_call_on_the_writer_degrades_and_the_ledger_does_not_claim_it(
    proxy: GatedProxy,
    tmp_path: Path,
    make_attempt: MakeAttempt,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run_dir = tmp_path / "run"
    tracker = MlflowTracker(proxy.uri, "writer-failing", run_dir=run_dir)
    campaign = _campaign(run_dir, tracker)
    attempts = _attempts(make_attempt)
    proxy.fail = _fails_step_1
    for attempt in attempts:
        campaign.record_attempt(attempt)  # nothing raises into the caller
    campaign.end()

    assert tracker.degraded
    assert "could not log metrics of attempt 1" in caplog.text
    view = _ledger(run_dir, proxy.uri)
    everything = {(i, part) for i in range(5) for part in PARTS}
    assert view.done == everything - {(1, "metrics"), (1, "campaign")}
    client = MlflowClient(tracking_uri=proxy.uri)
    fuser = tracker.agent_run_ids["fuser"]
    assert _steps(client, fuser, keys.EVAL_STATUS_CODE) == [3]
    parent = tracker.parent_run_id
    assert parent is not None
    assert client.get_run(parent).data.tags[keys.TRACKING_DEGRADED] == "true"

    proxy.fail = None  # the server recovers; sync uploads exactly the two failed batches
    report = sync_run_dir(run_dir, proxy.uri)
    assert report.uploaded == {"metrics": 1, "artifacts": 0, "campaign": 1}
    _check_complete(client, tracker, attempts)


def test_writer_queue_keeps_order_and_survives_a_failing_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = WriterQueue("test-writer")
    done: list[int] = []

    def broken() -> None:
        raise RuntimeError("a bug in a job")

    for i in range(3):
        queue.submit(partial(done.append, i))
    queue.submit(broken)
    assert queue.call(lambda: len(done)) == 3  # runs after every job queued before it
    queue.submit(lambda: done.append(3))
    assert queue.close(HANG_GUARD_S)
    assert done == [0, 1, 2, 3]
    assert "a queued job failed" in caplog.text
    assert not queue.submit(lambda: done.append(4))  # closed: refused
    assert queue.call(lambda: 5) is None
