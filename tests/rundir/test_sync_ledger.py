"""The run dir's MLflow ledger: what it says per store, and what it forgives."""

from pathlib import Path

from kernelarc.rundir.sync_ledger import (
    CampaignEntry,
    LoggedEntry,
    MarkEntry,
    RunEntry,
    SyncLedger,
)

A, B = "http://a:5000", "sqlite:////tmp/b.db"


def test_view_is_per_store_and_starts_over_with_a_new_parent(tmp_path: Path) -> None:
    ledger = SyncLedger(tmp_path / "mlflow_ledger.jsonl")
    ledger.append(CampaignEntry(uid="u1", name="c", experiment="e", uri=A))
    ledger.append(RunEntry(kind="parent", uri=A, experiment_id="1", run_id="p1"))
    ledger.append(
        RunEntry(kind="agent", uri=A, experiment_id="1", run_id="a1", agent="x", parent_run_id="p1")
    )
    ledger.append(LoggedEntry(uri=A, run_id="p1", index=0, part="metrics"))
    ledger.append(LoggedEntry(uri=A, run_id="p1", index=0, part="campaign"))
    ledger.append(RunEntry(kind="parent", uri=B, experiment_id="7", run_id="q1"))
    ledger.append(LoggedEntry(uri=B, run_id="q1", index=3, part="artifacts"))
    ledger.append(MarkEntry(kind="tables", uri=A, run_id="p1", attempts=1, conclusions=0))
    ledger.append(MarkEntry(kind="closed", uri=A, run_id="p1", status="FINISHED"))

    a = ledger.view(A + "/")  # a trailing slash names the same server
    assert (a.parent_run_id, a.experiment_id) == ("p1", "1")
    assert a.agent_runs == {"x": "a1"}
    assert a.done == {(0, "metrics"), (0, "campaign")}
    assert a.tables == (1, 0)
    assert a.closed == "FINISHED"
    assert a.campaign is not None and a.campaign.uid == "u1"
    b = ledger.view(B)
    assert (b.parent_run_id, b.done, b.agent_runs) == ("q1", {(3, "artifacts")}, {})

    # The old parent was deleted and sync made a new one: nothing logged before counts.
    ledger.append(RunEntry(kind="parent", uri=A, experiment_id="1", run_id="p2"))
    ledger.append(LoggedEntry(uri=A, run_id="p1", index=1, part="metrics"))  # a late old entry
    a = ledger.view(A)
    assert (a.parent_run_id, a.done, a.agent_runs, a.tables, a.closed) == (
        "p2",
        set(),
        {},
        None,
        None,
    )


def test_unreadable_lines_are_skipped_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "mlflow_ledger.jsonl"
    assert SyncLedger(path).view(A).parent_run_id is None
    ledger = SyncLedger(path)
    ledger.append(RunEntry(kind="parent", uri=A, experiment_id="1", run_id="p1"))
    with path.open("a") as handle:
        handle.write('{"kind": "logged", "uri": "http://a:5000"}\nnot json\n{"kind": "logg')
    assert ledger.view(A).parent_run_id == "p1"
    assert ledger.campaign() is None
