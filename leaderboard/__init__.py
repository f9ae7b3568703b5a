"""Leaderboard: export a KernelArc run's best solutions in the SOL-ExecBench format.

`export_run(run_dir, out_dir)` is called by `kernelarc export` after a campaign.
"""

from leaderboard.export import export_run

__all__ = ["export_run"]
