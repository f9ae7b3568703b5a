"""Arms are what the sweep varied, minus the seed and the problem."""

from kernelarc.report.arms import ALL_RUNS, arm_keys, arm_label
from kernelarc.rundir.reader import CampaignSource, parse_overrides


def _campaign(
    overrides: list[str],
    config: dict[str, str] | None = None,
    choices: dict[str, str] | None = None,
) -> CampaignSource:
    return CampaignSource(
        label="x",
        problem_name="p",
        seed="0",
        overrides=parse_overrides(overrides),
        choices=choices or {},
        config=config or {"budget.candidates": "8"},
        attempts=(),
    )


def test_swept_overrides_minus_seed_problem_and_tracking() -> None:
    runs = [
        _campaign([f"coordination={c}", f"seed={s}", f"problem={p}", "budget.candidates=8"])
        for c in ("full", "none")
        for s in (0, 1)
        for p in ("rmsnorm", "softmax")
    ]
    # Launched separately, with the budget and the coordination preset left at their defaults.
    runs.append(_campaign(["seed=2", "tracking.uri=http://x"], choices={"coordination": "full"}))
    assert arm_keys(runs) == ["coordination"]
    assert arm_label(runs[0], ["coordination"]) == "coordination=full"
    assert arm_label(runs[-1], ["coordination"]) == "coordination=full"


def test_config_keys_when_there_are_no_overrides_and_explicit_keys_win() -> None:
    a = _campaign([], {"guard.enabled": "True", "seed": "0", "name": "a"})
    b = _campaign([], {"guard.enabled": "False", "seed": "1", "name": "b"})
    assert arm_keys([a, b]) == ["guard.enabled"]
    assert arm_keys([a, b], ["name"]) == ["name"]
    assert arm_label(b, ["name", "missing"]) == "name=b, missing=-"


def test_nothing_differs_is_one_arm() -> None:
    runs = [_campaign(["seed=0"]), _campaign(["seed=1"])]
    assert arm_keys(runs) == []
    assert arm_label(runs[0], []) == ALL_RUNS


def test_parse_overrides_handles_hydra_prefixes() -> None:
    assert parse_overrides(["+extra=1", "++forced=2", "~gone", "a.b=c=d", "noeq"]) == {
        "extra": "1",
        "forced": "2",
        "a.b": "c=d",
    }
