"""What an export will write, before anything is written: the Plan and its per-problem items.

Place in the flow: `leaderboard.export.plan_export` builds a Plan; `leaderboard.export` writes
it and `leaderboard.manifest` renders its scores.csv, manifest.json and dry-run text. The types
live here, apart from both, so that the renderer and the planner import them one way (no cycle).
"""

from dataclasses import dataclass

from kernelarc.problems.files import Problem
from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import Solution
from leaderboard.selection import Choice


@dataclass(frozen=True)
class ExportedProblem:
    """One problem's export: the choice, the solution as written, and its problem files."""

    choice: Choice
    """The selected candidate and the alternatives."""
    solution: Solution
    """The solution with every build setting explicit."""
    problem: Problem | None
    """Problem files to copy (None: unavailable)."""

    @property
    def name(self) -> str:
        """Definition name."""
        return self.choice.problem

    @property
    def category(self) -> str:
        """The definition's op_type ('' when unknown)."""
        return (self.problem.definition.op_type or "") if self.problem else ""


@dataclass(frozen=True)
class Plan:
    """What an export writes, before anything is written."""

    inputs: tuple[CampaignSource, ...]
    """The campaigns read."""
    problems: tuple[ExportedProblem, ...]
    """Exported problems, by name."""
    unqualified: dict[str, str]
    """Problems without an accepted attempt, with why."""
    exported_at: str
    """The manifest's export time."""
    exported_at_source: str
    """`--timestamp` or `latest finished_at of the input attempts`."""
