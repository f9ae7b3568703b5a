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

from kernelarc.benchmark.campaigns import run_bench
from kernelarc.benchmark.cli_options import (
    add_campaign_options,
    add_output_options,
    settings_from_args,
    workload_file,
)
from kernelarc.benchmark.settings import default_problems
from kernelarc.campaign.device import resolve_device
from kernelarc.errors import KernelarcError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]) if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--problems", help="comma-separated built-in names (default: all)")
    add_campaign_options(parser, default_device="auto", default_budget=64)
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
    add_output_options(parser, name="bench")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the benchmark, return the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        device = resolve_device(args.device)
        workloads = workload_file(args, device)
        problems = args.problems.split(",") if args.problems else default_problems(workloads)
        on_gpu = device == "cuda"
        campaign_time = args.campaign_time_s
        total_time = args.total_time_s
        settings = settings_from_args(
            args,
            name="bench",
            device=device,
            problems=problems,
            campaign_time_s=(90.0 if on_gpu else 0.0) if campaign_time is None else campaign_time,
            total_time_s=(660.0 if on_gpu else 0.0) if total_time is None else total_time,
        )
        run_bench(settings, [sys.executable, *sys.argv] if argv is None else ["bench", *argv])
    except KernelarcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
