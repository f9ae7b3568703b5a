"""`kernelarc replay`: re-judge a campaign's attempts from attempts.jsonl alone.

Place in the flow: `kernelarc.cli` registers `add_parser` and calls `run`; the rules are the
guard's (`guard.rejudge`), the run dir is read by `rundir.rejudge.replay_run`.
"""

import argparse
from pathlib import Path

from rich.console import Console

_EPILOG = """\
Re-runs the benchmark guard's acceptance rules over the measurements recorded in
RUN_DIR/attempts.jsonl and reports every attempt whose verdict, status or confirmation would
differ. Exit status 0 iff every decision is reproduced.

examples:
  kernelarc replay outputs/kernelarc/2026-12-02_10-00-00
"""


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc replay` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    rp = sub.add_parser(
        "replay",
        help="re-judge a campaign's attempts from attempts.jsonl alone",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    rp.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a campaign's run dir")


def run(ns: argparse.Namespace) -> int:
    """Print each decision that differs from the record; 0 iff none does."""
    from kernelarc.rundir.rejudge import replay_run

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
