"""The `cutlass` and `cute_dsl` samples (tests/samples/gpu_languages) through LocalSandbox.

On a CPU host what can run does: the samples are valid, exportable solutions without blocking
static findings; CUTLASS solutions end COMPILE_ERROR (CPU torch cannot build `.cu`) and CuTe
DSL ones RUNTIME_ERROR naming the missing package. The `gpu` tests run on the GPU machine
(`STAGES=languages ./scripts/device_run.sh`): each correct sample PASSED, each wrong one
INCORRECT_NUMERICAL.
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelarc.guard import blocking, scan_solution
from kernelarc.problems.files import Problem, load_problem
from kernelarc.runner.cpp_build import NO_CUDA_TORCH, cutlass_include_dirs
from kernelarc.runner.staging import CUTE_DSL_MISSING
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalRequest, EvalStatus, Solution, TimingConfig
from leaderboard.rules import check_exportable

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
LANGUAGES = SAMPLES / "gpu_languages"
TIMEOUT_S = 600.0
#: sample -> (language, entry file, problem, status on a GPU)
CASES = {
    "cutlass_gemm": ("cutlass", "main.cu", "matmul_f32", EvalStatus.PASSED),
    "cutlass_gemm_wrong": ("cutlass", "main.cu", "matmul_f32", EvalStatus.INCORRECT_NUMERICAL),
    "cute_dsl_add": ("cute_dsl", "kernel.py", "vector_add", EvalStatus.PASSED),
    "cute_dsl_add_wrong": ("cute_dsl", "kernel.py", "vector_add", EvalStatus.INCORRECT_NUMERICAL),
}
HAS_CUDA = torch.cuda.is_available()
HAS_DSL = importlib.util.find_spec("cutlass") is not None and (
    importlib.util.find_spec("cutlass.cute") is not None
)


def _problem(sample: str) -> Problem:
    return load_problem(SAMPLES / "problems" / CASES[sample][2])


def sample_solution(sample: str) -> Solution:
    """The sample folder as a Solution (entry `<file>::run`, return style)."""
    language, entry, _, _ = CASES[sample]
    folder = LANGUAGES / sample
    return Solution.model_validate(
        {
            "name": sample,
            "definition": _problem(sample).name,
            "author": "tests",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": f"{entry}::run",
                "destination_passing_style": False,
            },
            "sources": [
                {"path": p.name, "content": p.read_text(encoding="utf-8")}
                for p in sorted(folder.iterdir())
                if p.is_file()
            ],
        }
    )


def _evaluate(sample: str, device: str) -> EvalRequest:
    problem = _problem(sample)
    return EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=sample_solution(sample),
        device=device,  # type: ignore[arg-type]
        correctness_rounds=3,
        timing=TimingConfig(warmup=1, iterations=5),
        problem_dir=str(problem.path),
    )


@pytest.mark.parametrize("sample", sorted(CASES))
def test_samples_are_exportable_solutions_without_blocking_findings(sample: str) -> None:
    solution = sample_solution(sample)
    check_exportable(solution.definition, solution)
    assert blocking(scan_solution(solution)) == []


@pytest.mark.skipif(HAS_CUDA, reason="the CPU-host behaviour (no CUDA here)")
@pytest.mark.parametrize("sample", sorted(CASES))
def test_on_a_cpu_host_the_samples_fail_with_what_is_missing(sample: str) -> None:
    if CASES[sample][0] == "cute_dsl" and HAS_DSL:
        pytest.skip("nvidia-cutlass-dsl is installed here")
    with LocalSandbox(warm_spare=False) as sandbox:
        result = sandbox.evaluate(_evaluate(sample, "cpu"), timeout_s=TIMEOUT_S)
    for trace in result.traces:
        evaluation = trace.evaluation
        assert evaluation is not None
        if CASES[sample][0] == "cutlass":
            assert evaluation.status == EvalStatus.COMPILE_ERROR, evaluation.log
            assert NO_CUDA_TORCH in evaluation.log
        else:
            assert evaluation.status == EvalStatus.RUNTIME_ERROR, evaluation.log
            assert CUTE_DSL_MISSING in evaluation.log


@pytest.mark.gpu
@pytest.mark.parametrize("sample", sorted(CASES))
def test_on_a_gpu_each_sample_gets_its_status(sample: str) -> None:
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    language = CASES[sample][0]
    if language == "cutlass" and not cutlass_include_dirs():
        pytest.skip("no CUTLASS headers (install the nvidia-cutlass wheel or set CUTLASS_DIR)")
    if language == "cute_dsl" and not HAS_DSL:
        pytest.skip("nvidia-cutlass-dsl is not installed (see scripts/device_run.sh, languages)")
    with LocalSandbox(warm_spare=False) as sandbox:
        result = sandbox.evaluate(_evaluate(sample, "cuda"), timeout_s=TIMEOUT_S)
    statuses = [t.evaluation.status for t in result.traces if t.evaluation is not None]
    logs = "\n".join(t.evaluation.log[-1500:] for t in result.traces if t.evaluation is not None)
    assert statuses == [CASES[sample][3]] * len(result.traces), logs
