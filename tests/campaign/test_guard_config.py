"""The guard config group composes from the real conf/ (default, off) and resolves per device."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kernelarc.config import CampaignConfig, register_configs
from kernelarc.errors import ConfigError
from kernelarc.guard import guard_settings

CONF = Path(__file__).resolve().parents[2] / "conf"


def _compose(overrides: list[str]) -> CampaignConfig:
    register_configs()  # the schema conf/campaign.yaml is typed by
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_object(compose("campaign", overrides=overrides))
    assert isinstance(cfg, CampaignConfig)
    return cfg


def test_default_is_on_and_resolves_per_device() -> None:
    cfg = _compose([])
    assert cfg.guard.enabled and cfg.guard.confirm and cfg.guard.roofline.enabled
    cpu, cuda = guard_settings(cfg.guard, "cpu"), guard_settings(cfg.guard, "cuda")
    assert (cpu.min_repeats, cpu.max_repeats) == (3, 6)
    assert (cuda.min_repeats, cuda.max_repeats) == (3, 8)
    assert cpu.roofline_slack == cfg.guard.roofline.slack
    key, ceiling = cfg.guard.roofline.ceiling_for("cuda", "NVIDIA H200")
    assert key == "NVIDIA H200" and ceiling.copy_bytes_per_s == 4.3e12
    assert cfg.guard.roofline.ceiling_for("cuda", "NVIDIA B200")[0] == "cuda_default"


def test_off_is_naive_but_keeps_static_rules() -> None:
    settings = guard_settings(_compose(["guard=off"]).guard, "cpu")
    assert not settings.enabled and not settings.confirm
    assert settings.roofline_slack is None
    assert settings.block_static


def test_overrides() -> None:
    cfg = _compose(["guard.max_repeats=5", "guard.min_gain=0.03", "guard.confirm=false"])
    settings = guard_settings(cfg.guard, "cuda")
    assert (settings.max_repeats, settings.min_gain, settings.confirm) == (5, 0.03, False)


@pytest.mark.parametrize(
    "override", ["guard.min_gain=1.5", "guard.max_repeats=0", "guard.min_repeats=1"]
)
def test_bad_values_fail_at_compose(override: str) -> None:
    with pytest.raises(ConfigError):
        _compose([override])
