"""Export campaigns' best accepted solutions as a SOL-ExecBench leaderboard submission.

Place in the flow: the last step. `plan_export` reads CampaignSources (run dirs or MLflow,
`leaderboard.inputs`), keeps accepted attempts (`selection.qualifies`), scores them
(`kernelarc.guard.score.score_attempt`), picks one per problem by latency (`selection.py`),
never one slower than its campaign's reference (`reference_floor.py`), and checks it against
the official rules (`rules.py`), into a `plan.Plan`; `write_export` writes
`<out>/<problem>/{solution.json,traces.jsonl,problem/,sources/}`, `<out>/scores.csv` and
`<out>/manifest.json`. The same inputs give byte-identical files.
"""

import logging
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

from kernelarc.errors import ConfigError
from kernelarc.guard.score import ProblemScore, score_attempt
from kernelarc.guard.sol_bounds import sol_bounds
from kernelarc.problems.files import Problem
from kernelarc.rundir.reader import CampaignSource
from kernelarc.schema import Attempt
from leaderboard.inputs import check_definitions, load_run_dir
from leaderboard.manifest import build_manifest, scores_csv
from leaderboard.plan import ExportedProblem, Plan
from leaderboard.reference_floor import Floor, apply_floor, campaign_reference
from leaderboard.rules import check_exportable, explicit_solution
from leaderboard.selection import Candidate, Choice, Selection, qualifies, select
from leaderboard.serialize import dump_json, write_text

logger = logging.getLogger(__name__)

SOLUTION_FILE = "solution.json"
"""Per-problem solution file name."""
TRACES_FILE = "traces.jsonl"
"""Per-problem traces file name."""
PROBLEM_DIR = "problem"
"""Per-problem copy of definition.json + workload.jsonl (an official PROBLEM_DIR)."""
SOURCES_DIR = "sources"
"""Per-problem folder of the solution's source files (with `--sources`)."""
MANIFEST_FILE = "manifest.json"
"""Top-level provenance file."""
SCORES_FILE = "scores.csv"
"""Top-level score table."""
PROBLEM_FILES = ("definition.json", "workload.jsonl")
"""Files copied into `<problem>/problem/`."""


def plan_export(inputs: Sequence[CampaignSource], timestamp: str | None = None) -> Plan:
    """Select, score and check what would be exported; writes nothing.

    Raises:
        ConfigError: no input, conflicting definitions, no problem with an accepted attempt
            (the message lists every problem and why), or a selected solution the official
            evaluator would reject.
    """
    if not inputs:
        msg = "nothing to export: no campaign given"
        raise ConfigError(msg)
    known = check_definitions(inputs)
    floors = _Floors(inputs, known)
    candidates = []
    for order, campaign in enumerate(inputs):
        for attempt in campaign.attempts:
            if qualifies(attempt) and _finite(attempt):
                score = floors.score(order, attempt)
                candidates.append(Candidate(campaign.label, order, attempt, score))
    everything = [a for c in inputs for a in c.attempts]
    selection = floors.floored(select(candidates, everything))
    if not selection.choices:
        listed = "; ".join(f"{p}: {why}" for p, why in selection.unqualified.items())
        msg = f"no accepted attempt for any problem ({listed}); nothing to export"
        raise ConfigError(msg)
    exported = []
    for name, choice in selection.choices.items():
        solution = choice.chosen.attempt.proposal.solution
        check_exportable(name, solution)
        campaign = inputs[choice.chosen.order]
        exported.append(
            ExportedProblem(
                choice=choice,
                solution=explicit_solution(name, solution),
                problem=_problem_for(campaign, choice.chosen.attempt, known),
            )
        )
    for name, why in selection.unqualified.items():
        logger.warning("no accepted attempt for %s: %s; exporting the other problems", name, why)
    if timestamp is not None:
        when, source = timestamp, "--timestamp"
    else:
        when, source = max(a.finished_at for a in everything), "latest finished_at of the inputs"
    return Plan(tuple(inputs), tuple(exported), selection.unqualified, when, source)


def write_export(plan: Plan, out_dir: Path, *, sources: bool = False) -> list[Path]:
    """Write a plan under out_dir.

    Per problem (name order): solution.json, traces.jsonl, problem/definition.json and
    problem/workload.jsonl (when the problem files are known), sources/<path> (with `sources`);
    then scores.csv and manifest.json. A problem's `problem/` and `sources/` dirs are replaced
    whole; other files in out_dir are left alone.

    Returns:
        The written files, in that order.
    """
    written: list[Path] = []
    for item in plan.problems:
        written.extend(_write_problem(out_dir / item.name, item, sources=sources))
    written.append(write_text(out_dir / SCORES_FILE, scores_csv(plan)))
    written.append(write_text(out_dir / MANIFEST_FILE, dump_json(build_manifest(plan), indent=2)))
    return written


