"""Per-candidate cost of LocalSandbox and a warm DockerSandbox for a trivial kernel (CPU), with
and without the warm spare runner.

Starts the tests' private dockerd and stand-in image (tests/sandboxes/docker_env.py) and
evaluates `x + y` on one small workload (1 correctness round, 1 timed iteration) in four
sandboxes: LocalSandbox and DockerSandbox each with `warm_spare` on (the default) and off. It
prints the median, min and max EvalResult.wall_s (sandbox start to result) of each.

A spare is started when an evaluation ends and needs a few seconds to import torch, so each round
is: both warm-spare sandboxes, then GAP seconds of idle (the two new spares import; the default
10 s is ample on the 2-core development machine, where one import takes about 3 s), then both
spare-less ("cold") sandboxes, whose runners import torch inside the measured time, as every
runner did before the spare existed. So no import runs beside a measured evaluation, and every
warm evaluation finds a finished spare, as a candidate does that arrives GAP seconds or more
after the previous one of its sandbox; one that comes sooner waits for the rest of the import.
Only evaluations that report they used the spare count as warm. One untimed warm-up per sandbox
first (the Docker ones start their pool containers), then GAP seconds of idle. Last, RUNS
evaluations back to back in the local warm-spare sandbox: each takes the spare the previous one
started a moment before, so it waits for most of the import (the worst case of the spare). Then
the same back to back in a LocalSandbox forced to the CUDA rule (`spare_start="concurrent"`:
the next spare starts when a runner is taken, as the other jail user), with the trivial kernel
and with one that sleeps SLOW seconds per call (default 2; 3 calls per evaluation), whose
evaluations outlast an import, as GPU evaluations with real timing do. The slow kernel also runs
back to back with the CPU rule (spare after the end) for comparison.

Every sandbox above runs one-off runners (`resident_requests=0`), the cost being measured being
a runner's. Last, RUNS evaluations back to back in a LocalSandbox with its default resident
judge (the runner judges request after request of the problem: no runner start, the reference's
inputs, outputs and latency kept), after one untimed evaluation that fills its cache.

    .venv/bin/python scripts/bench_sandbox_overhead.py [RUNS] [--gap SECONDS] [--slow SECONDS]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "sandboxes"))

from docker_env import start_engine  # noqa: E402

from kernelarc.problems.files import load_problem  # noqa: E402
from kernelarc.sandboxes import LocalSandbox, Sandbox  # noqa: E402
from kernelarc.sandboxes.docker import DockerSandbox  # noqa: E402
from kernelarc.sandboxes.runner_lifecycle import WARM_SPARE_NOTE, SpareStart  # noqa: E402
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, Solution, TimingConfig  # noqa: E402

TRIVIAL = "def run(x, y):\n    return x + y\n"


def _slow(seconds: float) -> str:
    return f"import time\n\ndef run(x, y):\n    time.sleep({seconds})\n    return x + y\n"


def _request(source: str = TRIVIAL) -> EvalRequest:
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
            "sources": [{"path": "kernel.py", "content": source}],
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


WARM_KINDS = ("local warm spare", "docker warm spare")
COLD_KINDS = ("local cold", "docker cold")
BACK_TO_BACK = "local back to back"
CONCURRENT = "local b2b concurrent"
SLOW_AFTER = "local b2b slow after"
SLOW_CONCURRENT = "local b2b slow conc"
RESIDENT = "local b2b resident"


def _check(name: str, result: EvalResult) -> None:
    status = {t.evaluation.status for t in result.traces if t.evaluation}
    if status != {EvalStatus.PASSED}:
        msg = f"{name}: unexpected {status}\n{result.stderr_tail[-3000:]}"
        raise RuntimeError(msg)


def _warm(result: EvalResult) -> bool:
    return any(n.startswith(WARM_SPARE_NOTE) for n in result.sandbox_notes)


def _measure(sandboxes: dict[str, Sandbox], runs: int, gap_s: float) -> dict[str, list[float]]:
    request = _request()
    times: dict[str, list[float]] = {name: [] for name in sandboxes}
    for name, sandbox in sandboxes.items():
        result = sandbox.evaluate(request, timeout_s=300)
        _check(name, result)
        print(f"warm-up {name}: {result.wall_s:.2f} s", flush=True)
    time.sleep(gap_s)  # the first spares import torch
    for index in range(runs):
        for name in WARM_KINDS:
            result = sandboxes[name].evaluate(request, timeout_s=300)
            _check(name, result)
            if _warm(result):
                times[name].append(result.wall_s)
            else:
                print(f"round {index}: {name} found no spare; not counted", file=sys.stderr)
        # The spares just started import torch now, not beside the cold evaluations below (or
        # the warm ones of the next round).
        time.sleep(gap_s)
        for name in COLD_KINDS:
            result = sandboxes[name].evaluate(request, timeout_s=300)
            _check(name, result)
            times[name].append(result.wall_s)
    # Candidates faster than an import: each takes the spare the previous one just started.
    times[BACK_TO_BACK] = []
    for _ in range(runs):
        result = sandboxes["local warm spare"].evaluate(request, timeout_s=300)
        _check(BACK_TO_BACK, result)
        times[BACK_TO_BACK].append(result.wall_s)
    return times


def _back_to_back(sandbox: Sandbox, request: EvalRequest, name: str, runs: int) -> list[float]:
    """One untimed evaluation, then `runs` back to back; the wall_s of each."""
    _check(name, sandbox.evaluate(request, timeout_s=300))
    times = []
    for _ in range(runs):
        result = sandbox.evaluate(request, timeout_s=300)
        _check(name, result)
        times.append(result.wall_s)
        if not _warm(result):
            print(f"{name}: an evaluation found no spare", file=sys.stderr)
        if name == RESIDENT and result.resident_request < 2:
            print(f"{name}: an evaluation was not its judge's second or later", file=sys.stderr)
    return times


def _measure_concurrent(runs: int, slow_s: float, gap_s: float) -> dict[str, list[float]]:
    """Back to back with the spare started beside the candidate (the CUDA rule), and the slow
    kernel with both rules."""
    times: dict[str, list[float]] = {}
    plan: list[tuple[str, SpareStart, EvalRequest]] = [
        (CONCURRENT, "concurrent", _request()),
        (SLOW_AFTER, "after", _request(_slow(slow_s))),
        (SLOW_CONCURRENT, "concurrent", _request(_slow(slow_s))),
    ]
    for name, rule, request in plan:
        time.sleep(gap_s)  # the previous sandbox's processes are gone
        with LocalSandbox(spare_start=rule, resident_requests=0) as sandbox:
            times[name] = _back_to_back(sandbox, request, name, runs)
    time.sleep(gap_s)
    with LocalSandbox() as sandbox:  # the default: a resident judge
        times[RESIDENT] = _back_to_back(sandbox, _request(), RESIDENT, runs)
    return times


def main(argv: list[str]) -> int:
    """Run the benchmark; 0 on success, 1 without an engine or on an unexpected status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=5)
    parser.add_argument("--gap", type=float, default=10.0, help="idle seconds between rounds")
    parser.add_argument("--slow", type=float, default=2.0, help="the slow kernel's sleep per call")
    args = parser.parse_args(argv)
    engine = start_engine()
    if isinstance(engine, str):
        print(f"no Docker engine: {engine}", file=sys.stderr)
        return 1
    docker: dict[str, Any] = {
        "image": engine.image_id,
        "docker_host": engine.host,
        "python": engine.python,
        "extra_mounts": engine.mounts,
        "extra_env": engine.env,  # PYTHONPATH: this checkout's kernelarc, as the tests do
    }
    started = time.monotonic()
    try:
        with (
            LocalSandbox(resident_requests=0) as local_warm,
            LocalSandbox(warm_spare=False) as local_cold,
            DockerSandbox(**docker, resident_requests=0) as docker_warm,
            DockerSandbox(**docker, warm_spare=False) as docker_cold,
        ):
            sandboxes: dict[str, Sandbox] = {
                "local warm spare": local_warm,
                "docker warm spare": docker_warm,
                "local cold": local_cold,
                "docker cold": docker_cold,
            }
            times = _measure(sandboxes, args.runs, args.gap)
        times.update(_measure_concurrent(args.runs, args.slow, args.gap))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        engine.stop()
    elapsed = time.monotonic() - started
    print(f"\n{args.runs} rounds, {args.gap:g} s idle after the warm evaluations of each, then")
    print(f"{args.runs} back-to-back evaluations in the local warm-spare sandbox; {elapsed:.0f} s")
    print(f"then back to back: concurrent spare; {args.slow:g} s-per-call kernel, after/concurrent")
    print(f"{'sandbox':<19} {'n':>3} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, values in times.items():
        if not values:
            print(f"{name:<19} {0:>3} {'-':>9}")
            continue
        median = statistics.median(values)
        print(f"{name:<19} {len(values):>3} {median:>9.3f} {min(values):>7.3f} {max(values):>7.3f}")
    for kind in ("warm spare", "cold"):
        docker_s, local_s = times[f"docker {kind}"], times[f"local {kind}"]
        if docker_s and local_s:
            overhead = statistics.median(docker_s) - statistics.median(local_s)
            print(f"docker - local ({kind}, medians): {overhead:+.3f} s per candidate")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
