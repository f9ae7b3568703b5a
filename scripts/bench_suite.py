"""Suite benchmark: the offline team on every problem dir under the given dirs, one GPU, a fixed
budget per problem and a wall-clock cap. Writes suite.json and suite.md (rewritten after every
problem) and prints the markdown table.

A DIR holding definition.json is a problem; otherwise each of its subdirs that holds one is. Each
problem is run as scripts/bench_campaign.py runs a built-in one (kernelarc.benchmark.campaigns):
one campaign of the offline team, --budget candidates, stopping at its time slice; then the
torch.compile baselines (compile default, max-autotune) and repeats of them and of the fastest
compile variant until each has --baseline-rounds evaluations, for confidence intervals. Per
problem: status (ok / failed and why / not reached), eager, compile default, best compile
variant, best found, fraction of roofline, winning agent and family, candidates evaluated; then
the summary. A problem that fails (bad files, a crash) is recorded and the suite goes on; no
problem starts after --total-time-s, and those are listed as not reached. Tracking is off.

    python scripts/bench_suite.py .kb --device cuda --budget 16 --total-time-s 3600
    python scripts/bench_suite.py kernelarc/problems/builtin/{rmsnorm,softmax} --device cpu \\
        --budget 3 --total-time-s 300 --json /tmp/suite.json --markdown /tmp/suite.md
"""

import argparse
import logging
import sys
from pathlib import Path

from kernelarc.benchmark.campaigns import run_bench
from kernelarc.benchmark.cli_options import (
    add_campaign_options,
    add_output_options,
    settings_from_args,
)
from kernelarc.benchmark.suite import find_problem_dirs, write_suite
from kernelarc.campaign.device import resolve_device
from kernelarc.errors import ConfigError, KernelarcError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]) if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "dirs", nargs="+", type=Path, metavar="DIR", help="problem dir(s) or dirs of them"
    )
    add_campaign_options(
        parser,
        default_device="cuda",
        default_budget=16,
        workloads_help="workload file of each problem",
    )
    parser.add_argument(
        "--problem-time-s",
        type=float,
        default=0.0,
        help="per-problem campaign wall-clock cap (budget.time_s); 0 = only the fair share of "
        "--total-time-s",
    )
    parser.add_argument(
        "--total-time-s",
        type=float,
        default=0.0,
        help="no problem starts after this; each gets a fair share of what is left; 0 = none",
    )
    parser.add_argument(
        "--baselines",
        help="comma-separated torch.compile variants to measure after each campaign, or 'none' "
        "(default: compile-default and max-autotune)",
    )
    add_output_options(parser, name="suite")
    return parser


def _baselines(value: str | None) -> list[str] | None:
    if value is None:
        return None
    if value.strip() == "none":
        return []
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the suite, return the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.budget < 1 or args.baseline_rounds < 1:
            msg = "--budget and --baseline-rounds must be at least 1"
            raise ConfigError(msg)
        device = resolve_device(args.device)
        problems = find_problem_dirs(args.dirs)
        settings = settings_from_args(
            args,
            name="suite",
            device=device,
            problems=[str(p) for p in problems],
            campaign_time_s=args.problem_time_s,
            total_time_s=args.total_time_s,
            baselines=_baselines(args.baselines),
        )
        command = [sys.executable, *sys.argv] if argv is None else ["bench_suite", *argv]
        run_bench(settings, command, writer=write_suite)
    except KernelarcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
