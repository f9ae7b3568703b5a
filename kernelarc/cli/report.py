"""`kernelarc report`: the ablation report over campaigns (per-arm statistics, credit, plots),
written to a folder and logged to MLflow.

Place in the flow: `kernelarc.cli` registers `add_parser` and calls `run`; the numbers and pages
are `kernelarc.report`'s, the MLflow run `tracking.mlflow_report_run`'s, both imported when the
command runs.
"""

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from kernelarc.cli.console import make_console, print_error, print_table
from kernelarc.cli.mlflow_store import env_or_local_mlflow_uri, limit_mlflow_retries
from kernelarc.errors import KernelarcError

_EPILOG = """\
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


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc report` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    rep = sub.add_parser(
        "report",
        help="ablation report: per-arm statistics, credit and plots, logged to MLflow",
        epilog=_EPILOG,
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


def run(ns: argparse.Namespace) -> int:
    """Build the report, print its table, log it to MLflow unless --no-mlflow."""
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
    uri = ns.tracking_uri or env_or_local_mlflow_uri()
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
        uri = ns.tracking_uri or (known.tracking_uri if known else env_or_local_mlflow_uri())
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
        print_error(exc, console)
        return 1
    console.print(
        f"MLflow: run {run_id} in experiment {experiment!r} at {uri} (artifacts: report/)",
        highlight=False,
        soft_wrap=True,
    )
    return 0
