"""`kernelarc resume RUN_DIR`: its help and arguments. A resume with a RUN_DIR runs as
`kernelarc campaign resume=RUN_DIR` (`kernelarc.cli.main` hands it to the campaign command), so
this module only describes the command; the resume itself is `campaign_resume.py` and
`kernelarc/campaign/restore.py`.
"""

import argparse
from pathlib import Path

_EPILOG = """\
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


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc resume` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    res = sub.add_parser(
        "resume",
        help="continue a killed campaign in its run dir (= campaign resume=RUN_DIR)",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    res.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the killed campaign's run dir")
    res.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="e.g. budget.candidates=40")