def export_leaderboard(
    inputs: Sequence[CampaignSource],
    out_dir: Path,
    *,
    sources: bool = False,
    timestamp: str | None = None,
) -> list[Path]:
    """plan_export then write_export (see both)."""
    return write_export(plan_export(inputs, timestamp), out_dir, sources=sources)


def export_run(run_dir: Path, out_dir: Path) -> list[Path]:
    """Export one campaign run dir (see export_leaderboard)."""
    return export_leaderboard([load_run_dir(run_dir)], out_dir)


def _write_problem(target: Path, item: ExportedProblem, *, sources: bool) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    # model_dump keeps defaults, so destination_passing_style is always explicit.
    solution = item.solution.model_dump(mode="json", exclude_none=True)
    attempt = item.choice.chosen.attempt
    traces = [dump_json(t.model_dump(mode="json", exclude_none=True)) for t in attempt.traces]
    written = [
        write_text(target / SOLUTION_FILE, dump_json(solution, indent=2)),
        write_text(target / TRACES_FILE, "".join(traces)),
    ]
    for sub in (PROBLEM_DIR, SOURCES_DIR):
        if (target / sub).is_dir():
            shutil.rmtree(target / sub)
    if item.problem is not None:
        (target / PROBLEM_DIR).mkdir()
        for name in PROBLEM_FILES:
            dest = target / PROBLEM_DIR / name
            dest.write_bytes((item.problem.path / name).read_bytes())
            written.append(dest)
    if sources:
        for source in sorted(item.solution.sources, key=lambda s: s.path):
            # SourceFile.path is validated relative with no `..`, so it stays under sources/.
            dest = target / SOURCES_DIR / source.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            written.append(write_text(dest, source.content))
    return written


class _Floors:
    """Per campaign (input order) and problem: what the reference floor needs, computed once."""

    def __init__(self, inputs: Sequence[CampaignSource], known: dict[str, Problem]) -> None:
        self.inputs = inputs
        self.known = known
        self.floors: dict[tuple[int, str], Floor] = {}

    def score(self, order: int, attempt: Attempt) -> ProblemScore:
        """An attempt's score: T_b its traces' reference latency, T_SOL its bounds."""
        bounds, source = sol_bounds(attempt, _problem_for(self.inputs[order], attempt, self.known))
        return score_attempt(attempt, bounds, source)

    def floor(self, candidate: Candidate) -> Floor:
        """The candidate's campaign's reference latency, definition and attempts of its problem."""
        key = (candidate.order, candidate.attempt.problem)
        if key not in self.floors:
            campaign = self.inputs[candidate.order]
            same = [a for a in campaign.attempts if a.problem == candidate.attempt.problem]
            problem = _problem_for(campaign, candidate.attempt, self.known)
            definition = problem.definition if problem is not None else None
            self.floors[key] = Floor(campaign_reference(same), definition, same)
        return self.floors[key]

    def floored(self, selection: Selection) -> Selection:
        """The selection with every choice that is slower than its campaign's reference
        replaced (or moved to the unqualified problems, with why): `reference_floor.py`."""
        unqualified = dict(selection.unqualified)
        choices: dict[str, Choice] = {}
        for name, choice in selection.choices.items():
            order = choice.chosen.order

            def score_of(attempt: Attempt, order: int = order) -> ProblemScore:
                return self.score(order, attempt)

            floored = apply_floor(choice, self.floor, score_of)
            if isinstance(floored, str):
                unqualified[name] = floored
            else:
                choices[name] = floored
        return Selection(choices, dict(sorted(unqualified.items())))


def _problem_for(
    campaign: CampaignSource, attempt: Attempt, known: dict[str, Problem]
) -> Problem | None:
    """The attempt's problem files: its campaign's, else another input's with the same definition
    when its workloads cover the attempt's traces."""
    if campaign.problem is not None and campaign.problem.name == attempt.problem:
        return campaign.problem
    other = known.get(attempt.problem)
    if other is None:
        return None
    uuids = {w.uuid for w in other.workloads}
    return other if all(t.workload.uuid in uuids for t in attempt.traces) else None


def _finite(attempt: Attempt) -> bool:
    if attempt.speedup is not None and math.isfinite(attempt.speedup) and attempt.traces:
        return True
    logger.warning(
        "attempt %d (%s) was accepted with speedup %s; not eligible",
        attempt.index,
        attempt.proposal.id,
        attempt.speedup,
    )
    return False
