"""Offline-team campaign benchmark: per built-in problem, eager, torch.compile default, the best
PASSED compile variant and max-autotune (shown failed when it fails, never replaced), the campaign's
best, speedups with confidence intervals, the roofline bound (T_SOL), fraction of roofline, SOL
score and the candidates it took to reach 90% of the final best. Writes bench.json and bench.md
(rewritten after every problem) and prints the markdown table.

Each problem gets one campaign of the offline team (conf/agents/offline.yaml), one seed, budget
--budget candidates, on the problem's GPU-sized workloads (CPU: the small ones); proposing stops at
the problem's time limit. The torch.compile baselines the campaign did not evaluate are then
evaluated with the same sandbox and timing protocol, and repeated (with the fastest compile variant)
until each has --baseline-rounds evaluations, for the intervals. Campaign overrides for speed (on
top of conf/): 3 correctness rounds, guard re-timing 1-3 rounds, tracking off; change any with
--set.

    python scripts/bench_campaign.py --device cuda                         # every problem
    python scripts/bench_campaign.py --device cuda --problems rmsnorm,softmax --total-time-s 300
    python scripts/bench_campaign.py --device cpu --budget 4 --problems rmsnorm
"""

import argparse
import logging
import sys
import time
from pathlib import Path

from kernelarc.benchmark.campaigns import BenchSettings, default_problems, run_bench
from kernelarc.campaign.device import resolve_device
from kernelarc.errors import KernelarcError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]) if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--problems", help="comma-separated built-in names (default: all)")
    parser.add_argument(
        "--workloads",
        help="workload file (default: workload_gpu.jsonl on cuda, else workload.jsonl)",
    )
    parser.add_argument(
        "--max-workloads", type=int, default=0, help="keep the last N (largest) workloads; 0 = all"
    )
    parser.add_argument("--budget", type=int, default=64, help="candidates per problem")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--correctness-rounds", type=int, default=3)
    parser.add_argument(
        "--campaign-time-s",
        type=float,
        default=None,
        help=(
            "per-problem wall-clock budget, the campaign's budget.time_s "
            "(default: 90 on cuda, none on cpu; 0 = none)"
        ),
    )
    parser.add_argument(
        "--total-time-s",
        type=float,
        default=None,
        help="no problem starts after this; each campaign gets a fair share of what is left "
        "(default: 660 on cuda, none on cpu; 0 = none)",
    )
    parser.add_argument(
        "--baseline-rounds",
        type=int,
        default=2,
        help="evaluations of each baseline and of the fastest compile variant (>= 2 for a CI)",
    )
    parser.add_argument("--out", type=Path, help="output dir (default outputs/bench/<time>)")
    parser.add_argument("--json", type=Path, help="JSON path (default OUT/bench.json)")
    parser.add_argument("--markdown", type=Path, help="markdown path (default OUT/bench.md)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra campaign override, e.g. --set guard.max_repeats=8 (repeatable)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the benchmark, return the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        device = resolve_device(args.device)
        workloads = args.workloads or (
            "workload_gpu.jsonl" if device == "cuda" else "workload.jsonl"
        )
        problems = args.problems.split(",") if args.problems else default_problems(workloads)
        on_gpu = device == "cuda"
        campaign_time = args.campaign_time_s
        total_time = args.total_time_s
        settings = BenchSettings(
            device=device,
            problems=problems,
            workloads=workloads,
            out=args.out or Path("outputs/bench") / time.strftime("%Y-%m-%d_%H-%M-%S"),
            budget=args.budget,
            seed=args.seed,
            max_workloads=args.max_workloads,
            correctness_rounds=args.correctness_rounds,
            campaign_time_s=(90.0 if on_gpu else 0.0) if campaign_time is None else campaign_time,
            total_time_s=(660.0 if on_gpu else 0.0) if total_time is None else total_time,
            overrides=list(args.set),
            json_path=args.json,
            markdown_path=args.markdown,
            baseline_rounds=max(1, args.baseline_rounds),
        )
        run_bench(settings, [sys.executable, *sys.argv] if argv is None else ["bench", *argv])
    except KernelarcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
