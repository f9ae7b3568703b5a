"""EvalRequests for the tests' vector_add problem (tests/samples/problems/vector_add), shared by
the sandbox, spare-runner and CUDA IPC tests (importable from any test: tests/ is on sys.path)."""

from pathlib import Path

from kernelarc.problems.files import load_problem
from kernelarc.schema import EvalRequest, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parent / "samples"


def sample_kernel(name: str) -> str:
    """The source of tests/samples/kernels/NAME.py."""
    return (SAMPLES / "kernels" / f"{name}.py").read_text()


def vector_add_request(
    source: str,
    *,
    name: str = "kernel",
    device: str = "cpu",
    language: str = "pytorch",
    dps: bool = False,
    correctness_rounds: int = 1,
    timing: TimingConfig | None = None,
    first_workload_only: bool = True,
) -> EvalRequest:
    """A request to evaluate `source` (entry `kernel.py::run`) on vector_add."""
    prob = load_problem(SAMPLES / "problems" / "vector_add")
    solution = Solution.model_validate(
        {
            "name": name,
            "definition": prob.definition.name,
            "author": "tests",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )
    workloads = list(prob.workloads)
    return EvalRequest(
        definition=prob.definition,
        workloads=workloads[:1] if first_workload_only else workloads,
        solution=solution,
        device=device,  # type: ignore[arg-type]
        correctness_rounds=correctness_rounds,
        timing=timing or TimingConfig(warmup=0, iterations=1),
        problem_dir=str(prob.path),
    )
