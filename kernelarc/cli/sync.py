"""`kernelarc sync`: upload to MLflow what it lacks of campaigns (after an outage, or a
tracking=none campaign).

Place in the flow: `kernelarc.cli` registers `add_parser` and calls `run`; the upload is
`tracking.mlflow_sync`'s, imported when the command runs. An error in one run dir is printed and
the next one is synced.
"""

import argparse
from pathlib import Path

from rich.console import Console

from kernelarc.cli.console import print_error
from kernelarc.cli.mlflow_store import env_or_local_mlflow_uri, limit_mlflow_retries
from kernelarc.errors import KernelarcError

_EPILOG = """\
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


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc sync` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    sy = sub.add_parser(
        "sync",
        help="upload to MLflow what it lacks of campaigns (after an outage)",
        epilog=_EPILOG,
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


def run(ns: argparse.Namespace) -> int:
    """Sync each run dir; 0 iff every one was synced."""
    from kernelarc.report.sol_score import SolScorer
    from kernelarc.tracking.mlflow_sync import ledger_uri, sync_run_dir

    limit_mlflow_retries()
    console = Console()
    status = 0
    for run_dir in ns.run_dirs:
        uri = ns.tracking_uri or ledger_uri(run_dir) or env_or_local_mlflow_uri()
        try:
            report = sync_run_dir(
                run_dir,
                uri,
                experiment=ns.experiment,
                sol_score=SolScorer.for_run_dir(run_dir),
                verify=ns.verify,
            )
        except KernelarcError as exc:
            print_error(exc, console)
            status = 1
            continue
        console.print(report.describe(), highlight=False, soft_wrap=True)
    return status
