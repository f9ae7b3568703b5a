"""Parent-run params, tags and names of a campaign (no MLflow involved)."""

from pathlib import Path

import pytest

from kernelarc.tracking import keys
from kernelarc.tracking.run_metadata import (
    IMAGE_ID_ENV,
    campaign_tags,
    git_sha,
    run_name,
)

CONFIG = {
    "name": "abl",
    "problem": "rmsnorm",
    "seed": 2,
    "device": "auto",
    "sandbox": {"kind": "docker", "docker": {"image": "kernelarc-sandbox:latest"}},
    "coordination": {"memory": False, "guard": True, "plateau_patience": 4},
    "budget": {"candidates": 8},
}


def test_tags_name_the_arm_the_provenance_and_the_run_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(IMAGE_ID_ENV, "sha256:abc")
    tags = campaign_tags(
        CONFIG,
        tmp_path,
        device="cpu",
        choices={"coordination": "no_memory", "guard": "default", "hydra/launcher": "joblib"},
        overrides=["coordination=no_memory", "seed=2"],
    )
    assert tags[keys.PROBLEM] == "rmsnorm"
    assert tags[keys.SEED] == "2"
    assert tags[keys.DEVICE] == "cpu"
    assert tags[keys.RUN_DIR] == str(tmp_path.resolve())
    assert tags[keys.SANDBOX] == "docker"
    assert tags[keys.SANDBOX_IMAGE] == "kernelarc-sandbox:latest"
    assert tags[f"{keys.COORDINATION_PREFIX}memory"] == "false"
    assert tags[f"{keys.COORDINATION_PREFIX}guard"] == "true"
    assert f"{keys.COORDINATION_PREFIX}plateau_patience" not in tags
    assert tags[f"{keys.CHOICE_PREFIX}coordination"] == "no_memory"
    assert not any(k.startswith(f"{keys.CHOICE_PREFIX}hydra") for k in tags)
    assert tags[keys.OVERRIDES] == "coordination=no_memory seed=2"
    assert tags[keys.IMAGE_ID] == "sha256:abc"
    # This test runs from a git checkout.
    assert tags[keys.GIT_SHA] == git_sha()
    assert len(tags[keys.GIT_SHA].removesuffix("-dirty")) == 40


def test_the_problem_tag_is_the_definition_name_and_cpu_numbers_are_labelled(
    tmp_path: Path,
) -> None:
    config = {**CONFIG, "problem": "path/to/my_rmsnorm_dir"}
    source = str(tmp_path / "my_rmsnorm_dir")
    tags = campaign_tags(
        config, tmp_path, device="cpu", problem_name="rmsnorm_h4096", problem_source=source
    )
    assert tags[keys.PROBLEM] == "rmsnorm_h4096", "campaigns of one definition group together"
    assert tags[keys.PROBLEM_SOURCE] == source
    assert tags[keys.TIMING] == "cpu: pipeline check, not performance"
    assert "not kernel performance" in tags[keys.MLFLOW_NOTE]
    cuda = campaign_tags(config, tmp_path, device="cuda", problem_name="rmsnorm_h4096")
    assert keys.TIMING not in cuda and keys.MLFLOW_NOTE not in cuda
    assert cuda[keys.PROBLEM_SOURCE] == "path/to/my_rmsnorm_dir"


def test_tags_of_an_earlier_campaign_carry_no_provenance_of_today(tmp_path: Path) -> None:
    tags = campaign_tags(CONFIG, tmp_path, provenance=False)
    assert keys.GIT_SHA not in tags and keys.VERSION not in tags
    assert tags[keys.DEVICE] == "auto"


def test_git_sha_outside_a_checkout_is_none(tmp_path: Path) -> None:
    assert git_sha(tmp_path) is None


def test_run_name_shows_the_top_level_overrides() -> None:
    overrides = ["name=abl", "guard=off", "seed=1", "budget.candidates=4", "device=cpu"]
    assert run_name("abl", overrides) == "abl guard=off seed=1"
    assert run_name("abl", []) == "abl"
