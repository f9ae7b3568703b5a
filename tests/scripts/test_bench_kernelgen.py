"""scripts/bench_kernelgen.py --check-only on the CPU, end to end, as a subprocess: the
generator's reach (every workload checked under Triton's interpreter, nothing timed), a problem
over its time cap recorded as a timeout with its tracer killed, and the summary's counting."""

import json
import shutil
import subprocess
import types
from pathlib import Path

import pytest
from script_runs import ROOT, load_script, run_script

SCRIPT = ROOT / "scripts" / "bench_kernelgen.py"
SAMPLES = ROOT / "tests" / "samples" / "problems"
CHECK = ["--device", "cpu", "--check-only", "--jobs", "1"]


def _run_script(
    args: list[str], tmp_path: Path, *, timeout_s: float
) -> "subprocess.CompletedProcess[str]":
    cache = {"KERNELARC_CACHE_DIR": str(tmp_path / "cache")}
    return run_script(SCRIPT, args, tmp_path, timeout_s=timeout_s, env=cache)


def _reach() -> types.ModuleType:
    """The benchmark's helper module that sums the rows up."""
    return load_script(ROOT / "scripts" / "kernelgen_reach.py", "kernelgen_reach_under_test")


def test_check_only_runs_every_workload_and_counts_a_passing_kernel(tmp_path: Path) -> None:
    out, table = tmp_path / "reach.json", tmp_path / "reach.md"
    _run_script(
        [str(SAMPLES / "add_rmsnorm"), *CHECK, "--json", str(out), "--markdown", str(table)],
        tmp_path,
        timeout_s=600,
    )
    (row,) = json.loads(out.read_text())
    workloads = sum(
        1 for line in (SAMPLES / "add_rmsnorm" / "workload.jsonl").open() if line.strip()
    )
    assert row["workloads"] == workloads >= 2
    assert row["kernels"] >= 1 and "gen-default_error" not in row
    assert row["gen-default_passed"] == workloads
    # Nothing timed in this mode.
    assert not any(key.endswith("_ms") for key in row)
    assert "passing every workload in every variant 1 (100 %)" in table.read_text()


def test_a_problem_over_its_cap_is_a_timeout_and_its_tracer_is_killed(tmp_path: Path) -> None:
    problem = tmp_path / "sleepy"
    shutil.copytree(SAMPLES / "vector_add", problem)
    definition = json.loads((problem / "definition.json").read_text())
    # The reference never returns, so tracing it (in a subprocess of the worker) hangs.
    definition["reference"] = (
        "import time\n\n\ndef run(x, y):\n    time.sleep(3600)\n    return x + y\n"
    )
    (problem / "definition.json").write_text(json.dumps(definition))
    out = tmp_path / "reach.json"
    done = _run_script(
        [str(problem), *CHECK, "--problem-time-s", "20", "--json", str(out)],
        tmp_path,
        timeout_s=300,
    )
    (row,) = json.loads(out.read_text())
    assert row["error"] == "timeout after 20 s"
    assert "| timeout | 1 |" in done.stdout
    left = subprocess.run(
        ["pgrep", "-f", str(problem)], capture_output=True, text=True, check=False
    )
    assert left.stdout.strip() == "", "the tracer outlived its problem's timeout"


@pytest.mark.parametrize(
    ("failure", "cause"),
    [
        ("timeout after 300 s", "timeout"),
        ("trace: tracing the reference failed (exit 1): boom", "trace failed"),
        ("GenerationError: no plan for aten.foo; aten.bar", "generator: no plan for aten.foo"),
        ("CompilationError: at 3:4: bad", "CompilationError"),
        ("kb-l1-cpu1-16x16: out: max abs diff 3.0 > atol", "wrong result or shape"),
        ("Traceback (most recent call last):\n  ...\nRuntimeError: the worker", "RuntimeError"),
    ],
)
def test_failures_are_counted_by_cause(failure: str, cause: str) -> None:
    assert _reach().failure_cause(failure) == cause


def test_the_summary_counts_only_fused_kernels_that_pass_everywhere() -> None:
    rows = [
        {"problem": "a", "workloads": 2, "kernels": 1, "gen-default_passed": 2},
        {"problem": "b", "workloads": 2, "kernels": 0, "gen-default_passed": 2},
        {"problem": "c", "workloads": 2, "kernels": 2, "gen-default_passed": 1}
        | {"gen-default_error": "c-2: out: mismatch"},
        {"problem": "d", "gen_error": "trace: tracing the reference failed (exit 1): x"},
    ]
    table = _reach().reach_markdown(rows, ["gen-default"])
    assert (
        "4 problems: traced 3, generated 3, with a fused Triton kernel 2, a fused Triton kernel "
        "passing every workload in every variant 1 (25 %)"
    ) in table
    assert "| no fused kernel (torch calls only) | 1 |" in table
    assert "| wrong result or shape | 1 |" in table
    assert "| trace failed | 1 |" in table


def test_a_variant_whose_kernels_equal_an_earlier_ones_is_not_timed_again(tmp_path: Path) -> None:
    # add_rmsnorm has no attention and no matmul: FLASH and FUSE_GEMM change nothing there.
    out, table = tmp_path / "bench.json", tmp_path / "bench.md"
    variants = ["--variants", "gen-default,gen-noflash,gen-cublas,gen-rows1"]
    outputs = ["--json", str(out), "--markdown", str(table)]
    _run_script(
        [str(SAMPLES / "add_rmsnorm"), "--device", "cpu", "--jobs", "1", *variants, *outputs],
        tmp_path,
        timeout_s=600,
    )
    (row,) = json.loads(out.read_text())
    assert isinstance(row["gen-default_ms"], float)
    for same in ("gen-noflash", "gen-cublas"):
        assert row[f"{same}_same_as"] == "gen-default"
        assert row[f"{same}_ms"] == row["gen-default_ms"]
    assert "gen-rows1_same_as" not in row  # one row per program: other kernels, timed
    assert isinstance(row["gen-rows1_ms"], float)
    # The table names a variant that was timed, never one that only shares its kernels.
    best = "gen-default" if row["gen-default_ms"] <= row["gen-rows1_ms"] else "gen-rows1"
    assert f"| {best} |" in table.read_text()
