"""The `kernelarc` command: campaign (a Hydra app), eval and export.

This is the only module that sees DictConfig: it converts the composed config to the typed
CampaignConfig and hands plain objects to the library.
"""

import argparse
import dataclasses
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from kernelarc import __version__
from kernelarc.console_tables import make_console, print_table
from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.problems_cli import add_problems_parser
from kernelarc.timing_labels import CPU_TIMING_NOTE, cpu_timed_traces, speedup_interval_text

logger = logging.getLogger(__name__)

_EPILOG_MAIN = """\
examples:
  kernelarc campaign                                  # offline campaign on the built-in rmsnorm
  kernelarc campaign problem=softmax budget.candidates=20 seed=1
  kernelarc campaign -m seed=0,1 problem=rmsnorm,softmax
  kernelarc resume outputs/kernelarc/2026-12-02_10-00-00    # continue a killed campaign
  kernelarc eval path/to/problem --solution solution.json --json -o traces.jsonl
  kernelarc export outputs/kernelarc/2026-12-02_10-00-00 --out exports/
  kernelarc sync outputs/kernelarc/2026-12-02_10-00-00
  kernelarc report multirun/kernelarc/2026-12-02_10-00-00 --out reports/ablation
  kernelarc problems import kernelbench ~/KernelBench/KernelBench --out kb_problems
run `kernelarc campaign --help` for every campaign setting.
"""

_EPILOG_RESUME = """\
Continues a campaign that was killed (kill -9, a lost node, Ctrl-C) in its own run dir, with the
config recorded there (RUN_DIR/config.yaml): no finished attempt is evaluated again or lost, the
budget spent, the incumbent, the conclusions board, the plateau counters and the agents' history
are taken back from attempts.jsonl and conclusions.jsonl, and the campaign's MLflow runs are
re-attached (nothing is logged twice). An attempt that was being evaluated when it died is not
in attempts.jsonl and may be evaluated again. Overrides may change the budget (raise
budget.candidates to extend a finished campaign), eval.timeout_s, tracking, sandbox, executor
and the LLM endpoint; an override of anything else (problem, agents, seed, ...) is refused.
Same as `kernelarc campaign resume=RUN_DIR [OVERRIDES]`. See docs/mlflow.md.

examples:
  kernelarc resume outputs/kernelarc/2026-12-02_10-00-00
  kernelarc resume outputs/kernelarc/2026-12-02_10-00-00 budget.candidates=40
"""

_EPILOG_REPORT = """\
Compares the arms of an ablation: campaigns that differ in swept settings (the Hydra overrides
that differ between them, minus the seed and the problem; or --arm-by). Per problem and arm, at
a fixed budget (the first N attempts of every campaign): mean and confidence interval of the
final best speedup and SOL score, candidates needed to reach a target speedup, and credit per
agent and strategy (the speedup each added to the incumbent). Writes OUT/report.html (one
self-contained page), report.json, arms.csv, runs.csv and PNG plots, and logs them to MLflow as
a run of the campaigns' experiment (kernelarc.kind = report). See docs/mlflow.md.

TARGET: a run dir, a folder of run dirs (a multirun sweep dir), or experiment:NAME, an MLflow
experiment (read from --tracking-uri, else $MLFLOW_TRACKING_URI, else sqlite:///$PWD/mlflow.db);
a bare NAME that is not a folder here is taken as an experiment too. Folders without a run in
them are skipped and listed. On a CPU the numbers are a pipeline check, not performance.

examples:
  kernelarc report multirun/kernelarc/2026-12-02_10-00-00
  kernelarc report experiment:kernelarc --tracking-uri http://127.0.0.1:5000 --budget 20
  kernelarc report outputs/a/*/ outputs/b/*/ --arm-by name --out reports/a-vs-b --no-mlflow
"""

