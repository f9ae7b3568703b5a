"""Throughput of a fixed offline campaign per executor and GPU count (issue #10's benchmark).

Runs the same campaign (a built-in problem, the offline team, a fixed candidate budget,
tracking off, no network needed) once per GPU count, with executor=ray (one actor per GPU) or
executor=local (one timed slot per GPU), and reports candidates per minute (total and per GPU),
the GPU busy fraction (timed slots held / wall x slots), queue wait, the sandbox's fixed cost per
evaluation (a near-empty evaluation of the reference, measured first) and the executor's
dispatch overhead; with two or more GPU counts, the scaling efficiency against the smallest:
(rate_N / rate_1) / (N / 1). A second table has the time per stage (`ThroughputReport.stages`:
proposing, screens, timed evaluations, guard runs, the judges' build/start/correctness/timing,
sandbox overhead) and C++ builds vs build-cache hits. Each campaign gets a share of --max-wall-s
as its `budget.time_s`. Markdown goes to stdout, everything to a JSON file.

When Ray is not importable, `--executor ray` says so (stdout and JSON `ray_missing`) and falls
back to executor=local, so an unattended run still measures something.

    python scripts/bench_throughput.py                         # ray, every visible GPU
    python scripts/bench_throughput.py --gpus 1,2 --json out.json
    python scripts/bench_throughput.py --executor local --gpus 1 --budget 8
    python scripts/bench_throughput.py --device cpu --gpus 1 --budget 3 --problem softmax
    python scripts/bench_throughput.py --executor local --gpus 1 --screens 0,3   # two arms
    python scripts/bench_throughput.py --compare one_gpu.json two_gpus.json   # table only

`--screens` runs one campaign per value of `executor.screens_per_timed_gpu` (correctness
screens beside each timed GPU; local executor on CUDA; 0 = none, the screen then happens in the
timed slot). With two or more values, a disturbance table compares the latency each candidate
got in the arm with screens beside its timing against the same candidate (same sources) in the
arm without: the median ratio says how much the screens slowed the candidates' own timing.

The analysis of the runs and the markdown tables are `throughput_tables.py`'s (beside this file).
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from kernelarc.campaign.device import resolve_device  # noqa: E402
from kernelarc.campaign.lifecycle import (  # noqa: E402
    CampaignOpening,
    TrackingChoice,
    run_campaign_lifecycle,
)
from kernelarc.config import (  # noqa: E402
    AgentsConfig,
    BudgetConfig,
    CampaignConfig,
    EvalConfig,
    ExecutorConfig,
    GuardConfig,
    RayConfig,
    SandboxConfig,
)
from kernelarc.executor.slot_plan import visible_gpus  # noqa: E402
from kernelarc.problems.builtin_set import resolve_problem  # noqa: E402
from kernelarc.rundir import ATTEMPTS_FILE  # noqa: E402
from kernelarc.rundir.attempts_log import read_attempts  # noqa: E402
from kernelarc.sandboxes import LocalSandbox  # noqa: E402
from kernelarc.schema import EvalRequest, EvalStatus, Solution, TimingConfig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its throughput_tables module
from throughput_tables import disturbance, scaling, table  # noqa: E402


@dataclass(frozen=True)
class Args:
    """Parsed command line."""

    executor: str
    gpu_counts: list[int]
    device: str
    problem: str
    workloads: str
    budget: int
    team: list[str]
    guard: bool
    timeout_s: float
    max_wall_s: float
    json_path: Path
    out_dir: Path
    screens: list[int]
    resident: list[int]


def _parse(argv: list[str]) -> Args | list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executor", choices=["ray", "local"], default="ray")
    parser.add_argument("--gpus", default="all", help="GPU counts, e.g. 1,2 (default: all)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--problem", default="rmsnorm", help="built-in problem")
    parser.add_argument("--workloads", default=None, help="default: workload_gpu.jsonl on CUDA")
    parser.add_argument("--budget", type=int, default=16, help="candidates per campaign")
    parser.add_argument("--team", default="triton_template", help="comma-separated agents")
    parser.add_argument("--guard", action="store_true", help="keep the guard's re-timing on")
    parser.add_argument("--timeout-s", type=float, default=180.0, help="per evaluation")
    parser.add_argument(
        "--max-wall-s",
        type=float,
        default=540.0,
        help="whole script; each campaign gets a share as budget.time_s",
    )
    parser.add_argument(
        "--json", dest="json_path", type=Path, default=Path("bench_throughput.json")
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="campaign run dirs")
    parser.add_argument(
        "--screens",
        default="3",
        help="executor.screens_per_timed_gpu values, one campaign each (e.g. 0,3)",
    )
    parser.add_argument(
        "--resident",
        default="64",
        help="sandbox.resident_requests values, one campaign each (e.g. 0,64; 0 = a fresh runner "
        "per evaluation; a value named twice runs twice, e.g. 64,0,64 where the first arm fills "
        "the host's JIT cache for both later ones)",
    )
    parser.add_argument("--compare", nargs="+", type=Path, help="JSON results to tabulate only")
    ns = parser.parse_args(argv)
    if ns.compare:
        return list(ns.compare)
    device = resolve_device(ns.device)
    visible = len(visible_gpus()) if device == "cuda" else 1
    counts = [visible] if ns.gpus == "all" else [int(x) for x in ns.gpus.split(",")]
    if device == "cuda" and (not counts or max(counts) > visible or min(counts) < 1):
        parser.error(f"--gpus {ns.gpus}: this machine shows {visible} GPU(s)")
    workloads = ns.workloads or ("workload_gpu.jsonl" if device == "cuda" else "workload.jsonl")
    return Args(
        executor=ns.executor,
        gpu_counts=sorted(set(counts)),
        device=device,
        problem=ns.problem,
        workloads=workloads,
        budget=ns.budget,
        team=[t for t in ns.team.split(",") if t],
        guard=ns.guard,
        timeout_s=ns.timeout_s,
        max_wall_s=ns.max_wall_s,
        json_path=ns.json_path,
        out_dir=ns.out_dir or Path(tempfile.mkdtemp(prefix="kernelarc-bench-")),
        screens=[int(x) for x in ns.screens.split(",") if x.strip()],
        resident=[int(x) for x in ns.resident.split(",") if x.strip()],
    )


def _ray_status() -> tuple[str | None, str]:
    """(ray version or None, why it is missing)."""
    if importlib.util.find_spec("ray") is None:
        return None, "ray is not importable (no wheel carried?): pip install 'kernelarc[ray]'"
    try:
        import ray
    except Exception as exc:  # a broken install must not stop the benchmark
        return None, f"import ray failed: {type(exc).__name__}: {exc}"
    return str(ray.__version__), ""


#: Share of a run's slice of --max-wall-s given to its campaign as budget.time_s; the rest is
#: for the evaluation in flight at the deadline (finished, not cut) and the campaign's shutdown.
WALL_SHARE = 0.7


def _fixed_cost(args: Args) -> float:
    """Wall time of a near-empty evaluation: the reference itself on one workload, one round,
    one timed iteration, no reference timing. Best of two (the first may meet cold caches).
    A cold runner each time (no spare): the bound; an evaluation that finds its sandbox's warm
    spare ready pays less (docs/benchmarks.md, "Sandbox overhead per candidate")."""
    problem = resolve_problem(args.problem, args.workloads)
    definition = problem.definition
    solution = Solution.model_validate(
        {
            "name": "reference",
            "definition": definition.name,
            "author": "bench",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "kernel.py", "content": definition.reference}],
        }
    )
    request = EvalRequest(
        definition=definition,
        workloads=list(problem.workloads)[:1],
        solution=solution,
        device="cuda" if args.device == "cuda" else "cpu",
        correctness_rounds=1,
        timing=TimingConfig(warmup=0, iterations=1, flush_l2=False, time_reference=False),
        problem_dir=str(problem.path.resolve()),
    )
    with LocalSandbox(warm_spare=False) as sandbox:
        return min(sandbox.evaluate(request, timeout_s=args.timeout_s).wall_s for _ in range(2))


def _campaign(
    args: Args,
    executor: str,
    gpus: int,
    screens: int,
    resident: int,
    time_s: float,
    repeat: int = 0,
) -> dict[str, Any]:
    ray = RayConfig(address="local", num_gpus=gpus if args.device == "cuda" else None)
    if args.device == "cpu":
        ray = RayConfig(address="local", num_cpus=2)
    again = f"-again{repeat}" if repeat else ""
    cfg = CampaignConfig(
        name=f"bench-{executor}-{gpus}-s{screens}-r{resident}{again}",
        problem=args.problem,
        workloads=args.workloads,
        seed=0,
        device=args.device,
        budget=BudgetConfig(candidates=args.budget, time_s=time_s),
        eval=EvalConfig(timeout_s=args.timeout_s),
        agents=AgentsConfig(team=list(args.team)),
        guard=GuardConfig(enabled=args.guard),
        sandbox=SandboxConfig(resident_requests=resident),
        executor=ExecutorConfig(
            kind=executor,
            gpus=visible_gpus()[:gpus] if args.device == "cuda" else None,
            screens_per_timed_gpu=screens,
            ray=ray,
        ),
    )
    run_dir = args.out_dir / cfg.name
    # The campaign lifecycle the CLI and the other benchmarks share; tracking off (attempts.jsonl
    # and campaign.json hold what the report reads).
    summary = run_campaign_lifecycle(
        cfg, run_dir, TrackingChoice(kind="none"), CampaignOpening(name=cfg.name)
    ).summary
    report = summary.throughput
    return {
        "executor": executor,
        "gpus": gpus,
        "screens": screens,
        "resident": resident,
        "run_dir": str(run_dir),
        "latencies": _latencies(run_dir),
        "attempts": summary.attempts,
        "passed": summary.passed,
        "status": summary.status,
        "stop_reason": summary.stop_reason,
        "throughput": report.model_dump() if report is not None else None,
    }


def _latencies(run_dir: Path) -> dict[str, float]:
    """Each PASSED candidate's latency (the campaign's own timed run, not the guard's), keyed
    by its solution's content hash, so the same candidate can be found in another arm."""
    path = run_dir / ATTEMPTS_FILE
    out: dict[str, float] = {}
    if not path.exists():
        return out
    for attempt in read_attempts(path):
        if attempt.status != EvalStatus.PASSED or not attempt.latency_ms:
            continue
        out.setdefault(attempt.proposal.solution.content_hash(), attempt.latency_ms)
    return out


