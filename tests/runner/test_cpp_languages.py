"""C++ solutions: build flags, real torch-extension builds, build errors, and cute_dsl imports.

One module-scoped fixture builds the CPU axpby sample once (~35 s cold: torch headers); the
other builds fail fast. `gpu` tests (a .cu kernel, a CuTe include) run on the GPU machine.
"""

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from kernelarc.runner.build_session import session_members
from kernelarc.runner.cpp_build import (
    B200_GENCODE,
    NO_CUDA_TORCH,
    BuildError,
    BuildFlags,
    build_extension,
    clip_log,
    compiled_sources,
    compute_build_flags,
    cutlass_include_dirs,
    gencode_flags,
)
from kernelarc.runner.staging import (
    CUTE_DSL_MISSING,
    StagingError,
    build_solution,
    load_entry,
    write_sources,
)
from kernelarc.schema import CompileOptions, Solution, TargetHardware

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "cpp"
B200 = TargetHardware.B200
LOCAL = TargetHardware.LOCAL
SM90 = "-gencode=arch=compute_90,code=sm_90"


def _solution(
    sample: str,
    entry: str = "main.cpp::run",
    *,
    languages: tuple[str, ...] = ("cuda_cpp",),
    targets: tuple[str, ...] = ("LOCAL",),
    dps: bool = False,
    compile_options: dict[str, list[str]] | None = None,
) -> Solution:
    root = SAMPLES / sample
    sources = [
        {"path": p.relative_to(root).as_posix(), "content": p.read_text(encoding="utf-8")}
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]
    spec: dict[str, object] = {
        "languages": list(languages),
        "target_hardware": list(targets),
        "entry_point": entry,
        "destination_passing_style": dps,
    }
    if compile_options is not None:
        spec["compile_options"] = compile_options
    return Solution.model_validate(
        {"name": f"{sample}_v1", "definition": "d", "author": "t", "spec": spec, "sources": sources}
    )


# ---- flag computation (pure) -------------------------------------------------------------


def test_absent_options_without_injection_are_all_empty() -> None:
    assert compute_build_flags(None, [LOCAL], None) == BuildFlags((), (), ())


def test_absent_options_with_injection_hold_only_gencode() -> None:
    flags = compute_build_flags(None, [LOCAL], (9, 0))
    assert flags == BuildFlags((), (SM90,), ("-lcuda",))
    flags = compute_build_flags(None, [B200], None)
    assert flags == BuildFlags((), (B200_GENCODE,), ("-lcuda",))


def test_present_options_take_defaults_per_field() -> None:
    flags = compute_build_flags(CompileOptions(), [LOCAL], (9, 0))
    assert flags == BuildFlags((), ("-O3", "--use_fast_math", SM90), ("-lcuda",))


def test_given_list_replaces_its_default() -> None:
    options = CompileOptions.model_validate({"cuda_cflags": ["-std=c++17"]})
    flags = compute_build_flags(options, [B200], None)
    assert flags == BuildFlags((), ("-std=c++17", B200_GENCODE), ("-lcuda",))
    options = CompileOptions.model_validate({"cflags": ["-O2"], "ld_flags": []})
    flags = compute_build_flags(options, [LOCAL], None)
    assert flags == BuildFlags(("-O2",), ("-O3", "--use_fast_math"), ())


@pytest.mark.parametrize(
    "given",
    [
        ["-gencode=arch=compute_80,code=sm_80"],
        ["-gencode", "arch=compute_80,code=sm_80"],
        ["-arch=sm_80"],
        ["--gpu-architecture=sm_80"],
    ],
)
def test_arch_flag_present_means_no_injection(given: list[str]) -> None:
    options = CompileOptions.model_validate({"cuda_cflags": given})
    flags = compute_build_flags(options, [B200, LOCAL], (9, 0))
    assert flags.cuda_cflags == tuple(given)