_EPILOG_SYNC = """\
Uploads to MLflow what the store lacks of each campaign: the parent and agent runs, every
attempt's metrics and artifacts, the best-so-far metrics, the attempts and conclusions tables,
and (for an ended campaign) the final metrics and run status. attempts.jsonl is the source of
truth; RUN_DIR/mlflow_ledger.jsonl records what already arrived, and anything it does not list is
looked up on the server first, so syncing twice never duplicates anything. A campaign syncs
itself when it ends; run this after an outage, or to upload a tracking=none campaign. Do not run
it on a campaign that is still running. Exit status 0 iff every run dir was synced.

The store: --tracking-uri, else the one the campaign logged to (its ledger), else
$MLFLOW_TRACKING_URI, else sqlite:///$PWD/mlflow.db.

examples:
  kernelarc sync outputs/kernelarc/2026-12-02_10-00-00
  kernelarc sync multirun/kernelarc/2026-12-02_10-00-00/*/ --tracking-uri http://mlflow:5000
  kernelarc sync outputs/kernelarc/2026-12-02_10-00-00 --verify
"""

_EPILOG_EVAL = """\
Evaluates SOLUTION on every workload of PROBLEM exactly as a campaign does (sandboxed process,
10 correctness rounds with seed 200, median timing) and prints one SOL-ExecBench Trace per
workload. --reference evaluates the definition's reference itself: a check of a new problem
dir in seconds. Exit status 0 iff every workload PASSED, 1 otherwise, 2 for bad input (a
problem or solution that does not load, a solution for another definition).

examples:
  kernelarc eval ./my_problem --reference --device cpu      # does a new problem dir work?
  kernelarc eval kernelarc/problems/builtin/rmsnorm --solution exports/rmsnorm/solution.json
  kernelarc eval ./my_problem --solution sol.json --device cuda --json -o traces.jsonl
  kernelarc eval rmsnorm --solution sol.json --workloads workload_gpu.jsonl
"""

_EPILOG_REPLAY = """\
Re-runs the benchmark guard's acceptance rules over the measurements recorded in
RUN_DIR/attempts.jsonl and reports every attempt whose verdict, status or confirmation would
differ. Exit status 0 iff every decision is reproduced.

examples:
  kernelarc replay outputs/kernelarc/2026-12-02_10-00-00
"""

