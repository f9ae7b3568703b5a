"""Per-candidate cost of a warm DockerSandbox vs LocalSandbox for a trivial kernel (CPU).

Starts the tests' private dockerd and stand-in image (tests/execution/docker_env.py), evaluates
`x + y` on one small workload (1 correctness round, 1 timed iteration) RUNS times in each sandbox,
interleaved, after one untimed warm-up each (the docker one starts the pool container), and prints
the median EvalResult.wall_s (sandbox start to result) of each and their difference.

    .venv/bin/python scripts/bench_sandbox_overhead.py [RUNS]
"""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "execution"))

from docker_env import start_engine  # noqa: E402

from kernelarc.execution import LocalSandbox  # noqa: E402
from kernelarc.execution.docker_sandbox import DockerSandbox  # noqa: E402
from kernelarc.problems.files import load_problem  # noqa: E402
from kernelarc.schema import EvalRequest, EvalStatus, Solution, TimingConfig  # noqa: E402


def _request() -> EvalRequest:
    prob = load_problem(ROOT / "tests" / "samples" / "problems" / "vector_add")
    solution = Solution.model_validate(
        {
            "name": "add_return",
            "definition": prob.definition.name,
            "author": "bench",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "kernel.py", "content": "def run(x, y):\n    return x + y\n"}],
        }
    )
    return EvalRequest(
        definition=prob.definition,
        workloads=list(prob.workloads)[:1],
        solution=solution,
        correctness_rounds=1,
        timing=TimingConfig(warmup=0, iterations=1),
        problem_dir=str(prob.path),
    )


def main(runs: int) -> int:
    engine = start_engine()
    if isinstance(engine, str):
        print(f"no Docker engine: {engine}", file=sys.stderr)
        return 1
    request = _request()
    times: dict[str, list[float]] = {"local": [], "docker": []}
    try:
        local = LocalSandbox()
        with DockerSandbox(
            image=engine.image_id,
            docker_host=engine.host,
            python=engine.python,
            extra_mounts=engine.mounts,
        ) as docker_sandbox:
            sandboxes = {"local": local, "docker": docker_sandbox}
            started = time.monotonic()
            cold = docker_sandbox.evaluate(request, timeout_s=300).wall_s
            local.evaluate(request, timeout_s=300)
            print(f"warm-up: docker {cold:.2f} s (container start included)")
            for _ in range(runs):
                for name, sandbox in sandboxes.items():
                    result = sandbox.evaluate(request, timeout_s=300)
                    status = {t.evaluation.status for t in result.traces if t.evaluation}
                    if status != {EvalStatus.PASSED}:
                        print(f"{name}: unexpected {status}", file=sys.stderr)
                        return 1
                    times[name].append(result.wall_s)
            elapsed = time.monotonic() - started
    finally:
        engine.stop()
    print(f"\n{runs} runs each, interleaved, {elapsed:.0f} s in all")
    print(f"{'sandbox':<8} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, values in times.items():
        print(
            f"{name:<8} {statistics.median(values):>9.3f} {min(values):>7.3f} {max(values):>7.3f}"
        )
    overhead = statistics.median(times["docker"]) - statistics.median(times["local"])
    print(f"docker - local (medians): {overhead:+.3f} s per candidate")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
