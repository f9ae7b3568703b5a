"""SOL score of a campaign's PASSED attempts: the one definition (`guard.score.score_attempt`)
with the bounds looked up.

Place in the flow: `kernelarc campaign` and `kernelarc sync` hand a `SolScorer` to the MLflow
tracker (metric `eval/sol_score`), and `kernelarc report` scores incumbents with it; the
exporter calls the same `score_attempt` with the same bounds (`guard.sol_bounds.sol_bounds`:
the guard's recorded roofline bound, else one from the problem files), so an attempt has one
SOL score in MLflow, in the report and in scores.csv.
"""

import logging
from pathlib import Path

from kernelarc.errors import KernelarcError
from kernelarc.guard.score import score_attempt
from kernelarc.guard.sol_bounds import sol_bounds
from kernelarc.problems.files import Problem, load_problem
from kernelarc.rundir import PROBLEM_DIR
from kernelarc.schema import Attempt, EvalStatus

logger = logging.getLogger(__name__)


class SolScorer:
    """Scores PASSED attempts of one campaign; never raises (None when no score exists)."""

    def __init__(self, problem: Problem | None = None, problem_dir: Path | None = None) -> None:
        """Score with `problem`, or with the problem loaded from `problem_dir` on first use
        (a campaign copies its problem into the run dir only once it starts); neither: only
        attempts whose guard recorded a roofline bound get a score."""
        self._problem = problem
        self._problem_dir = problem_dir
        self._loaded = problem is not None or problem_dir is None

    @classmethod
    def for_run_dir(cls, run_dir: Path) -> "SolScorer":
        """A scorer over the run dir's copy of the problem (`<run dir>/problem`)."""
        return cls(problem_dir=run_dir / PROBLEM_DIR)

    def __call__(self, attempt: Attempt) -> float | None:
        """The attempt's SOL score (mean over workloads), or None."""
        if attempt.status != EvalStatus.PASSED:
            return None
        bounds, source = sol_bounds(attempt, self._problem_for_scoring())
        if bounds is None:
            return None
        try:
            return score_attempt(attempt, bounds, source).sol_score
        except ValueError:
            return None

    def _problem_for_scoring(self) -> Problem | None:
        folder = self._problem_dir
        if not self._loaded and folder is not None and (folder / "definition.json").is_file():
            self._loaded = True
            try:
                self._problem = load_problem(folder)
            except KernelarcError as exc:
                logger.warning(
                    "%s: attempts without a guard bound get no SOL score (%s)", folder, exc
                )
        return self._problem
