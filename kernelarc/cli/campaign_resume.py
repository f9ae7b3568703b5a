"""`kernelarc resume RUN_DIR` / `kernelarc campaign resume=RUN_DIR`: the command-line side of
resuming a killed campaign (the loop side is kernelarc/campaign/restore.py).

Place in the flow: `run_hydra_campaign` passes its arguments through `resume_args`, which checks
the run dir and points Hydra at it (`hydra.run.dir`, and no second `.hydra/` snapshot), so the
log, config.yaml, attempts and MLflow ledger all stay in the one run dir. The Hydra app then
replaces the composed config by `resumed_config`: the run dir's recorded config.yaml, with the
command-line overrides applied only where a resume may change something (the budget, evaluation
timeout, tracking, sandbox, executor and LLM endpoint); an override that changes anything else
(problem, workloads, agents, coordination, seed, ...) is refused with the key named.
"""

import re
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kernelarc.campaign.restore import check_resumable
from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError
from kernelarc.rundir import CONFIG_FILE

RESUMABLE_KEYS = (
    "budget",
    "eval.timeout_s",
    "tracking",
    "sandbox",
    "executor",
    "llm.base_url",
    "llm.api_key_env",
    "llm.timeout_s",
    "llm.max_retries",
    "llm.concurrency",
)
"""Keys (and the keys under them) that a resume may change: how much to spend and where things
run, never what the campaign is (problem, workloads, team, coordination, guard, seed, ...)."""

_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_/.:+~-]+")
_ABSENT = object()


def resume_args(args: Sequence[str]) -> list[str]:
    """`args` of `kernelarc campaign`, with a `resume=RUN_DIR` made absolute and Hydra's run dir
    set to it; unchanged without `resume=`.

    Raises:
        ConfigError: RUN_DIR is not a campaign run dir, the command is a multirun, or
            `hydra.run.dir` names another dir.
    """
    value = next((a.split("=", 1)[1] for a in reversed(args) if _key(a) == "resume"), None)
    if value is None or value.strip().lower() in ("", "null", "none"):
        return list(args)
    if any(a in ("-m", "--multirun") for a in args):
        msg = "resume= continues one campaign; it cannot be combined with -m/--multirun"
        raise ConfigError(msg)
    run_dir = Path(value.strip().strip("'\"")).expanduser().resolve()
    check_resumable(run_dir)
    quoted = _quote(str(run_dir))
    kept = [a for a in args if _key(a) != "resume"]
    for arg in kept:
        if _key(arg) == "hydra.run.dir":
            named = Path(arg.split("=", 1)[1].strip("'\"")).expanduser().resolve()
            if named != run_dir:
                msg = (
                    f"{arg} but resume={value}: a resumed campaign writes into the run dir it "
                    "resumes; drop hydra.run.dir"
                )
                raise ConfigError(msg)
    kept = [a for a in kept if _key(a) not in ("hydra.run.dir", "hydra.output_subdir")]
    # No .hydra/ snapshot of the resume: the campaign's own one stays as it was recorded.
    return [*kept, f"resume={quoted}", f"hydra.run.dir={quoted}", "hydra.output_subdir=null"]


def resumed_config(composed: DictConfig, overrides: Sequence[str], run_dir: Path) -> DictConfig:
    """The config a resume runs with: RUN_DIR/config.yaml, typed by CampaignConfig, with those
    of the command-line `overrides` that a resume may change taken from `composed` (the config
    Hydra composed from conf/ and the overrides), and `resume` set to `run_dir`.

    Raises:
        ConfigError: config.yaml cannot be read, or an override changes a key outside
            RESUMABLE_KEYS; the message names the key, both values and the fix.
    """
    path = run_dir / CONFIG_FILE
    try:
        recorded = OmegaConf.merge(OmegaConf.structured(CampaignConfig), OmegaConf.load(path))
    except (OSError, OmegaConfBaseException) as exc:
        msg = f"{path}: cannot read the recorded config of the campaign to resume ({exc})"
        raise ConfigError(msg) from exc
    assert isinstance(recorded, DictConfig)
    for override in overrides:
        key = _key(override)
        if key in ("resume", "") or key == "hydra" or key.startswith("hydra."):
            continue
        new = OmegaConf.select(composed, key, default=_ABSENT)
        if any(key == k or key.startswith(k + ".") for k in RESUMABLE_KEYS):
            OmegaConf.update(recorded, key, new, merge=False)
            continue
        old = OmegaConf.select(recorded, key, default=_ABSENT)
        if new is _ABSENT or _plain(new) != _plain(old):
            shown = "(not a key of the recorded config)" if old is _ABSENT else repr(_plain(old))
            msg = (
                f"`{override}` changes {key!r} of the campaign to resume (recorded in {path}: "
                f"{shown}); a resume keeps what defines the campaign and may only change "
                f"{', '.join(RESUMABLE_KEYS)}. Drop the override, or start a new campaign."
            )
            raise ConfigError(msg)
    recorded.resume = str(run_dir)
    return recorded


def _key(arg: str) -> str:
    """The config key of a Hydra override (`+budget.candidates=8` -> `budget.candidates`,
    `agents@x=llm` -> `agents`); '' for what is not an override."""
    if "=" not in arg or arg.startswith("-"):
        return ""
    key = arg.split("=", 1)[0].lstrip("+~")
    return key.split("@", 1)[0]


def _plain(value: object) -> object:
    """A config value as plain data, for comparison."""
    if isinstance(value, DictConfig) or OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _quote(value: str) -> str:
    """A Hydra override value: as is when plain, else single-quoted."""
    if _PLAIN_VALUE.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
