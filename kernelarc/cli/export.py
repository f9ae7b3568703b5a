"""`kernelarc export`: the best accepted solution per problem of some campaigns, written as a
SOL-ExecBench submission (and, with --verify, evaluated again from its files alone).

Place in the flow: `kernelarc.cli` registers `add_parser` and calls `run`; the plan and the files
are `leaderboard`'s, imported when the command runs.
"""

import argparse
import dataclasses
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.markup import escape

from kernelarc.cli.console import make_console, print_table
from kernelarc.cli.mlflow_store import local_mlflow_uri
from kernelarc.errors import ConfigError

_EPILOG = """\
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


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc export` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    ex = sub.add_parser(
        "export",
        help="export the best solutions of campaign runs",
        epilog=_EPILOG,
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


def run(ns: argparse.Namespace) -> int:
    """Plan, write and (with --verify) check the export; 1 iff a check disagrees."""
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
        uri = ns.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or local_mlflow_uri()
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


def _check_timestamp(value: str) -> None:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        msg = f"--timestamp {value!r} is not an ISO 8601 time (e.g. 2026-12-02T10:00:00+00:00)"
        raise ConfigError(msg) from exc


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