def _write(path: Path, result: dict[str, Any]) -> None:
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    parsed = _parse(argv)
    if isinstance(parsed, list):
        runs = []
        for path in parsed:
            data = json.loads(path.read_text())
            for run in data["runs"]:
                run.setdefault("sandbox_fixed_cost_s", data.get("sandbox_fixed_cost_s"))
                runs.append(run)
        merged: dict[str, Any] = {
            "runs": runs,
            "scaling": scaling(runs),
            "disturbance": disturbance(runs),
        }
        print(table(merged))
        return 0
    args = parsed
    ray_version, missing = _ray_status()
    executor = args.executor
    result: dict[str, Any] = {
        "problem": args.problem,
        "workloads": args.workloads,
        "device": args.device,
        "budget": args.budget,
        "team": args.team,
        "guard": args.guard,
        "python": sys.version.split()[0],
        "visible_gpus": visible_gpus() if args.device == "cuda" else [],
        "ray_version": ray_version,
        "ray_missing": "",
        "screens": args.screens,
        "runs": [],
        "scaling": [],
        "disturbance": [],
    }
    if executor == "ray" and ray_version is None:
        result["ray_missing"] = missing
        print(f"executor=ray unavailable: {missing}; falling back to executor=local", flush=True)
        executor = "local"
    result["executor"] = executor

    def give_up() -> None:  # unattended runs must end: write what there is and stop
        result["aborted"] = f"--max-wall-s {args.max_wall_s:g} reached"
        _write(args.json_path, result)
        print(table(result), flush=True)
        print(f"aborted: {result['aborted']}", flush=True)
        os._exit(3)

    watchdog = threading.Timer(args.max_wall_s, give_up)
    watchdog.daemon = True
    watchdog.start()
    fixed_cost = round(_fixed_cost(args), 3)
    result["sandbox_fixed_cost_s"] = fixed_cost
    script_start = time.monotonic()
    arms = [
        (gpus, screens, resident)
        for gpus in args.gpu_counts
        for screens in args.screens
        for resident in args.resident
    ]
    for index, (gpus, screens, resident) in enumerate(arms):
        started = time.monotonic()
        # An arm named twice (e.g. --resident 64,0,64: the first a cold-cache arm) gets its own
        # campaign name and run dir.
        repeat = arms[:index].count((gpus, screens, resident))
        # Each campaign's wall-clock budget: a fair share of what is left before the watchdog,
        # less a margin for the evaluation in flight at its deadline.
        left = args.max_wall_s - (started - script_start) - fixed_cost
        share = max(1.0, WALL_SHARE * left / (len(arms) - index))
        try:
            run = _campaign(args, executor, gpus, screens, resident, share, repeat)
        except Exception as exc:  # report and go on with the next arm
            run = {
                "executor": executor,
                "gpus": gpus,
                "screens": screens,
                "resident": resident,
                "error": f"{type(exc).__name__}: {exc}",
            }
        run["repeat"] = repeat
        run["script_wall_s"] = round(time.monotonic() - started, 1)
        run["sandbox_fixed_cost_s"] = fixed_cost
        result["runs"].append(run)
        result["scaling"] = scaling(result["runs"])
        result["disturbance"] = disturbance(result["runs"])
        _write(args.json_path, result)
    watchdog.cancel()
    print(table(result))
    print(f"\nJSON: {args.json_path.resolve()}")
    return 0 if all(r.get("throughput") for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
