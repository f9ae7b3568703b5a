"""The `kernelarc` command: `main` reads the command word and hands the rest to its module.

One module per command (`campaign`, `eval`, `export`, `replay`, `sync`, `report`, `problems`;
`resume` only describes itself and runs as the campaign command), each with `add_parser(sub)`
and `run(ns)`; what they share is in `console.py` (consoles, tables, the `error:` line and its
exit status) and `mlflow_store.py`. Command modules import those, never each other nor this
package's `__init__`, so there is no import cycle and a command can be read on its own.
`campaign` is a Hydra app and parses its own command line: it is imported only when it runs, so
the other commands start without importing Hydra. Only `campaign` sees a DictConfig: it converts
the composed config to the typed CampaignConfig and hands plain objects to the library.
The library never imports `kernelarc.cli`: what it prints for people too (`command_paths.py`,
`timing_labels.py`) sits outside the package, and the config schema is stored in Hydra by
`config.register_configs()`, which the campaign command (and the benchmarks, tests) call.
"""

import argparse
import os
import sys
from collections.abc import Callable

from kernelarc import __version__
from kernelarc.cli import eval, export, problems, replay, report, resume, sync
from kernelarc.cli.console import USAGE_ERROR, print_error
from kernelarc.errors import KernelarcError

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

_RUNS: dict[str, Callable[[argparse.Namespace], int]] = {
    "eval": eval.run,
    "replay": replay.run,
    "export": export.run,
    "sync": sync.run,
    "report": report.run,
    "problems": problems.run,
}
"""The commands argparse parses, by name (campaign and resume go to Hydra before argparse)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kernelarc` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-sc", "--shell-completion"):
        return _shell_completion(args)
    if args and args[0] == "campaign":
        # Hydra parses its own argv; hand it everything after the subcommand.
        from kernelarc.cli.campaign import run_hydra_campaign

        return run_hydra_campaign(args[1:])
    if args and args[0] == "resume" and len(args) > 1 and not args[1].startswith("-"):
        from kernelarc.cli.campaign import run_hydra_campaign

        return run_hydra_campaign([f"resume={args[1]}", *args[2:]])
    parser = build_parser()
    ns = parser.parse_args(args)
    if ns.command is None:
        parser.print_help()
        return 2
    run = _RUNS.get(ns.command)
    if run is None:
        parser.print_help()
        return 2
    try:
        return run(ns)
    except KernelarcError as exc:
        print_error(exc)
        return USAGE_ERROR


_COMMANDS = ("campaign", "resume", "eval", "export", "replay", "sync", "report", "problems")


def _shell_completion(args: list[str]) -> int:
    """`kernelarc -sc install=bash` (Hydra's shell completion, set up for `kernelarc`) and the
    queries it makes: a command name is completed here, `campaign` overrides by Hydra, the
    other commands' arguments by the shell's file completion."""
    from kernelarc.cli.campaign import run_hydra_campaign

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
    parser = argparse.ArgumentParser(
        prog="kernelarc",
        description="Autonomous GPU kernel optimization over SOL-ExecBench problems.",
        epilog=_EPILOG_MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kernelarc {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="{campaign,resume,eval,export,replay,sync,report,problems}"
    )
    # Only named here: its module imports Hydra, which the other commands never load.
    sub.add_parser("campaign", help="run a campaign (Hydra overrides follow; see its --help)")
    # The order of the help's command list.
    for command in (resume, replay, report, sync, eval, export, problems):
        command.add_parser(sub)
    return parser


__all__ = ["build_parser", "main"]