def test_b200_and_local_both_inject() -> None:
    assert gencode_flags([B200, LOCAL], (9, 0)) == [B200_GENCODE, SM90]
    assert gencode_flags([B200, LOCAL], None) == [B200_GENCODE]
    assert gencode_flags([LOCAL, LOCAL], (10, 0)) == ["-gencode=arch=compute_100,code=sm_100"]


def test_cpu_torch_drops_only_the_default_lcuda() -> None:
    flags = compute_build_flags(CompileOptions(), [B200], None, torch_cuda=False)
    assert flags.ld_flags == ()
    flags = compute_build_flags(None, [B200], None, torch_cuda=False)
    assert flags.ld_flags == ()
    explicit = CompileOptions.model_validate({"ld_flags": ["-lcuda", "-lm"]})
    flags = compute_build_flags(explicit, [B200], None, torch_cuda=False)
    assert flags.ld_flags == ("-lcuda", "-lm")


def test_only_top_level_sources_are_compiled() -> None:
    assert compiled_sources(_solution("axpby")) == ["axpby_impl.cpp", "main.cpp"]


def test_clip_log_keeps_head_and_tail() -> None:
    text = "first error\n" + "x" * 1000 + "\nlast line"
    clipped = clip_log(text, head=20, tail=20)
    assert clipped.startswith("first error") and clipped.endswith("last line")
    assert "characters cut" in clipped
    assert clip_log("short") == "short"


# ---- real builds -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def axpby(tmp_path_factory: pytest.TempPathFactory) -> tuple[Solution, Path]:
    """The CPU axpby sample, written and built once (separate build step, like the worker)."""
    solution = _solution("axpby", dps=True)
    root = tmp_path_factory.mktemp("axpby")
    src = write_sources(solution, root)
    built = build_solution(solution, src)
    assert built is not None and built.path.is_file()
    assert built.path.parent == (root / "build").resolve()
    return solution, src


def test_cpp_solution_builds_and_runs(axpby: tuple[Solution, Path]) -> None:
    solution, src = axpby
    run = load_entry(solution, src)
    x = torch.randn(1000)
    y = torch.randn(1000)
    out = torch.zeros(1000)
    assert run(x, y, 0.5, out) is None
    torch.testing.assert_close(out, 0.5 * x + y)
    with pytest.raises(RuntimeError, match="float32 only"):
        run(x.double(), y.double(), 0.5, out.double())


def test_second_build_reuses_the_first(axpby: tuple[Solution, Path]) -> None:
    solution, src = axpby
    first = build_solution(solution, src)
    assert first is not None
    log = first.path.with_suffix(".log")
    stamp = log.stat().st_mtime_ns
    again = build_solution(solution, src)
    assert again == first
    assert log.stat().st_mtime_ns == stamp  # the child did not run again


def test_nested_source_is_not_compiled(axpby: tuple[Solution, Path]) -> None:
    solution, src = axpby
    # src/kernel.cpp holds an #error; the fixture's build succeeding proves it was skipped.
    assert (src / "src" / "kernel.cpp").is_file()
    built = build_solution(solution, src)
    assert built is not None
    request = built.path.with_suffix(".request.json").read_text(encoding="utf-8")
    assert "kernel.cpp" not in request


def test_syntax_error_is_a_build_error_with_the_compiler_log(tmp_path: Path) -> None:
    solution = _solution("syntax_error")
    src = write_sources(solution, tmp_path)
    with pytest.raises(BuildError) as info:
        load_entry(solution, src)
    assert "build failed" in info.value.reason
    assert "main.cpp" in info.value.log_tail
    assert "error:" in info.value.log_tail
    assert info.value.log_tail in str(info.value)


def test_missing_entry_symbol_is_a_staging_error(axpby: tuple[Solution, Path]) -> None:
    solution, src = axpby
    spec = solution.spec.model_copy(update={"entry_point": "main.cpp::missing"})
    other = solution.model_copy(update={"spec": spec})
    # Same sources and flags: the fixture's build is reused, only the symbol lookup fails.
    assert build_solution(other, src) == build_solution(solution, src)
    with pytest.raises(StagingError, match="no callable 'missing'"):
        load_entry(other, src)


