"""What identifies a campaign in MLflow: its params (the flattened config) and its tags.

Place in the flow: `kernelarc campaign` builds the parent run's params and tags here (problem,
seed, device, coordination switches, Hydra choices and overrides, git sha, image ids); `kernelarc
sync` rebuilds them from a run dir that has no ledger (a `tracking=none` campaign), reading the
run dir's files through `rundir.run_config` and `rundir.run_record`. No mlflow import: this runs
for every campaign.
"""

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelarc import __version__
from kernelarc.rundir.run_config import flatten_config, read_choices, read_config, read_overrides
from kernelarc.rundir.run_record import read_campaign_json
from kernelarc.timing_labels import CPU_TIMING_NOTE, TIMING_TAG_VALUE
from kernelarc.tracking import keys

IMAGE_ID_ENV = "KERNELARC_IMAGE_ID"
"""Environment variable naming the platform image a campaign runs in (set by whoever starts it)."""


@dataclass(frozen=True)
class CampaignIdentity:
    """The parts of a campaign's parent run that the config and run dir determine."""

    name: str
    """Run name (the campaign name)."""
    experiment: str
    """MLflow experiment name."""
    params: dict[str, str]
    """The flattened config."""
    tags: dict[str, str]
    """Campaign tags (problem, seed, switches, provenance, run dir)."""


def run_name(name: str, overrides: Sequence[str]) -> str:
    """The parent run's name: the campaign name and its top-level overrides (config group
    choices and keys like `seed=1`, `problem=softmax`), so the runs of a sweep tell themselves
    apart in the MLflow UI: `abl guard=off problem=softmax seed=1`."""
    shown = [
        o
        for o in overrides
        if "=" in o
        and "." not in o.split("=", 1)[0]
        and not o.lstrip("+~").startswith(("name=", "device=", "tracking"))
    ]
    return " ".join([name, *shown])[:250]


def campaign_tags(
    config: Mapping[str, Any],
    run_dir: Path,
    device: str | None = None,
    choices: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
    provenance: bool = True,
    problem_name: str | None = None,
    problem_source: str | None = None,
) -> dict[str, str]:
    """The parent run's tags of a campaign.

    Args:
        config: the resolved config as plain containers (`OmegaConf.to_container`).
        run_dir: the campaign's run dir.
        device: the resolved device (`cpu`/`cuda`); None: the config's `device`.
        choices: Hydra's config group choices (`guard: off`); groups under `hydra/` are skipped.
        overrides: the job's command-line overrides.
        provenance: add this process's git sha, version and image id (False when the tags
            describe a campaign that ran earlier).
        problem_name: the definition's name, the problem tag (campaigns of one problem group
            together however it was given); None: the config's `problem`.
        problem_source: where the problem came from (a built-in name or the problem dir's
            absolute path); None: the config's `problem`.
    """
    source = problem_source or str(config.get("problem", ""))
    tags = {
        keys.PROBLEM: problem_name or source,
        keys.PROBLEM_SOURCE: source,
        keys.SEED: str(config.get("seed", "")),
        keys.DEVICE: device or str(config.get("device", "")),
        keys.RUN_DIR: str(run_dir.resolve()),
    }
    if tags[keys.DEVICE] == "cpu":
        # Every number of a CPU campaign is a pipeline check: say so on the run (the UI shows
        # the note as the run's description).
        tags[keys.TIMING] = TIMING_TAG_VALUE
        tags[keys.MLFLOW_NOTE] = CPU_TIMING_NOTE
    tags.update(_sandbox_tags(config.get("sandbox") or {}))
    coordination = config.get("coordination") or {}
    if isinstance(coordination, dict):
        for switch, value in coordination.items():
            if isinstance(value, bool):
                tags[f"{keys.COORDINATION_PREFIX}{switch}"] = str(value).lower()
    for group, option in sorted((choices or {}).items()):
        if not group.startswith("hydra") and option is not None:
            tags[f"{keys.CHOICE_PREFIX}{group}"] = str(option)
    if overrides:
        tags[keys.OVERRIDES] = " ".join(overrides)
    if provenance:
        tags[keys.VERSION] = __version__
        sha = git_sha()
        if sha:
            tags[keys.GIT_SHA] = sha
        image = os.environ.get(IMAGE_ID_ENV)
        if image:
            tags[keys.IMAGE_ID] = image
    return tags


def _sandbox_tags(sandbox: object) -> dict[str, str]:
    """The sandbox kind (and Docker image) tags of a config's `sandbox` section."""
    if not isinstance(sandbox, dict):
        return {}
    tags = {keys.SANDBOX: str(sandbox.get("kind", ""))}
    docker = sandbox.get("docker") or {}
    if sandbox.get("kind") == "docker" and isinstance(docker, dict):
        tags[keys.SANDBOX_IMAGE] = str(docker.get("image", ""))
    return tags


def git_sha(path: Path | None = None) -> str | None:
    """HEAD of the git checkout holding `path` (default: this package), `-dirty` when tracked
    files have local edits; None outside a checkout or without git."""
    where = path or Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    dirty = "-dirty" if status.returncode == 0 and status.stdout.strip() else ""
    return head.stdout.strip() + dirty


def identity_from_run_dir(run_dir: Path) -> CampaignIdentity:
    """Params and tags of a campaign rebuilt from its run dir (config.yaml, campaign.json,
    .hydra/), for run dirs without a ledger; the git sha of the time is not in a run dir."""
    config = read_config(run_dir)
    record = read_campaign_json(run_dir)
    name = str(record.get("name") or config.get("name") or run_dir.name)
    tracking = config.get("tracking") or {}
    experiment = tracking.get("experiment") if isinstance(tracking, dict) else None
    tags = campaign_tags(
        config,
        run_dir,
        device=record.get("device"),
        choices=read_choices(run_dir),
        overrides=read_overrides(run_dir),
        provenance=False,
        problem_name=str(record["problem"]) if record.get("problem") else None,
    )
    return CampaignIdentity(
        name=name,
        experiment=str(experiment or name),
        params=flatten_config(config),
        tags=tags,
    )
