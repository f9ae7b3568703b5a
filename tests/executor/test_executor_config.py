"""The executor config group composes from the real conf/ (local is the default, ray extends
it) and bad values fail at compose time."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kernelarc.config import CampaignConfig, register_configs
from kernelarc.errors import ConfigError

CONF = Path(__file__).resolve().parents[2] / "conf"


def _compose(overrides: list[str]) -> CampaignConfig:
    register_configs()  # the schema conf/campaign.yaml is typed by
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_object(compose("campaign", overrides=overrides))
    assert isinstance(cfg, CampaignConfig)
    return cfg


def test_local_is_the_default_with_a_screening_pool() -> None:
    cfg = _compose([])
    assert cfg.executor.kind == "local"
    assert cfg.executor.correctness_slots == 1 and cfg.executor.screen
    assert cfg.budget.max_parallel is None


def test_ray_extends_local() -> None:
    cfg = _compose(["executor=ray", "executor.ray.address=auto", "executor.ray.max_retries=4"])
    assert cfg.executor.kind == "ray"
    assert cfg.executor.ray.address == "auto" and cfg.executor.ray.max_retries == 4
    assert cfg.executor.correctness_slots == 1  # inherited from local.yaml


@pytest.mark.parametrize(
    "override",
    ["executor.correctness_slots=-1", "executor.ray.max_retries=-1", "executor.kind=dask"],
)
def test_bad_values_fail_at_compose(override: str) -> None:
    with pytest.raises(ConfigError):
        _compose([override])
