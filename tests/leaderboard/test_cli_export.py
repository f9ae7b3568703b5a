"""`kernelarc export`: several run dirs, --experiment, --dry-run, --timestamp, --verify, errors."""

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelarc.cli import main
from kernelarc.schema import Attempt
from kernelarc.tracking import keys
from tests.leaderboard.conftest import MakeAttempt, WriteRun


def _export(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["export", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_several_run_dirs(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = write_run([make_attempt(0)], name="a")
    b = write_run([make_attempt(0, problem="softmax")], name="b")
    out = tmp_path / "out"
    code, stdout, _ = _export([str(a), str(b), "--out", str(out), "--sources"], capsys)
    assert code == 0
    files = json.loads(stdout)["files"]
    assert str(out / "softmax" / "sources" / "kernel.py") in files
    assert sorted(json.loads((out / "manifest.json").read_text())["problems"]) == [
        "rmsnorm",
        "softmax",
    ]


def test_dry_run_writes_nothing_and_says_why(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = write_run(
        [make_attempt(0, latency_ms=0.3), make_attempt(1, latency_ms=0.1, agent="fuser")]
    )
    out = tmp_path / "out"
    code, stdout, _ = _export([str(run_dir), "--out", str(out), "--dry-run"], capsys)
    assert code == 0
    assert not out.exists()
    assert "would export 1 problem(s):" in stdout
    assert "rmsnorm: p-" in stdout and "by fuser" in stdout
    assert "why: attempt 1 of" in stdout
    assert "#2: attempt 0 of" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["{run}"], "--out DIR is required", id="no-out"),
        pytest.param(["{run}", "--experiment", "x", "--out", "o"], "not both", id="both"),
        pytest.param(["{run}", "--out", "o", "--timestamp", "yesterday"], "ISO 8601", id="ts"),
        pytest.param(["--out", "o"], "no run dir given", id="no-input"),
        pytest.param(["{tmp}/missing", "--out", "o"], "run dir not found", id="missing"),
    ],
)
def test_usage_errors(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    run_dir = write_run([make_attempt(0)])
    filled = [a.format(run=run_dir, tmp=tmp_path) for a in args]
    code, _, err = _export(filled, capsys)
    assert code == 2
    assert message in " ".join(err.split())


def test_timestamp_makes_exports_of_different_runs_comparable(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = write_run([make_attempt(0)])
    out = tmp_path / "out"
    code, _, _ = _export(
        [str(run_dir), "--out", str(out), "--timestamp", "2027-01-01T00:00:00+00:00"], capsys
    )
    assert code == 0
    assert json.loads((out / "manifest.json").read_text())["exported_at"].startswith("2027")


def test_verify_agrees_on_cpu(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = write_run([make_attempt(0)])
    out = tmp_path / "out"
    code, stdout, err = _export(
        [str(run_dir), "--out", str(out), "--verify", "--device", "cpu"], capsys
    )
    assert code == 0, err
    [check] = json.loads(stdout)["verify"]
    assert check["agree"] is True
    assert "agrees" in err


# --- MLflow input ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow_export')}/mlflow.db"


def _log(uri: str, experiment: str, run_dir: Path, attempts: Sequence[Attempt]) -> str:
    from kernelarc.tracking.mlflow_tracker import MlflowTracker

    tracker = MlflowTracker(uri, experiment)
    tracker.start_campaign(experiment, {}, {keys.RUN_DIR: str(run_dir)}, "seed: 0\n")
    for attempt in attempts:
        tracker.log_attempt(attempt)
    tracker.finish("FINISHED", {})
    assert tracker.parent_run_id is not None
    return tracker.parent_run_id


def test_experiment_input_reads_attempts_from_mlflow(
    tmp_path: Path,
    sqlite_uri: str,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempts = [make_attempt(0, latency_ms=0.3), make_attempt(1, latency_ms=0.1)]
    # The run dir has the problem files but, to prove where attempts come from, no attempts.
    run_dir = write_run(attempts[:1])
    (run_dir / "attempts.jsonl").unlink()
    gone = tmp_path / "deleted-run"
    parent = _log(sqlite_uri, "exp", run_dir, attempts)
    _log(sqlite_uri, "exp", gone, [make_attempt(0, problem="softmax")])
    out = tmp_path / "out"
    code, _, err = _export(
        ["--experiment", "exp", "--tracking-uri", sqlite_uri, "--out", str(out)], capsys
    )
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["problems"]["rmsnorm"]["attempt_index"] == 1
    assert manifest["campaigns"][0]["source"] == f"mlflow:exp/{parent}"
    assert manifest["campaigns"][0]["config_sha256"]
    assert (out / "rmsnorm" / "problem" / "definition.json").is_file()
    # The other campaign's run dir is gone: its problem files cannot be found (not in MLflow).
    assert (out / "softmax" / "solution.json").is_file()
    assert not (out / "softmax" / "problem").exists()
    assert manifest["problems"]["softmax"]["problem_files"] is False


def test_experiment_input_errors(
    tmp_path: Path, sqlite_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _export(
        ["--experiment", "nope", "--tracking-uri", sqlite_uri, "--out", str(tmp_path)], capsys
    )
    assert code == 2
    assert "MLflow experiment 'nope' not found" in " ".join(err.split())


def test_experiment_with_an_empty_campaign(
    tmp_path: Path, sqlite_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _log(sqlite_uri, "hollow", tmp_path, [])
    code, _, err = _export(
        ["--experiment", "hollow", "--tracking-uri", sqlite_uri, "--dry-run"], capsys
    )
    assert code == 2
    assert "empty run: no attempt artifacts" in " ".join(err.split())


def test_dirs_without_attempts_are_skipped_and_listed(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kernelarc export outputs/kernelarc/*/` when some dirs are campaigns that failed before
    their first attempt (or anything else a glob caught): those are listed, the rest exported."""
    run = write_run([make_attempt(0)], name="a")
    never_ran = tmp_path / "b"
    never_ran.mkdir()
    (never_ran / "kernelarc.log").write_text("")
    empty = tmp_path / "c"
    empty.mkdir()
    (empty / "attempts.jsonl").write_text("")
    out = tmp_path / "out"
    code, _, stderr = _export([str(run), str(never_ran), str(empty), "--out", str(out)], capsys)
    assert code == 0, stderr
    assert f"skipped: {never_ran}: not a campaign run dir (no attempts.jsonl)" in stderr
    assert f"skipped: {empty}: no attempts recorded" in stderr
    assert json.loads((out / "manifest.json").read_text())["problems"]["rmsnorm"]["campaign"]


def test_cpu_timed_numbers_are_labelled_in_the_export(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cpu = write_run([make_attempt(0, timing_method="cpu_monotonic")], name="cpu")
    gpu = write_run([make_attempt(0, problem="softmax", timing_method="cupti")], name="gpu")
    out = tmp_path / "out"
    code, _, stderr = _export([str(cpu), str(gpu), "--out", str(out)], capsys)
    assert code == 0, stderr
    rows = {r["problem"]: r for r in csv.DictReader(io.StringIO((out / "scores.csv").read_text()))}
    assert rows["rmsnorm"]["timing"] == "cpu: pipeline check, not performance"
    assert rows["softmax"]["timing"] == ""
    problems = json.loads((out / "manifest.json").read_text())["problems"]
    assert problems["rmsnorm"]["timing"] == "cpu: pipeline check, not performance"
    assert problems["softmax"]["timing"] == "gpu"
    code, stdout, _ = _export([str(cpu), "--dry-run"], capsys)
    assert "timing: CPU timings (cpu_monotonic): a pipeline check, not kernel performance" in stdout