@pytest.mark.skipif(torch.version.cuda is not None, reason="checks the CPU-only torch message")
def test_cu_source_on_cpu_torch_is_a_clear_build_error(tmp_path: Path) -> None:
    solution = _solution("vector_add_cu", "main.cu::run", dps=True)
    src = write_sources(solution, tmp_path)
    with pytest.raises(BuildError, match=NO_CUDA_TORCH):
        build_solution(solution, src)


def test_no_top_level_source_is_a_build_error(tmp_path: Path) -> None:
    solution = Solution.model_validate(
        {
            "name": "nested_only",
            "definition": "d",
            "author": "t",
            "spec": {
                "languages": ["cuda_cpp"],
                "target_hardware": ["LOCAL"],
                "entry_point": "src/kernel.cpp::run",
            },
            "sources": [{"path": "src/kernel.cpp", "content": "int run() { return 0; }\n"}],
        }
    )
    src = write_sources(solution, tmp_path)
    with pytest.raises(BuildError, match="no top-level"):
        build_solution(solution, src)


def test_hung_compiler_times_out_and_is_killed(tmp_path: Path) -> None:
    solution = _solution("hang")
    src = write_sources(solution, tmp_path)
    os.mkfifo(src / "hang.h")  # no writer: opening it blocks the compiler
    with pytest.raises(BuildError, match="timed out") as info:
        build_extension(solution, src, tmp_path / "build", timeout_s=10, local_capability=None)
    assert "build_timeout_s" in info.value.reason
    # Nothing of the build is left: no process still has the sources' dir on its command line.
    leftovers = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(tmp_path).encode() in cmdline:
            leftovers.append(proc.name)
    assert leftovers == []


def test_session_members_lists_no_one_for_a_dead_session() -> None:
    assert session_members(2**22 + 12345) == []


# ---- cute_dsl ----------------------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("cutlass") is not None, reason="nvidia-cutlass-dsl is installed"
)
def test_cute_dsl_without_the_package_says_what_to_install(tmp_path: Path) -> None:
    solution = Solution.model_validate(
        {
            "name": "cute_v1",
            "definition": "d",
            "author": "t",
            "spec": {
                "languages": ["cute_dsl"],
                "target_hardware": ["LOCAL"],
                "entry_point": "cute_kernel.py::run",
            },
            "sources": [
                {
                    "path": "cute_kernel.py",
                    "content": "import cutlass.cute as cute\n\ndef run(x):\n    return x\n",
                }
            ],
        }
    )
    src = write_sources(solution, tmp_path)
    with pytest.raises(StagingError, match=r"pip install kernelarc\[cutlass\]") as info:
        load_entry(solution, src)
    assert CUTE_DSL_MISSING in str(info.value)


# ---- GPU (H200) ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_cu_kernel_builds_for_the_local_gpu_and_runs(tmp_path: Path) -> None:
    solution = _solution("vector_add_cu", "main.cu::run", dps=True)
    src = write_sources(solution, tmp_path)
    built = build_solution(solution, src)
    assert built is not None
    major, minor = torch.cuda.get_device_capability()
    request = built.path.with_suffix(".request.json").read_text(encoding="utf-8")
    assert f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}" in request
    run = load_entry(solution, src)
    x = torch.randn(100_003, device="cuda")
    y = torch.randn(100_003, device="cuda")
    out = torch.zeros_like(x)
    run(x, y, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)


@pytest.mark.gpu
@pytest.mark.skipif(not cutlass_include_dirs(), reason="no CUTLASS headers installed")
def test_cute_header_include_compiles_and_runs(tmp_path: Path) -> None:
    solution = _solution(
        "cute_include",
        "main.cu::run",
        languages=("cutlass",),
        compile_options={"cuda_cflags": ["-O3"]},
    )
    src = write_sources(solution, tmp_path)
    run = load_entry(solution, src)
    x = torch.randn(4097, device="cuda")
    out = run(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x)
