"""Leaderboard: export campaigns' best accepted solutions in the SOL-ExecBench format.

`kernelarc export` loads inputs (`leaderboard.inputs`), plans and writes the export
(`leaderboard.export`) and optionally re-evaluates it (`leaderboard.verify`). Format: README.md.
"""

from leaderboard.export import export_leaderboard, export_run, plan_export, write_export
from leaderboard.selection import qualifies

__all__ = ["export_leaderboard", "export_run", "plan_export", "qualifies", "write_export"]
