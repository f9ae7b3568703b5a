"""What `kernelarc report` reads: campaigns from run dirs, sweep dirs and MLflow experiments.

Place in the flow: the CLI passes its targets here; `report.build` gets `CampaignData`. A target
`experiment:NAME` names an MLflow experiment; any other target that is a directory is a run dir
(it holds attempts.jsonl) or a folder of them (a Hydra sweep dir, searched three levels deep),
and a target that is neither names an experiment too. A directory with no run in it (a campaign
that never started, `kernelarc/` of a checkout) is skipped and listed, with the
`experiment:` spelling when an experiment was meant. A campaign found both ways (an MLflow run
whose `kernelarc.run_dir` was also given) is read once, from the run dir.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelarc.errors import ConfigError, KernelarcError
from kernelarc.report.sol_score import SolScorer
from kernelarc.rundir import ATTEMPTS_FILE, LEDGER_FILE
from kernelarc.schema import Attempt
from kernelarc.tracking import keys
from kernelarc.tracking.attempts_log import read_attempts
from kernelarc.tracking.run_metadata import (
    flatten_config,
    read_campaign_json,
    read_choices,
    read_config,
    read_overrides,
)
from kernelarc.tracking.sync_ledger import SyncLedger

logger = logging.getLogger(__name__)

_SWEEP_DEPTH = 3
EXPERIMENT_PREFIX = "experiment:"
"""Marks a report target as an MLflow experiment name, never a path."""


@dataclass(frozen=True)
class CampaignData:
    """One campaign as the report sees it."""

    label: str
    """The run dir, or `mlflow:<experiment>/<run id>`."""
    problem: str
    """Definition name."""
    seed: str
    """Campaign seed ('' when unknown)."""
    overrides: dict[str, str]
    """The job's Hydra overrides, key to value ({} when unknown)."""
    config: dict[str, str]
    """The flattened config (MLflow params)."""
    attempts: tuple[Attempt, ...]
    """Every attempt, by index."""
    sol_scores: dict[int, float | None] = field(default_factory=dict)
    """SOL score per PASSED attempt index (None: no bound)."""
    choices: dict[str, str] = field(default_factory=dict)
    """Hydra's config group choices (`guard: default`), so a group left at its default still
    has a value ({} when unknown)."""
    run_dir: Path | None = None
    """The run dir, when it is here."""
    mlflow_run_id: str | None = None
    """The parent run, when known."""
    tracking_uri: str | None = None
    """The store holding the parent run, when known."""
    experiment: str | None = None
    """Its experiment name, when known."""


def load_campaigns(
    targets: Sequence[str], tracking_uri: str, skipped: list[str] | None = None
) -> list[CampaignData]:
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
    campaigns: list[CampaignData] = []
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


def load_run_dir(run_dir: Path) -> CampaignData:
    """One campaign from its run dir.

    Raises:
        ConfigError: attempts.jsonl is unreadable.
    """
    try:
        attempts = tuple(sorted(read_attempts(run_dir / ATTEMPTS_FILE), key=lambda a: a.index))
    except KernelarcError as exc:
        msg = f"{run_dir}: unreadable run: {exc}"
        raise ConfigError(msg) from exc
    config = read_config(run_dir)
    record = read_campaign_json(run_dir)
    ledger = SyncLedger(run_dir / LEDGER_FILE)
    entry = ledger.campaign()
    uri = entry.uri if entry is not None and entry.uri else None
    view = ledger.view(uri) if uri else None
    scorer = SolScorer.for_run_dir(run_dir)
    return CampaignData(
        label=str(run_dir),
        problem=_problem(attempts, str(record.get("problem") or config.get("problem", ""))),
        seed=str(record.get("seed", config.get("seed", ""))),
        overrides=parse_overrides(read_overrides(run_dir)),
        choices=read_choices(run_dir),
        config=flatten_config(config),
        attempts=attempts,
        sol_scores={a.index: scorer(a) for a in attempts},
        run_dir=run_dir,
        mlflow_run_id=view.parent_run_id if view else None,
        tracking_uri=uri if view and view.parent_run_id else None,
        experiment=entry.experiment if entry is not None else None,
    )


def load_experiment(tracking_uri: str, experiment: str) -> list[CampaignData]:
    """Every campaign of an MLflow experiment, oldest first (from a run dir when it is here).

    Raises:
        ConfigError: the target is not a dir and no such experiment exists.
        TrackingError: MLflow failed.
    """
    # Imported here: mlflow costs a second and reports of run dirs do not need it.
    from kernelarc.tracking.mlflow_reader import read_experiment

    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///").split("?", 1)[0])
        if not db.is_file():
            msg = (
                f"{experiment!r} is not a directory, and there is no MLflow store at {db} to "
                "look it up in; pass run dirs, or --tracking-uri of the store"
            )
            raise ConfigError(msg)

    try:
        runs = read_experiment(tracking_uri, experiment)
    except ConfigError as exc:
        msg = f"{experiment!r} is neither a directory nor an MLflow experiment ({exc})"
        raise ConfigError(msg) from exc
    out = []
    for run in runs:
        run_dir = Path(run.run_dir) if run.run_dir else None
        if run_dir is not None and (run_dir / ATTEMPTS_FILE).is_file():
            local = load_run_dir(run_dir)
            out.append(
                replace(
                    local,
                    mlflow_run_id=run.run_id,
                    tracking_uri=tracking_uri,
                    experiment=experiment,
                )
            )
            continue
        attempts = tuple(run.attempts)
        overrides = run.tags.get(keys.OVERRIDES, "")
        out.append(
            CampaignData(
                label=f"mlflow:{experiment}/{run.run_id}",
                problem=_problem(attempts, run.tags.get(keys.PROBLEM, "")),
                seed=run.params.get("seed", run.tags.get(keys.SEED, "")),
                overrides=parse_overrides(overrides.split()),
                choices={
                    k.removeprefix(keys.CHOICE_PREFIX): v
                    for k, v in run.tags.items()
                    if k.startswith(keys.CHOICE_PREFIX)
                },
                config=dict(run.params),
                attempts=attempts,
                sol_scores=dict(run.sol_scores),
                mlflow_run_id=run.run_id,
                tracking_uri=tracking_uri,
                experiment=experiment,
            )
        )
    return out


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """Hydra overrides as key to value (`+key=v` and `++key=v` as `key`; deletions dropped)."""
    out: dict[str, str] = {}
    for item in overrides:
        if "=" not in item or item.startswith("~"):
            continue
        key, value = item.split("=", 1)
        out[key.lstrip("+")] = value
    return out


def _problem(attempts: Sequence[Attempt], fallback: str) -> str:
    return attempts[0].problem if attempts else fallback


def _run_dir_order(path: Path) -> tuple[str, int, str]:
    """Sweep job dirs (0, 1, ..., 10) in numeric order."""
    name = path.name
    return (str(path.parent), int(name) if name.isdigit() else -1, name)
