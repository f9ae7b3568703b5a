"""The run dir's config files as plain data: config.yaml, `.hydra/` overrides and choices.

Place in the flow: the campaign command writes them (Hydra writes `.hydra/`); the run-dir reader
(`rundir.reader`), `kernelarc sync` rebuilding a campaign's MLflow params and tags
(`tracking.run_metadata`) and the campaign command's own params read them here. They live in
rundir, not tracking, because reading a run dir must not import tracking (issue #19). Every
reader is lenient: a missing or unreadable file gives an empty value, never an error.
"""

import logging
from pathlib import Path
from typing import Any

import yaml

from kernelarc.rundir import CONFIG_FILE

logger = logging.getLogger(__name__)


def read_config(run_dir: Path) -> dict[str, Any]:
    """The run dir's resolved config.yaml as plain containers ({} when missing)."""
    try:
        data = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        logger.warning("%s/config.yaml: unreadable (%s)", run_dir, exc)
        return {}
    return data if isinstance(data, dict) else {}


def read_overrides(run_dir: Path) -> list[str]:
    """The job's Hydra overrides from `<run dir>/.hydra/overrides.yaml` ([] when absent)."""
    path = run_dir / ".hydra" / "overrides.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    return [str(item) for item in data] if isinstance(data, list) else []


def read_choices(run_dir: Path) -> dict[str, str]:
    """Hydra's config group choices from `<run dir>/.hydra/hydra.yaml` ({} when absent)."""
    path = run_dir / ".hydra" / "hydra.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    try:
        choices = data["hydra"]["runtime"]["choices"]
    except (KeyError, TypeError):
        return {}
    if not isinstance(choices, dict):
        return {}
    return {str(k): str(v) for k, v in choices.items() if not str(k).startswith("hydra")}


def flatten_config(node: Any, prefix: str = "") -> dict[str, str]:
    """Flatten a config container into dotted keys with string values (MLflow params)."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            out.update(flatten_config(value, f"{prefix}{key}."))
    else:
        out[prefix.rstrip(".")] = str(node)
    return out
