"""What `kernelarc report` reads: campaigns from run dirs, sweep dirs and MLflow experiments.

Place in the flow: the CLI passes its targets here; `report.build` gets `CampaignSource`. A target
`experiment:NAME` names an MLflow experiment; any other target that is a directory is a run dir
(it holds attempts.jsonl) or a folder of them (a Hydra sweep dir, searched three levels deep),
and a target that is neither names an experiment too. A directory with no run in it (a campaign
that never started, `kernelarc/` of a checkout) is skipped and listed, with the
`experiment:` spelling when an experiment was meant. A campaign found both ways (an MLflow run
whose `kernelarc.run_dir` was also given) is read once, from the run dir.
"""

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from kernelarc.errors import ConfigError
from kernelarc.report.sol_score import SolScorer
from kernelarc.rundir import ATTEMPTS_FILE
from kernelarc.rundir.reader import CampaignSource, read_run_dir
from kernelarc.tracking.experiment_source import read_experiment

logger = logging.getLogger(__name__)

_SWEEP_DEPTH = 3
EXPERIMENT_PREFIX = "experiment:"
"""Marks a report target as an MLflow experiment name, never a path."""


def load_campaigns(
    targets: Sequence[str], tracking_uri: str, skipped: list[str] | None = None
) -> list[CampaignSource]:
    """Every campaign named by `targets` (run dirs, sweep dirs, experiment names), in order.

    With `skipped`, a directory that holds no run (nor run with attempts) is appended to it
    with the reason instead of failing the whole report.

    Raises:
        ConfigError: a target is neither a run dir, a dir holding run dirs, nor an experiment;
            or no campaign with attempts was found.
        TrackingError: MLflow failed while reading an experiment.
    """
    if not targets:
        msg = "no target given; pass run dirs, sweep dirs or MLflow experiment names"
        raise ConfigError(msg)
    campaigns: list[CampaignSource] = []
    seen: set[str] = set()
    for target in targets:
        path = Path(target)
        if target.startswith(EXPERIMENT_PREFIX):
            found = load_experiment(tracking_uri, target.removeprefix(EXPERIMENT_PREFIX))
        elif path.is_dir():
            try:
                found = [load_run_dir(d) for d in find_run_dirs(path)]
            except ConfigError as exc:
                if skipped is None:
                    raise
                skipped.append(str(exc))
                continue
            if skipped is not None:
                skipped += [
                    f"{c.label}: no attempts recorded (the campaign never ran one)"
                    for c in found
                    if not c.attempts
                ]
        else:
            found = load_experiment(tracking_uri, target)
        for campaign in found:
            key = str(campaign.run_dir.resolve()) if campaign.run_dir else campaign.label
            if key not in seen:
                seen.add(key)
                campaigns.append(campaign)
    campaigns = [c for c in campaigns if c.attempts]
    if not campaigns:
        reasons = f" ({'; '.join(skipped)})" if skipped else ""
        msg = f"no campaign with attempts in {', '.join(targets)}{reasons}"
        raise ConfigError(msg)
    return campaigns


def find_run_dirs(path: Path) -> list[Path]:
    """`path` if it is a run dir, else the run dirs below it (sorted, three levels at most).

    Raises:
        ConfigError: none found.
    """
    if (path / ATTEMPTS_FILE).is_file():
        return [path]
    found: list[Path] = []
    level = [path]
    for _ in range(_SWEEP_DEPTH):
        level = sorted(d for parent in level for d in parent.iterdir() if d.is_dir())
        found += [d for d in level if (d / ATTEMPTS_FILE).is_file()]
    if not found:
        msg = (
            f"{path}: no run dir (a dir with {ATTEMPTS_FILE}) in it or below it; for the MLflow "
            f"experiment of that name write {EXPERIMENT_PREFIX}{path.name}"
        )
        raise ConfigError(msg)
    return sorted(found, key=_run_dir_order)


def load_run_dir(run_dir: Path) -> CampaignSource:
    """One campaign from its run dir, its PASSED attempts scored.

    Raises:
        ConfigError: the run is unreadable (`rundir.reader.read_run_dir`).
    """
    return _scored(read_run_dir(run_dir))


def load_experiment(tracking_uri: str, experiment: str) -> list[CampaignSource]:
    """Every campaign of an MLflow experiment, oldest first (from a run dir when it is here).

    Raises:
        ConfigError: the target is not a dir and no such experiment exists.
        TrackingError: MLflow failed.
    """
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///").split("?", 1)[0])
        if not db.is_file():
            msg = (
                f"{experiment!r} is not a directory, and there is no MLflow store at {db} to "
                "look it up in; pass run dirs, or --tracking-uri of the store"
            )
            raise ConfigError(msg)
    try:
        sources = read_experiment(tracking_uri, experiment)
    except ConfigError as exc:
        msg = f"{experiment!r} is neither a directory nor an MLflow experiment ({exc})"
        raise ConfigError(msg) from exc
    return [_scored(s) if s.run_dir is not None else s for s in sources]


def _scored(source: CampaignSource) -> CampaignSource:
    """A run dir's campaign with the SOL score of every attempt (None: no bound, not PASSED)."""
    if source.problem_error:
        logger.warning(
            "%s: attempts without a guard bound get no SOL score (%s)",
            source.label,
            source.problem_error,
        )
    scorer = SolScorer(problem=source.problem)
    return replace(source, sol_scores={a.index: scorer(a) for a in source.attempts})


def _run_dir_order(path: Path) -> tuple[str, int, str]:
    """Sweep job dirs (0, 1, ..., 10) in numeric order."""
    name = path.name
    return (str(path.parent), int(name) if name.isdigit() else -1, name)
