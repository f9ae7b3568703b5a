"""The suite benchmark: finding problem dirs, per-problem rows and the summary from hand-built
campaign records, and one real CPU run of scripts/bench_suite.py on two built-in problems and a
broken one."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelarc.benchmark.outputs import BenchProgress, ProblemResult
from kernelarc.benchmark.report import BaselineRun, build_row
from kernelarc.benchmark.settings import BenchSettings
from kernelarc.benchmark.suite import (
    SUITE_HEADER,
    find_problem_dirs,
    suite_markdown,
    suite_rows,
    summarize_suite,
    write_suite,
)
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import builtin_dir
from kernelarc.schema import Verdict
from tests.benchmark.records import make_attempt, make_record, memory_bounds

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_suite.py"


def _problem(root: Path, name: str) -> Path:
    target = root / name
    shutil.copytree(builtin_dir() / "rmsnorm", target)
    return target


def test_problem_dirs_are_dirs_with_a_definition_or_their_subdirs(tmp_path: Path) -> None:
    one = _problem(tmp_path / "single", "a")
    corpus = tmp_path / "corpus"
    _problem(corpus, "c")
    _problem(corpus, "b")
    (corpus / "not_a_problem").mkdir()
    report = corpus / "import_report.json"
    report.write_text("{}\n")
    assert find_problem_dirs([one, corpus, report]) == [one, corpus / "b", corpus / "c"]
    with pytest.raises(ConfigError, match=r"no definition\.json in it or in its subdirectories"):
        find_problem_dirs([corpus / "not_a_problem"])
    with pytest.raises(ConfigError, match="missing: no such directory"):
        find_problem_dirs([tmp_path / "missing"])
    with pytest.raises(ConfigError, match="two problems named 'b'"):
        find_problem_dirs([corpus, _problem(tmp_path / "other", "b")])


def _result(name: str, *, triton: bool, best_ms: float, compile_ms: float) -> ProblemResult:
    """A finished problem whose best (one attempt) takes best_ms on both workloads."""
    knobs: dict[str, str | int | float | bool] = (
        {"space": "triton/gen", "template": "gen"} if triton else {"variant": "eager"}
    )
    knobs |= {} if triton else {"compiled": False}
    best = make_attempt(0, (best_ms, best_ms), Verdict.NEW_BEST, agent="fusion", knobs=knobs)
    extra = [
        BaselineRun("compile-default", "PASSED", {"w0": compile_ms, "w1": compile_ms}, {}, "bench")
    ]
    row = build_row(name, [best], make_record(best, memory_bounds((0.4, 0.8)), "cpu"), extra)
    return ProblemResult(row, f"runs/{name}", 1.0, 1.0, [], None)


def test_rows_and_summary_count_what_the_goals_ask(tmp_path: Path) -> None:
    failed = make_attempt(0, None, Verdict.FAILED)
    no_pass = build_row("d", [failed], make_record(None, memory_bounds((0.4, 0.8)), "cpu"))
    progress = BenchProgress(
        meta={"command": "x", "date": "2026-12-05", "machine": {"gpu": "none"}},
        results={
            "a": _result("a", triton=True, best_ms=0.5, compile_ms=1.0),
            "b": _result("b", triton=False, best_ms=2.0, compile_ms=1.0),
            "d": ProblemResult(no_pass, "runs/d", 1.0, 1.0, [], None),
        },
        failed={"c": "ProblemFormatError: c/definition.json: not JSON"},
        not_reached={"e": "total time 300 s used up"},
        sources={n: f"dirs/{n}" for n in "abcdef"},
    )
    rows = suite_rows(progress)
    assert [(r.problem, r.status) for r in rows] == [
        ("a", "ok"),
        ("b", "ok"),
        ("c", "failed"),
        ("d", "failed"),
        ("e", "not reached"),
        ("f", "not reached"),  # no outcome yet: a run cut off here lists it as not reached
    ]
    a = rows[0]
    assert (a.best_agent, a.best_family, a.triton_passed) == ("fusion", "triton/gen", True)
    assert (a.best_compile_variant, a.speedup_vs_compile) == ("compile-default", 2.0)
    assert a.fraction_of_roofline == pytest.approx(math.sqrt(0.4 / 0.5 * 0.8 / 0.5))
    assert rows[1].best_family == "eager" and not rows[1].triton_passed
    assert rows[3].reason == "no candidate PASSED in 1 evaluated"
    summary = summarize_suite(rows)
    assert (summary.ok, summary.failed, summary.not_reached) == (2, 2, 2)
    assert (summary.at_least_best_compile, summary.with_best_compile) == (1, 2)
    assert summary.vs_compile.geomean == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert (summary.triton_passed, summary.run) == (1, 4)
    assert summary.failures_by_cause == {
        "ProblemFormatError": ["c"],
        "no candidate PASSED": ["d"],
        "not reached": ["e", "f"],
    }
    table = suite_markdown(rows)
    assert "PASSED generated Triton kernel (family triton/*): 1 of 4 problems run (25%" in table
    assert "Best at least as fast as the best PASSED compile variant: 1 of 2" in table
    settings = BenchSettings("cpu", list(progress.sources), "workload.jsonl", tmp_path)
    json_path, md_path = write_suite(settings, progress)
    data = json.loads(json_path.read_text())
    assert [r["status"] for r in data["rows"]] == [r.status for r in rows]
    assert data["summary"]["failures_by_cause"]["ProblemFormatError"] == ["c"]
    assert SUITE_HEADER in md_path.read_text()


@pytest.mark.slow
def test_suite_on_cpu_records_a_broken_problem_and_runs_the_others(tmp_path: Path) -> None:
    """A real run: a broken definition.json first, then two built-in problems, one candidate
    each, no compile baselines (a cold torch.compile takes 30-50 s per evaluation here)."""
    broken = tmp_path / "problems" / "broken"
    broken.mkdir(parents=True)
    (broken / "definition.json").write_text("{not json")
    (broken / "workload.jsonl").write_text("")
    out = tmp_path / "out"
    command = [
        sys.executable,
        str(SCRIPT),
        str(broken),
        str(builtin_dir() / "rmsnorm"),
        str(builtin_dir() / "softmax"),
        "--device",
        "cpu",
        "--budget",
        "1",
        "--baselines",
        "none",
        "--out",
        str(out),
        "--set",
        "guard.enabled=false",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((out / "suite.json").read_text())
    rows = {r["problem"]: r for r in data["rows"]}
    assert list(rows) == ["broken", "rmsnorm", "softmax"]
    assert rows["broken"]["status"] == "failed"
    assert "definition.json" in rows["broken"]["reason"]
    for name in ("rmsnorm", "softmax"):
        row = rows[name]
        assert row["status"] == "ok", row
        assert row["evaluated"] == 1 and row["best_ms"] > 0 and row["best_agent"]
        assert row["compile_status"] == "NOT_RUN" and row["speedup_vs_compile"] is None
        assert row["fraction_of_roofline"] is not None
    assert data["summary"]["failures_by_cause"] == {rows["broken"]["cause"]: ["broken"]}
    table = (out / "suite.md").read_text()
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("| problem |"))
    assert header == SUITE_HEADER
    for name in ("broken", "rmsnorm", "softmax"):
        line = next(line for line in lines if line.startswith(f"| {name} |"))
        assert line.count("|") == header.count("|")
    assert "Failures by cause: " in table
