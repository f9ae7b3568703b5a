"""The hydra/launcher configs in conf/ compose onto the plugins' schemas (joblib, submitit)."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException

from kernelarc.config import register_configs

CONF = Path(__file__).resolve().parents[1] / "conf"


def _launcher(overrides: list[str]) -> dict[str, object]:
    register_configs()  # the schema conf/campaign.yaml is typed by
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("campaign", overrides=overrides, return_hydra_config=True)
    assert not GlobalHydra.instance().is_initialized()
    launcher = cfg.hydra.launcher
    return {str(k): launcher[k] for k in launcher}


def test_slurm_launcher_composes_with_a_coordination_sweep_value() -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher")
    launcher = _launcher(
        [
            "hydra/launcher=slurm",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.gpus_per_node=2",
            "coordination=no_guard",
        ]
    )
    assert launcher["_target_"] == (
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    )
    assert launcher["partition"] == "gpu"
    assert launcher["gpus_per_node"] == 2
    assert launcher["timeout_min"] == 240
    assert launcher["max_num_timeout"] == 0


def test_joblib_launcher_composes() -> None:
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="hydra-joblib-launcher")
    launcher = _launcher(["hydra/launcher=local_joblib", "hydra.launcher.n_jobs=3"])
    assert launcher["_target_"] == (
        "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    )
    assert launcher["n_jobs"] == 3
    assert launcher["prefer"] == "processes"


def test_a_typo_in_a_launcher_field_fails_at_compose() -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher")
    with pytest.raises(ConfigCompositionException):
        _launcher(["hydra/launcher=slurm", "hydra.launcher.gpus_per_nodes=2"])
