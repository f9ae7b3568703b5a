"""The `kernelarc` command: campaign (a Hydra app), eval and export.

This is the only module that sees DictConfig: it converts the composed config to the typed
CampaignConfig and hands plain objects to the library.
"""

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelarc import __version__
from kernelarc.errors import KernelarcError

logger = logging.getLogger(__name__)

_EPILOG_MAIN = """\
examples:
  kernelarc campaign                                  # offline campaign on the built-in rmsnorm
  kernelarc campaign problem=softmax budget.candidates=20 seed=1
  kernelarc campaign -m seed=0,1 problem=rmsnorm,softmax
  kernelarc eval path/to/problem --solution solution.json --json -o traces.jsonl
  kernelarc export outputs/kernelarc/2026-12-02_10-00-00 --out exports/
run `kernelarc campaign --help` for every campaign setting.
"""

_EPILOG_EVAL = """\
Evaluates SOLUTION on every workload of PROBLEM exactly as a campaign does (sandboxed process,
10 correctness rounds with seed 200, median timing) and prints one SOL-ExecBench Trace per
workload. Exit status 0 iff every workload PASSED, 1 otherwise, 2 for bad input.

examples:
  kernelarc eval kernelarc/problems/builtin/rmsnorm --solution exports/rmsnorm/solution.json
  kernelarc eval ./my_problem --solution sol.json --device cuda --json -o traces.jsonl
  kernelarc eval rmsnorm --solution sol.json --workloads workload_gpu.jsonl
"""

_EPILOG_EXPORT = """\
Writes the best correct solution of each problem in the given run dirs as a SOL-ExecBench
solution.json with its traces.jsonl, under OUT/<problem>/.

examples:
  kernelarc export outputs/kernelarc/2026-12-02_10-00-00 --out exports/
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kernelarc` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "campaign":
        # Hydra parses its own argv; hand it everything after the subcommand.
        from kernelarc.campaign_cli import run_hydra_campaign

        return run_hydra_campaign(args[1:])
    parser = _build_parser()
    ns = parser.parse_args(args)
    if ns.command is None:
        parser.print_help()
        return 2
    try:
        if ns.command == "eval":
            return _cmd_eval(ns)
        if ns.command == "export":
            return _cmd_export(ns)
    except KernelarcError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        return 2
    parser.print_help()
    return 2


def _build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="kernelarc",
        description="Autonomous GPU kernel optimization over SOL-ExecBench problems.",
        epilog=_EPILOG_MAIN,
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"kernelarc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{campaign,eval,export}")
    sub.add_parser("campaign", help="run a campaign (Hydra overrides follow; see its --help)")
    ev = sub.add_parser(
        "eval",
        help="evaluate one solution on one problem",
        epilog=_EPILOG_EVAL,
        formatter_class=fmt,
    )
    ev.add_argument(
        "problem", help="problem dir (definition.json + workload.jsonl) or built-in name"
    )
    ev.add_argument("--solution", required=True, type=Path, help="solution.json to evaluate")
    ev.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ev.add_argument(
        "--workloads", default="workload.jsonl", help="workload file in the problem dir"
    )
    ev.add_argument(
        "--json", action="store_true", help="print one Trace JSON per line, nothing else"
    )
    ev.add_argument("-o", "--output", type=Path, help="also write the traces to this JSONL file")
    ev.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole evaluation")
    ev.add_argument("--seed", type=int, default=200, help="input seed (official: 200)")
    ev.add_argument("--rounds", type=int, default=10, help="correctness rounds per workload")
    ev.add_argument("--warmup", type=int, help="untimed iterations (default 10 CUDA, 1 CPU)")
    ev.add_argument("--iterations", type=int, help="timed iterations (default 50 CUDA, 5 CPU)")
    ex = sub.add_parser(
        "export",
        help="export the best solutions of campaign runs",
        epilog=_EPILOG_EXPORT,
        formatter_class=fmt,
    )
    ex.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a campaign's run dir")
    ex.add_argument("--out", required=True, type=Path, help="output folder")
    return parser


def _cmd_eval(ns: argparse.Namespace) -> int:
    from kernelarc.campaign.device import resolve_device
    from kernelarc.config import EvalConfig
    from kernelarc.execution import make_sandbox
    from kernelarc.problems.builtin_set import resolve_problem
    from kernelarc.problems.files import load_solution
    from kernelarc.schema import EvalRequest, EvalStatus, TimingConfig

    problem = resolve_problem(ns.problem, ns.workloads)
    solution = load_solution(ns.solution)
    if solution.definition != problem.name:
        logger.warning(
            "solution %s names definition %r but the problem is %r",
            ns.solution,
            solution.definition,
            problem.name,
        )
    device = resolve_device(ns.device)
    warmup, iterations = EvalConfig(warmup=ns.warmup, iterations=ns.iterations).timing_for(device)
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=solution,
        device="cuda" if device == "cuda" else "cpu",
        seed=ns.seed,
        correctness_rounds=ns.rounds,
        timing=TimingConfig(warmup=warmup, iterations=iterations),
        problem_dir=str(problem.path.resolve()),
    )
    result = make_sandbox("local").evaluate(request, timeout_s=ns.timeout)
    lines = [t.model_dump_json() for t in result.traces]
    if ns.output is not None:
        ns.output.parent.mkdir(parents=True, exist_ok=True)
        ns.output.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if ns.json:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    else:
        _print_traces(result.traces)
    passed = all(t.evaluation and t.evaluation.status == EvalStatus.PASSED for t in result.traces)
    return 0 if passed and result.traces else 1


def _print_traces(traces: list[Any]) -> None:
    table = Table(title="kernelarc eval")
    for col in ("workload", "status", "latency ms", "reference ms", "speedup", "max abs err"):
        table.add_column(col)
    for trace in traces:
        ev = trace.evaluation
        perf, corr = (ev.performance, ev.correctness) if ev else (None, None)
        table.add_row(
            trace.workload.uuid,
            ev.status if ev else "-",
            f"{perf.latency_ms:.4f}" if perf else "-",
            f"{perf.reference_latency_ms:.4f}" if perf else "-",
            f"{perf.speedup_factor:.2f}x" if perf else "-",
            f"{corr.max_absolute_error:.3g}" if corr else "-",
        )
    console = Console()
    console.print(table)
    for trace in traces:
        ev = trace.evaluation
        if ev and ev.status != "PASSED" and ev.log:
            console.print(f"[bold]{trace.workload.uuid}[/]: {ev.log[-2000:]}", highlight=False)


def _cmd_export(ns: argparse.Namespace) -> int:
    from leaderboard import export_run

    out: Path = ns.out
    written = export_run(ns.run_dir, out)
    print(json.dumps({"out": str(out), "files": [str(p) for p in written]}, indent=2))  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