_EPILOG_EXPORT = """\
Writes, per problem, the best accepted attempt (PASSED, NEW_BEST, confirmed by the guard) of the
given campaigns as a SOL-ExecBench submission: OUT/<problem>/solution.json, traces.jsonl,
problem/ (definition.json + workload.jsonl, an official PROBLEM_DIR) and, with --sources,
sources/; then OUT/scores.csv and OUT/manifest.json. The best is the lowest latency (GPU-timed
before CPU-timed, ties by age), never one slower than its campaign's reference: then the next,
else the reference's own PASSED attempt, else none (listed with why). Same inputs, same bytes:
the manifest's export time is the latest attempt's finished_at unless --timestamp is given.
Format and submission steps: leaderboard/README.md.

examples:
  kernelarc export outputs/kernelarc/2026-12-02_10-00-00 --out exports/
  kernelarc export outputs/kernelarc/*/ --out exports/ --sources --verify
  kernelarc export --experiment kernelarc --tracking-uri sqlite:///$PWD/mlflow.db --out exports/
  kernelarc export outputs/kernelarc/2026-12-02_10-00-00 --dry-run
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kernelarc` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-sc", "--shell-completion"):
        return _shell_completion(args)
    if args and args[0] == "campaign":
        # Hydra parses its own argv; hand it everything after the subcommand.
        from kernelarc.campaign_cli import run_hydra_campaign

        return run_hydra_campaign(args[1:])
    if args and args[0] == "resume" and len(args) > 1 and not args[1].startswith("-"):
        from kernelarc.campaign_cli import run_hydra_campaign

        return run_hydra_campaign([f"resume={args[1]}", *args[2:]])
    parser = build_parser()
    ns = parser.parse_args(args)
    if ns.command is None:
        parser.print_help()
        return 2
    try:
        if ns.command == "eval":
            return _cmd_eval(ns)
        if ns.command == "replay":
            return _cmd_replay(ns)
        if ns.command == "export":
            return _cmd_export(ns)
        if ns.command == "sync":
            return _cmd_sync(ns)
        if ns.command == "report":
            return _cmd_report(ns)
        if ns.command == "problems":
            from kernelarc.problems_cli import run_problems_command

            return run_problems_command(ns)
    except KernelarcError as exc:
        Console(stderr=True).print(
            f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        return 2
    parser.print_help()
    return 2


_COMMANDS = ("campaign", "resume", "eval", "export", "replay", "sync", "report", "problems")


def _shell_completion(args: list[str]) -> int:
    """`kernelarc -sc install=bash` (Hydra's shell completion, set up for `kernelarc`) and the
    queries it makes: a command name is completed here, `campaign` overrides by Hydra, the
    other commands' arguments by the shell's file completion."""
    from kernelarc.campaign_cli import run_hydra_campaign

    line = os.environ.get("COMP_LINE", "")
    words = line.split()
    if any(a.startswith("query=") for a in args) and not (
        len(words) > 1 and words[1] == "campaign"
    ):
        typing = len(words) == 2 and not line.endswith(" ")
        if len(words) <= 1 or typing:
            prefix = words[1] if typing else ""
            print(" ".join(c for c in _COMMANDS if c.startswith(prefix)))  # noqa: T201
        return 0
    return run_hydra_campaign(args, prog="kernelarc")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command but `campaign`, which Hydra parses."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="kernelarc",
        description="Autonomous GPU kernel optimization over SOL-ExecBench problems.",
        epilog=_EPILOG_MAIN,
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"kernelarc {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="{campaign,resume,eval,export,replay,sync,report,problems}"
    )
    sub.add_parser("campaign", help="run a campaign (Hydra overrides follow; see its --help)")
    res = sub.add_parser(
        "resume",
        help="continue a killed campaign in its run dir (= campaign resume=RUN_DIR)",
        epilog=_EPILOG_RESUME,
        formatter_class=fmt,
    )
    res.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the killed campaign's run dir")
    res.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="e.g. budget.candidates=40")
    rp = sub.add_parser(
        "replay",
        help="re-judge a campaign's attempts from attempts.jsonl alone",
        epilog=_EPILOG_REPLAY,
        formatter_class=fmt,
    )
    rp.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a campaign's run dir")
    rep = sub.add_parser(
        "report",
        help="ablation report: per-arm statistics, credit and plots, logged to MLflow",
        epilog=_EPILOG_REPORT,
        formatter_class=fmt,
    )
    rep.add_argument("targets", nargs="+", metavar="TARGET", help="run dirs or experiments")
    rep.add_argument("--out", type=Path, help="output folder (default: reports/<time>)")
    rep.add_argument("--tracking-uri", help="MLflow store of experiments and of the report run")
    rep.add_argument("--experiment", help="log the report to this experiment")
    rep.add_argument("--budget", type=int, help="attempts per campaign that count")
    rep.add_argument("--target", type=float, help="speedup target (default: 0.9 x the best)")
    rep.add_argument(
        "--arm-by",
        action="append",
        default=[],
        metavar="KEY",
        help="a setting that defines the arms (repeatable; default: what the sweep varied)",
    )
    rep.add_argument("--confidence", type=float, default=0.95, help="interval level")
    rep.add_argument(
        "--ci",
        choices=["bootstrap", "t"],
        default="bootstrap",
        help="interval method (t intervals are cut to each quantity's range)",
    )
    rep.add_argument("--no-mlflow", action="store_true", help="do not log the report to MLflow")
    sy = sub.add_parser(
        "sync",
        help="upload to MLflow what it lacks of campaigns (after an outage)",
        epilog=_EPILOG_SYNC,
        formatter_class=fmt,
    )
    sy.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="campaign run dirs")
    sy.add_argument("--tracking-uri", help="the MLflow store (default: the campaign's)")
    sy.add_argument("--experiment", help="experiment name (default: the campaign's)")
    sy.add_argument(
        "--verify",
        action="store_true",
        help="check every attempt on the server, not only those the ledger lacks",
    )
    ev = sub.add_parser(
        "eval",
        help="evaluate one solution on one problem",
        epilog=_EPILOG_EVAL,
        formatter_class=fmt,
    )
    ev.add_argument(
        "problem",
        help="problem dir (definition.json + workload.jsonl), its definition.json, or a "
        "built-in name",
    )
    what = ev.add_mutually_exclusive_group(required=True)
    what.add_argument("--solution", type=Path, help="solution.json to evaluate")
    what.add_argument(
        "--reference",
        action="store_true",
        help="evaluate the definition's own reference as the solution (checks a new problem)",
    )
    ev.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where to run: cuda (timed like the official evaluator), cpu (correctness and a "
        "pipeline check, not performance), auto: cuda when a GPU is visible (default)",
    )
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
    ev.add_argument(
        "--sandbox", choices=["local", "docker"], default="local", help="where the runner runs"
    )
    ev.add_argument(
        "--image", help="--sandbox docker: the image (default kernelarc-sandbox:latest)"
    )
    ex = sub.add_parser(
        "export",
        help="export the best solutions of campaign runs",
        epilog=_EPILOG_EXPORT,
        formatter_class=fmt,
    )
    ex.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR", help="campaign run dirs")
    ex.add_argument("--out", type=Path, help="output folder (required unless --dry-run)")
    ex.add_argument("--experiment", help="read the campaigns of this MLflow experiment instead")
    ex.add_argument(
        "--tracking-uri",
        help="MLflow store of --experiment (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)",
    )
    ex.add_argument("--sources", action="store_true", help="also write <problem>/sources/")
    ex.add_argument("--timestamp", help="ISO time for manifest.json (default: from the inputs)")
    ex.add_argument(
        "--dry-run", action="store_true", help="print what would be exported and why; write nothing"
    )
    ex.add_argument(
        "--verify",
        action="store_true",
        help="re-evaluate the export from its files alone (and with the official evaluator "
        "when installed); exit 1 on any status disagreement",
    )
    ex.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="where --verify runs"
    )
    ex.add_argument(
        "--verify-timeout", type=float, default=600.0, help="seconds per problem for --verify"
    )
    add_problems_parser(sub)
    return parser


def _cmd_eval(ns: argparse.Namespace) -> int:
    from kernelarc.campaign.device import resolve_device
    from kernelarc.config import EvalConfig, SandboxConfig
    from kernelarc.execution import make_sandbox
    from kernelarc.problems.builtin_set import resolve_problem
    from kernelarc.problems.files import load_solution
    from kernelarc.problems.reference import reference_solution
    from kernelarc.schema import EvalRequest, EvalStatus, HangPolicy, TimingConfig

    problem = resolve_problem(ns.problem, ns.workloads)
    err = make_console(stderr=True)
    for warning in problem.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False)
    if ns.reference:
        solution = reference_solution(problem.definition)
    else:
        solution = load_solution(ns.solution)
        if solution.definition != problem.name:
            msg = (
                f"{ns.solution}: the solution is for definition {solution.definition!r} but the "
                f"problem is {problem.name!r}; give a solution of {problem.name!r} (its "
                "`definition` field names the problem it solves)"
            )
            raise ConfigError(msg)
    device = resolve_device(ns.device)
    warmup, iterations = EvalConfig(warmup=ns.warmup, iterations=ns.iterations).timing_for(device)
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=solution,
        device="cuda" if device == "cuda" else "cpu",
        seed=ns.seed,
        correctness_rounds=ns.rounds,
        timing=TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=EvalConfig().budget_for(device)
        ),
        problem_dir=str(problem.path.resolve()),
        hang=HangPolicy.for_device(device),
    )
    # One evaluation: no spare runner to keep warm for a next one.
    sandbox_cfg = SandboxConfig(kind=ns.sandbox, gpu=0, warm_spare=False)
    if ns.image:
        sandbox_cfg.docker.image = ns.image
    sandbox = make_sandbox(sandbox_cfg.kind, **sandbox_cfg.options())
    # Docker: the container starts on its own thread (evaluate waits for it); locally nothing,
    # as nothing runs before this evaluation that a spare's import could overlap.
    sandbox.prepare(request.device, ns.timeout, request.problem_dir)
    try:
        result = sandbox.evaluate(request, timeout_s=ns.timeout)
    finally:
        sandbox.close()  # docker: removes its pool container
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
    columns = ("workload", "status", "latency ms", "reference ms", "speedup [CI]", "max abs err")
    rows = []
    for trace in traces:
        ev = trace.evaluation
        perf, corr = (ev.performance, ev.correctness) if ev else (None, None)
        rows.append(
            (
                trace.workload.uuid,
                str(ev.status) if ev else "-",
                f"{perf.latency_ms:.4f}" if perf else "-",
                f"{perf.reference_latency_ms:.4f}" if perf else "-",
                (
                    f"{perf.speedup_factor:.2f}x"
                    + speedup_interval_text(perf.speedup_ci_low, perf.speedup_ci_high)
                    if perf
                    else "-"
                ),
                f"{corr.max_absolute_error:.3g}" if corr else "-",
            )
        )
    console = make_console()
    notes = [CPU_TIMING_NOTE] if cpu_timed_traces(traces) else []
    methods = _interval_methods(traces)
    if methods:
        notes.append(
            "speedup: the official protocol's; [CI]: "
            + "; ".join(methods)
            + " (a workload without one: interleaving off or it failed, see its log)"
        )
    print_table(console, "kernelarc eval", columns, rows, "\n".join(notes))
    # A failure that is the same on every workload (a solution that does not compile) is
    # printed once, with the workloads it applies to.
    logs: dict[str, list[str]] = {}
    for trace in traces:
        ev = trace.evaluation
        if ev and ev.status != "PASSED" and ev.log:
            logs.setdefault(ev.log[-2000:], []).append(trace.workload.uuid)
    for log, uuids in logs.items():
        where = uuids[0] if len(uuids) == 1 else f"{len(uuids)} workloads ({', '.join(uuids)})"
        console.print(f"{where}: {log}", markup=False, highlight=False)


def _interval_methods(traces: list[Any]) -> list[str]:
    """The distinct ways the traces' speedup intervals were made (less their pair counts)."""
    methods = set()
    for trace in traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is not None and perf.speedup_ci_method:
            methods.add(perf.speedup_ci_method.rsplit(", ", 1)[0])
    return sorted(methods)


def _cmd_replay(ns: argparse.Namespace) -> int:
    from kernelarc.guard import replay_run

    mismatches = replay_run(ns.run_dir)
    console = Console()
    for m in mismatches:
        console.print(f"attempt {m.index}: recorded {m.recorded}, replayed {m.replayed}")
    console.print(
        "every decision reproduced"
        if not mismatches
        else f"{len(mismatches)} decision(s) differ from the record"
    )
    return 0 if not mismatches else 1


def _cmd_export(ns: argparse.Namespace) -> int:
    from leaderboard import plan_export, write_export
    from leaderboard.inputs import load_experiment, load_run_dirs
    from leaderboard.manifest import describe_plan

    if ns.experiment and ns.run_dirs:
        msg = "give run dirs or --experiment, not both (an MLflow campaign names its run dir)"
        raise ConfigError(msg)
    if ns.out is None and not ns.dry_run:
        msg = "--out DIR is required (or --dry-run to only show the plan)"
        raise ConfigError(msg)
    if ns.timestamp is not None:
        _check_timestamp(ns.timestamp)
    if ns.experiment:
        uri = ns.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or _local_mlflow_uri()
        inputs = load_experiment(uri, ns.experiment)
    else:
        inputs = load_run_dirs(_campaign_dirs(ns.run_dirs))
    plan = plan_export(inputs, ns.timestamp)
    if ns.dry_run:
        sys.stdout.write(describe_plan(plan))
        return 0
    out: Path = ns.out
    written = write_export(plan, out, sources=ns.sources)
    report: dict[str, Any] = {"out": str(out), "files": [str(p) for p in written]}
    status = 0
    if ns.verify:
        checks = _verify(out, ns.device, ns.verify_timeout)
        report["verify"] = [dataclasses.asdict(c) for c in checks]
        status = 0 if all(c.agree for c in checks) else 1
    print(json.dumps(report, indent=2))  # noqa: T201
    return status


def _campaign_dirs(paths: list[Path]) -> list[Path]:
    """The given dirs that hold a campaign's attempts; the others (a campaign that failed before
    its first attempt, any other folder a glob caught) are listed on stderr and skipped, unless
    none is left (the loader then says what is wrong with them)."""
    from kernelarc.rundir import ATTEMPTS_FILE

    runs, skipped = [], []
    for path in paths:
        log = path / ATTEMPTS_FILE
        if not path.is_dir():
            runs.append(path)  # a typo: the loader's error names it
        elif not log.is_file():
            skipped.append(f"{path}: not a campaign run dir (no {ATTEMPTS_FILE})")
        elif not log.read_text(encoding="utf-8").strip():
            skipped.append(f"{path}: no attempts recorded (the campaign never ran one)")
        else:
            runs.append(path)
    if not runs:
        return paths
    console = make_console(stderr=True)
    for reason in skipped:
        console.print(f"skipped: {reason}", markup=False, highlight=False)
    return runs


def _cmd_sync(ns: argparse.Namespace) -> int:
    from kernelarc.report.sol_score import SolScorer
    from kernelarc.tracking.mlflow_sync import ledger_uri, sync_run_dir

    limit_mlflow_retries()
    console = Console()
    status = 0
    for run_dir in ns.run_dirs:
        uri = ns.tracking_uri or ledger_uri(run_dir) or _env_or_local_mlflow_uri()
        try:
            report = sync_run_dir(
                run_dir,
                uri,
                experiment=ns.experiment,
                sol_score=SolScorer.for_run_dir(run_dir),
                verify=ns.verify,
            )
        except KernelarcError as exc:
            console.print(
                f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            status = 1
            continue
        console.print(report.describe(), highlight=False, soft_wrap=True)
    return status


def _cmd_report(ns: argparse.Namespace) -> int:
    from kernelarc.report.build import ReportOptions, build_report
    from kernelarc.report.html_page import format_interval
    from kernelarc.report.inputs import load_campaigns

    options = ReportOptions(
        budget=ns.budget,
        target=ns.target,
        arm_by=tuple(ns.arm_by),
        confidence=ns.confidence,
        ci=ns.ci,
    )
    limit_mlflow_retries()
    uri = ns.tracking_uri or _env_or_local_mlflow_uri()
    skipped: list[str] = []
    campaigns = load_campaigns(ns.targets, uri, skipped)
    out = ns.out or Path("reports") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    report = build_report(campaigns, out, options)
    console = make_console()
    for reason in skipped:
        make_console(stderr=True).print(f"skipped: {reason}", markup=False, highlight=False)
    columns = ("problem", "arm", "runs", "final best speedup", "final SOL", "to target")
    rows = [
        (
            arm.problem,
            arm.arm,
            str(len(arm.runs)),
            format_interval(arm.final_best),
            format_interval(arm.final_sol),
            f"{format_interval(arm.to_target)} ({arm.reached}/{len(arm.runs)})",
        )
        for arm in report.arms
    ]
    title = f"kernelarc report: {len(campaigns)} campaigns, budget {report.budget}"
    print_table(console, title, columns, rows)  # a CPU campaign's label is among the notes
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    console.print(f"Report: {report.html.resolve()}", highlight=False, soft_wrap=True)
    if ns.no_mlflow:
        return 0
    return _log_report(ns, campaigns, report.out_dir, console)


def _log_report(ns: argparse.Namespace, campaigns: list[Any], out: Path, console: Console) -> int:
    from kernelarc.tracking.mlflow_report_run import log_report_run

    known = next((c for c in campaigns if c.tracking_uri and c.experiment), None)
    if ns.experiment:
        uri = ns.tracking_uri or (known.tracking_uri if known else _env_or_local_mlflow_uri())
        experiment = ns.experiment
    elif known is not None:
        uri, experiment = known.tracking_uri, known.experiment
    else:
        console.print(
            "not logged to MLflow: no campaign was found in a store; pass --experiment "
            "(and --tracking-uri) to log it, or --no-mlflow",
            highlight=False,
        )
        return 0
    run_ids = [c.mlflow_run_id for c in campaigns if c.mlflow_run_id]
    try:
        run_id = log_report_run(uri, experiment, out, f"report-{out.name}", run_ids)
    except KernelarcError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 1
    console.print(
        f"MLflow: run {run_id} in experiment {experiment!r} at {uri} (artifacts: report/)",
        highlight=False,
        soft_wrap=True,
    )
    return 0


def _env_or_local_mlflow_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the campaign's default store: sqlite in the current dir."""
    return os.environ.get("MLFLOW_TRACKING_URI") or _local_mlflow_uri()


def limit_mlflow_retries() -> None:
    """A dead tracking server must cost seconds, not minutes of retries (unless set already)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


def _check_timestamp(value: str) -> None:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        msg = f"--timestamp {value!r} is not an ISO 8601 time (e.g. 2026-12-02T10:00:00+00:00)"
        raise ConfigError(msg) from exc


def _local_mlflow_uri() -> str:
    """The campaign's default store: sqlite in the current directory."""
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def _verify(out: Path, requested: str, timeout_s: float) -> list[Any]:
    from kernelarc.campaign.device import resolve_device
    from kernelarc.config import EvalConfig
    from kernelarc.schema import TimingConfig
    from leaderboard.official import official_available
    from leaderboard.verify import verify_export

    device = resolve_device(requested)
    warmup, iterations = EvalConfig().timing_for(device)
    checks = verify_export(
        out,
        device=device,
        timing=TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=EvalConfig().budget_for(device)
        ),
        timeout_s=timeout_s,
    )
    rows = [
        (check.problem, row.workload, row.recorded, row.kernelarc, row.official or "-")
        for check in checks
        for row in check.workloads
    ]
    columns = ("problem", "workload", "recorded", "kernelarc", "official")
    console = make_console(stderr=True)
    print_table(console, f"kernelarc export --verify ({device})", columns, rows)
    for check in checks:
        verdict = "[green]agrees[/]" if check.agree else "[bold red]DISAGREES[/]"
        console.print(f"{check.problem}: {verdict}; {escape(check.note)}", highlight=False)
        if check.official_note:
            console.print(f"  official: {check.official_note}", markup=False, highlight=False)
    if not official_available():
        console.print("official evaluator (sol_execbench) not installed: not run", highlight=False)
    elif device == "cpu":
        console.print(
            "official evaluator on CPU: its timing always fails (RUNTIME_ERROR); shown as is",
            highlight=False,
        )
    return checks


if __name__ == "__main__":
    raise SystemExit(main())
