"""The run dir's config files read back: config.yaml flattened, `.hydra/` overrides and choices."""

from pathlib import Path

from kernelarc.rundir.run_config import flatten_config, read_choices, read_config, read_overrides


def test_flatten_gives_dotted_keys_and_string_values() -> None:
    flat = flatten_config(
        {
            "budget": {"candidates": 8},
            "coordination": {"memory": False},
            "sandbox": {"docker": {"image": "kernelarc-sandbox:latest"}},
        }
    )
    assert flat == {
        "budget.candidates": "8",
        "coordination.memory": "False",
        "sandbox.docker.image": "kernelarc-sandbox:latest",
    }


def test_missing_files_read_as_empty(tmp_path: Path) -> None:
    assert read_config(tmp_path) == {}
    assert read_overrides(tmp_path) == []
    assert read_choices(tmp_path) == {}


def test_hydra_overrides_and_choices_are_read_without_hydras_own_groups(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("name: abl\nseed: 2\n", encoding="utf-8")
    hydra = tmp_path / ".hydra"
    hydra.mkdir()
    (hydra / "overrides.yaml").write_text("- guard=off\n- seed=2\n", encoding="utf-8")
    (hydra / "hydra.yaml").write_text(
        'hydra:\n  runtime:\n    choices:\n      guard: "off"\n      hydra/launcher: basic\n',
        encoding="utf-8",
    )
    assert read_config(tmp_path) == {"name": "abl", "seed": 2}
    assert read_overrides(tmp_path) == ["guard=off", "seed=2"]
    assert read_choices(tmp_path) == {"guard": "off"}
