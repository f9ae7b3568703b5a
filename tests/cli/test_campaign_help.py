"""The campaign help's generated lists and the launcher check."""

import pytest

from kernelarc.cli import campaign_help
from kernelarc.cli.campaign_help import launcher_check, launcher_names
from kernelarc.errors import ConfigError


def test_launcher_names_come_from_conf() -> None:
    assert launcher_names() == ["local_joblib", "slurm"]


def test_a_launcher_whose_plugin_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on a runtime-only install (the quickstart's): the joblib plugin is an extra.
    plugins = {"local_joblib": "hydra_plugins.not_installed_launcher"}
    monkeypatch.setattr(campaign_help, "LAUNCHER_PLUGINS", plugins)
    with pytest.raises(ConfigError, match=r"pip install 'kernelarc\[launchers\]'"):
        launcher_check(["-m", "hydra/launcher=local_joblib", "seed=0,1"])
    launcher_check(["-m", "seed=0,1"])  # the basic launcher needs no plugin
