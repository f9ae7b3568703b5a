"""What `kernelarc report` reads: run dirs, sweep dirs, experiments; folders without runs."""

from pathlib import Path

import pytest

from kernelarc.cli import main
from kernelarc.errors import ConfigError
from kernelarc.report.inputs import load_campaigns
from kernelarc.schema import Verdict
from tests.report.conftest import write_run_dir
from tests.tracking.conftest import build_attempt


def _run(path: Path) -> Path:
    attempt = build_attempt(0, agent="compiler", strategy="compiler", verdict=Verdict.NEW_BEST)
    return write_run_dir(path, [attempt], config={"name": "abl", "problem": "p"})


def test_folders_without_runs_are_skipped_and_listed(tmp_path: Path) -> None:
    run = _run(tmp_path / "outputs" / "a")
    never_ran = tmp_path / "outputs" / "b"  # a campaign that failed before its first attempt
    never_ran.mkdir()
    (never_ran / "kernelarc.log").write_text("")
    skipped: list[str] = []
    campaigns = load_campaigns([str(run), str(never_ran)], "unused", skipped)
    assert [c.run_dir for c in campaigns] == [run]
    assert len(skipped) == 1 and skipped[0].startswith(f"{never_ran}: no run dir")
    with pytest.raises(ConfigError, match="no run dir"):
        load_campaigns([str(run), str(never_ran)], "unused")  # without a list: an error


def test_a_folder_named_like_an_experiment_says_how_to_name_the_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernelarc report kernelarc` from a checkout root: the folder kernelarc/ is no run."""
    (tmp_path / "kernelarc").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["report", "kernelarc", "--no-mlflow"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "kernelarc: no run dir" in err
    assert "for the MLflow experiment of that name write experiment:kernelarc" in err
    # The prefix names the experiment even though the folder exists (no store here: the
    # error is about the store, not the folder).
    assert main(["report", "experiment:kernelarc", "--no-mlflow"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'kernelarc' is not a directory, and there is no MLflow store" in err
