"""Command-line options both bench scripts share, and the `BenchSettings` built from them.

`scripts/bench_campaign.py` (built-in problems) and `scripts/bench_suite.py` (problem dirs) take
the same options for the campaigns they run and the outputs they write, and turn them into
`BenchSettings` the same way; defining both here keeps the two scripts from drifting apart. What
differs between them (default device and budget, output names, the problem list and time limits)
is passed in by each script. The options come in two calls so that each script can list its own
(time limits, baselines) between the campaign's and the outputs' in its --help.
"""

import argparse
import time
from pathlib import Path

from kernelarc.benchmark.settings import BenchSettings

_WORKLOADS_DEFAULT_HELP = "(default: workload_gpu.jsonl on cuda, else workload.jsonl)"


def add_campaign_options(
    parser: argparse.ArgumentParser,
    *,
    default_device: str,
    default_budget: int,
    workloads_help: str = "workload file",
) -> None:
    """Add the options that shape each problem's campaign: --device, --workloads,
    --max-workloads, --budget, --seed and --correctness-rounds.

    Args:
        parser: the script's parser.
        default_device: --device default (`auto`, `cpu` or `cuda`).
        default_budget: --budget default, candidates per problem.
        workloads_help: what --workloads names; the default rule is appended.
    """
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=default_device)
    parser.add_argument("--workloads", help=f"{workloads_help} {_WORKLOADS_DEFAULT_HELP}")
    parser.add_argument(
        "--max-workloads", type=int, default=0, help="keep the last N (largest) workloads; 0 = all"
    )
    parser.add_argument("--budget", type=int, default=default_budget, help="candidates per problem")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--correctness-rounds", type=int, default=3)


def add_output_options(parser: argparse.ArgumentParser, *, name: str) -> None:
    """Add --baseline-rounds, --out, --json, --markdown and --set.

    Args:
        parser: the script's parser.
        name: the outputs' name: OUT defaults to outputs/NAME/<time> (`settings_from_args`), the
            files to NAME.json and NAME.md in it (the names the script's writer uses).
    """
    parser.add_argument(
        "--baseline-rounds",
        type=int,
        default=2,
        help="evaluations of each baseline and of the fastest compile variant (>= 2 for a CI)",
    )
    parser.add_argument("--out", type=Path, help=f"output dir (default outputs/{name}/<time>)")
    parser.add_argument("--json", type=Path, help=f"JSON path (default OUT/{name}.json)")
    parser.add_argument("--markdown", type=Path, help=f"markdown path (default OUT/{name}.md)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra campaign override, e.g. --set guard.max_repeats=8 (repeatable)",
    )


def workload_file(args: argparse.Namespace, device: str) -> str:
    """--workloads, else the GPU-sized workload file on cuda and the small one elsewhere."""
    return str(args.workloads or ("workload_gpu.jsonl" if device == "cuda" else "workload.jsonl"))


def settings_from_args(
    args: argparse.Namespace,
    *,
    name: str,
    device: str,
    problems: list[str],
    campaign_time_s: float,
    total_time_s: float,
    baselines: list[str] | None = None,
) -> BenchSettings:
    """The `BenchSettings` of options added by `add_campaign_options` and `add_output_options`;
    the rest comes from the script, whose rules for them differ.

    Args:
        args: the parsed options.
        name: as given to `add_output_options` (OUT defaults to outputs/NAME/<time>).
        device: the resolved device (`cpu` or `cuda`).
        problems: built-in names or problem dirs, in run order.
        campaign_time_s: per-problem wall-clock budget; 0 = none.
        total_time_s: no problem starts after this; 0 = none.
        baselines: torch.compile variants to measure (None: the default ones).

    --baseline-rounds below 1 counts as 1 (bench_suite.py rejects it before calling this).
    """
    return BenchSettings(
        device=device,
        problems=problems,
        workloads=workload_file(args, device),
        out=args.out or Path("outputs") / name / time.strftime("%Y-%m-%d_%H-%M-%S"),
        budget=args.budget,
        seed=args.seed,
        max_workloads=args.max_workloads,
        correctness_rounds=args.correctness_rounds,
        campaign_time_s=campaign_time_s,
        total_time_s=total_time_s,
        overrides=list(args.set),
        json_path=args.json,
        markdown_path=args.markdown,
        baselines=baselines,
        baseline_rounds=max(1, args.baseline_rounds),
    )
