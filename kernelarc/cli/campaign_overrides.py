"""Command-line overrides of `kernelarc campaign` checked against the config schema before Hydra
runs: a misspelt key gets "did you mean" and exit status 2, like every other config error.

Place in the flow: `cli.campaign.run_hydra_campaign` calls `check_override_keys` on the command
line before Hydra composes anything (so nothing is created for a typo). Hydra's own message for
`budget.candidate=3` suggests `+budget.candidate=3`, which fails as well, since every key is
typed by `config.CampaignConfig`. Keys under `hydra.`, config group choices (`agents=llm`,
`hydra/launcher=local_joblib`) and keys below a free-form mapping are left to Hydra.
"""

import dataclasses
import difflib
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernelarc.config import CampaignConfig
from kernelarc.errors import ConfigError


def check_override_keys(args: Sequence[str], groups: Iterable[str]) -> None:
    """Raise ConfigError naming the first override whose key is not in the schema.

    Args:
        args: the command line after `campaign` (flags are skipped).
        groups: the config group names (`agents`, `llm`, ...): `agents=llm` selects an option.
    """
    if any(a in ("-sc", "--shell-completion") for a in args):
        return  # `install=bash`, `query=bash` are completion commands, not overrides
    group_names = set(groups)
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~")
        if not key or key.startswith("hydra") or "/" in key or "@" in key:
            continue
        if key in group_names:
            continue
        problem = _unknown(key)
        if problem is not None:
            msg = f"{arg}: {problem}"
            raise ConfigError(msg)


def config_groups(conf_dir: Path) -> list[str]:
    """The config group names of a conf dir (its sub-folders holding YAML files)."""
    if not conf_dir.is_dir():
        return []
    return sorted(p.name for p in conf_dir.iterdir() if p.is_dir() and any(p.glob("*.yaml")))


def _unknown(key: str) -> str | None:
    """Why `key` is not a config key (with the nearest ones), or None when it is one."""
    node: Any = CampaignConfig
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if not (isinstance(node, type) and dataclasses.is_dataclass(node)):
            return None  # below a free-form value (a mapping, a list): Hydra decides
        fields = {f.name: f for f in dataclasses.fields(node)}
        if "[" in part:
            return None  # an indexed key: Hydra's grammar decides
        if part not in fields:
            parent = ".".join(parts[:depth])
            return _message(key, parent, list(fields))
        node = _dataclass_of(typing.get_type_hints(node).get(part))
    return None


def _dataclass_of(hint: Any) -> Any:
    """The dataclass a field holds (through `X | None`), else None."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _message(key: str, parent: str, siblings: list[str]) -> str:
    prefix = f"{parent}." if parent else ""
    leaf = key.split(".")[-1]
    near = [prefix + n for n in difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.6)]
    if not near:  # a key given at the wrong level: `candidates=3` for budget.candidates
        near = [p for p in _all_keys() if p.split(".")[-1] == leaf][:1]
    hint = f": did you mean {near[0]}?" if near else ""
    where = f"keys of {parent}" if parent else "top-level keys"
    return (
        f"unknown config key {key!r}{hint} ({where}: {', '.join(siblings)}; "
        "`kernelarc campaign --help` shows every key)"
    )


def _all_keys(node: Any = CampaignConfig, prefix: str = "") -> list[str]:
    """Every dotted key of the schema (for a key given at the wrong level)."""
    keys: list[str] = []
    hints = typing.get_type_hints(node)
    for field in dataclasses.fields(node):
        path = f"{prefix}{field.name}"
        keys.append(path)
        inner = _dataclass_of(hints.get(field.name))
        if inner is not None:
            keys += _all_keys(inner, f"{path}.")
    return keys
