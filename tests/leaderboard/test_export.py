"""leaderboard.export_run: best PASSED per problem, SOL-ExecBench files, determinism, refusals."""

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kernelarc.errors import ConfigError
from kernelarc.problems.files import load_solution
from kernelarc.schema import Attempt, EvalStatus, Trace
from leaderboard import export_run
from leaderboard.export import Selection, select_best

MakeAttempt = Callable[..., Attempt]
WriteRun = Callable[[Sequence[Attempt]], Path]


def test_exports_the_best_passed_attempt_per_problem(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    attempts = [
        make_attempt(0, speedup=1.5),
        make_attempt(1, status=EvalStatus.INCORRECT_NUMERICAL),
        make_attempt(2, speedup=2.5, agent="fuser"),
        make_attempt(3, speedup=2.0),
        make_attempt(4, problem="softmax", speedup=1.1, latency_ms=0.05),
    ]
    out = tmp_path / "out"
    written = export_run(write_run(attempts), out)

    assert written == [
        out / "rmsnorm" / "solution.json",
        out / "rmsnorm" / "traces.jsonl",
        out / "softmax" / "solution.json",
        out / "softmax" / "traces.jsonl",
        out / "summary.json",
    ]
    best = attempts[2]
    assert load_solution(out / "rmsnorm" / "solution.json") == best.proposal.solution
    lines = (out / "rmsnorm" / "traces.jsonl").read_text().splitlines()
    assert [Trace.model_validate_json(line) for line in lines] == best.traces
    summary = json.loads((out / "summary.json").read_text())
    assert summary == {
        "rmsnorm": {
            "agent": "fuser",
            "attempt_index": 2,
            "latency_ms": 0.2,
            "proposal_id": best.proposal.id,
            "solution": best.proposal.solution.name,
            "speedup": 2.5,
            "strategy": "tiling",
        },
        "softmax": {
            "agent": "tiler",
            "attempt_index": 4,
            "latency_ms": 0.05,
            "proposal_id": attempts[4].proposal.id,
            "solution": attempts[4].proposal.solution.name,
            "speedup": 1.1,
            "strategy": "tiling",
        },
    }


def test_solution_json_is_explicit_sorted_and_null_free(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    export_run(write_run([make_attempt(0)]), tmp_path / "out")
    text = (tmp_path / "out" / "rmsnorm" / "solution.json").read_text()
    data = json.loads(text)
    assert data["spec"]["destination_passing_style"] is False
    assert data["spec"]["target_hardware"] == ["B200", "LOCAL"]
    assert "null" not in text
    assert "description" not in data
    assert list(data) == sorted(data)
    assert list(data["spec"]) == sorted(data["spec"])
    assert text.endswith("}\n")


@pytest.mark.parametrize(
    ("rows", "winner"),
    [
        pytest.param([(0, 2.0, 0.3), (1, 2.0, 0.1), (2, 1.9, 0.01)], 1, id="tie-lower-latency"),
        pytest.param([(0, 2.0, 0.1), (1, 2.0, 0.1), (2, 2.0, 0.2)], 0, id="tie-lower-index"),
        pytest.param([(5, 2.0, 0.1), (3, 2.0, 0.1)], 3, id="index-not-file-order"),
        pytest.param([(0, 1.0, 0.1), (1, 3.0, 9.0)], 1, id="speedup-beats-latency"),
    ],
)
def test_tie_breaking(
    make_attempt: MakeAttempt, rows: list[tuple[int, float, float]], winner: int
) -> None:
    attempts = [make_attempt(i, speedup=s, latency_ms=lat) for i, s, lat in rows]
    assert select_best(attempts).best["rmsnorm"].index == winner


def test_non_finite_speedup_is_not_eligible(make_attempt: MakeAttempt) -> None:
    attempts = [make_attempt(0, speedup=1.2), make_attempt(1, speedup=float("inf"))]
    assert select_best(attempts).best["rmsnorm"].index == 0


def test_export_is_deterministic(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run(
        [
            make_attempt(0, problem="softmax", speedup=1.3),
            make_attempt(
                1, sources={"kernel.py": "def run(x, w):\n    return x\n", "b.py": "B=1\n"}
            ),
        ]
    )
    first = export_run(run_dir, tmp_path / "a")
    second = export_run(run_dir, tmp_path / "b")
    again = export_run(run_dir, tmp_path / "a")
    assert [p.relative_to(tmp_path / "a") for p in first] == [
        p.relative_to(tmp_path / "b") for p in second
    ]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert again == first


def test_problems_without_a_passed_attempt_are_skipped_with_a_warning(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run_dir = write_run(
        [
            make_attempt(0),
            make_attempt(1, problem="rope", status=EvalStatus.RUNTIME_ERROR),
        ]
    )
    written = export_run(run_dir, tmp_path / "out")
    assert not (tmp_path / "out" / "rope").exists()
    assert len(written) == 3
    assert "no PASSED attempt for rope" in caplog.text
    failed = make_attempt(1, problem="rope", status=EvalStatus.RUNTIME_ERROR)
    assert select_best([failed]) == Selection(best={}, without_passed=["rope"])


def test_no_passed_attempt_at_all_lists_the_problems(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    run_dir = write_run(
        [
            make_attempt(0, problem="rope", status=EvalStatus.RUNTIME_ERROR),
            make_attempt(1, problem="gemm", status=EvalStatus.INCORRECT_SHAPE),
        ]
    )
    with pytest.raises(ConfigError, match=r"no PASSED attempt for any problem \(gemm, rope\)"):
        export_run(run_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run dir not found"):
        export_run(tmp_path / "nope", tmp_path / "out")


def test_dir_without_attempts_log_is_not_a_run_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not a KernelArc run dir \(no attempts\.jsonl\)"):
        export_run(tmp_path, tmp_path / "out")


def test_empty_attempts_log(tmp_path: Path) -> None:
    (tmp_path / "attempts.jsonl").write_text("")
    with pytest.raises(ConfigError, match="no attempts recorded"):
        export_run(tmp_path, tmp_path / "out")


CPP = ("cuda_cpp",)


@pytest.mark.parametrize(
    ("problem", "sources", "languages", "entry", "message"),
    [
        pytest.param(
            "rmsnorm",
            {"kernel.py": "def run(): ...\n", "definition.json": "{}"},
            ("pytorch",),
            "kernel.py::run",
            "source 'definition.json' uses a file name the SOL-ExecBench evaluator writes",
            id="reserved-definition",
        ),
        pytest.param(
            "rmsnorm",
            {"eval_driver.py": "def run(): ...\n"},
            ("pytorch",),
            "eval_driver.py::run",
            "source 'eval_driver.py' uses a file name",
            id="reserved-entry",
        ),
        pytest.param(
            "rmsnorm",
            {"kernel.py": "def run(): ...\n", "benchmark_kernel_v1.so": "x"},
            ("pytorch",),
            "kernel.py::run",
            "source 'benchmark_kernel_v1.so'",
            id="reserved-so",
        ),
        pytest.param(
            "rmsnorm",
            {"kernel.py": "def run(): ...\n", "triton.py": "x = 1\n"},
            ("triton",),
            "kernel.py::run",
            "source 'triton.py' shadows the 'triton' package",
            id="shadow-module",
        ),
        pytest.param(
            "rmsnorm",
            {"kernel.py": "def run(): ...\n", "sol_execbench/__init__.py": "x = 1\n"},
            ("pytorch",),
            "kernel.py::run",
            "shadows the 'sol_execbench' package",
            id="shadow-package",
        ),
        pytest.param(
            "gemm",
            {"main.cu": "int run();\n", "sub/extra.cu": "int x;\n"},
            CPP,
            "main.cu::run",
            "C++ source 'sub/extra.cu' is not in the top-level dir",
            id="nested-cpp",
        ),
        pytest.param(
            "../escape",
            {"kernel.py": "def run(): ...\n"},
            ("pytorch",),
            "kernel.py::run",
            "cannot be an export directory name",
            id="unsafe-problem-name",
        ),
    ],
)
def test_refuses_solutions_the_official_evaluator_would_mis_stage(
    tmp_path: Path,
    make_attempt: MakeAttempt,
    write_run: WriteRun,
    problem: str,
    sources: dict[str, str],
    languages: tuple[str, ...],
    entry: str,
    message: str,
) -> None:
    bad = make_attempt(1, problem=problem, sources=sources, languages=languages, entry_point=entry)
    run_dir = write_run([make_attempt(0, problem="aaa_fine"), bad])
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        export_run(run_dir, tmp_path / "out")
    assert repr(problem) in str(info.value)
    # Nothing is half-exported: not even the problem that was fine.
    assert not (tmp_path / "out").exists()


def test_nested_python_and_header_files_are_fine(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    """Only top-level names collide with the staging dir; nested ones and headers are safe."""
    sources = {"main.cu": "int run();\n", "include/util.cuh": "#pragma once\n"}
    attempt = make_attempt(
        0, problem="gemm", sources=sources, languages=CPP, entry_point="main.cu::run"
    )
    py = make_attempt(
        1,
        sources={
            "kernel.py": "def run(): ...\n",
            "lib/definition.json": "{}",
            "lib/triton.py": "x",
        },
    )
    export_run(write_run([attempt, py]), tmp_path / "out")
    solution = load_solution(tmp_path / "out" / "gemm" / "solution.json")
    assert [s.path for s in solution.sources] == ["main.cu", "include/util.cuh"]
