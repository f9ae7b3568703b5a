"""The campaign benchmark's setup: composed configs, trimmed problems, the campaign time budget,
the baselines it still needs. (The runs themselves need minutes; see docs/benchmarks.md.)"""

from pathlib import Path

import pytest

from kernelarc.benchmark.campaigns import (
    BenchSettings,
    campaign_overrides,
    compose_config,
    default_problems,
    wanted_baselines,
)
from kernelarc.config import OFFLINE_STRATEGIES
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.problems.files import load_problem


def _settings(tmp_path: Path, **kw: object) -> BenchSettings:
    base: dict[str, object] = {
        "device": "cuda",
        "problems": ["rmsnorm"],
        "workloads": "workload_gpu.jsonl",
        "out": tmp_path,
    }
    return BenchSettings(**(base | kw))  # type: ignore[arg-type]


def test_every_builtin_problem_has_gpu_workloads() -> None:
    assert default_problems("workload_gpu.jsonl") == builtin_names()


def test_overrides_compose_into_the_offline_campaign(tmp_path: Path) -> None:
    settings = _settings(tmp_path, budget=64, seed=3, overrides=["guard.max_repeats=5"])
    cfg = compose_config(campaign_overrides("softmax", settings))
    assert (cfg.problem, cfg.workloads, cfg.device) == ("softmax", "workload_gpu.jsonl", "cuda")
    assert (cfg.budget.candidates, cfg.seed, cfg.eval.correctness_rounds) == (64, 3, 3)
    assert cfg.tracking.kind == "none"
    assert [spec.kind for spec in cfg.agents.team] == list(OFFLINE_STRATEGIES)
    assert cfg.guard.min_repeats == 2
    assert cfg.guard.max_repeats == 5  # the user's --set comes last
    assert cfg.guard.roofline.measure is True


def test_a_bad_override_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="do not compose"):
        compose_config(campaign_overrides("rmsnorm", _settings(tmp_path, overrides=["nope=1"])))


def test_max_workloads_keeps_the_largest(tmp_path: Path) -> None:
    settings = _settings(tmp_path, max_workloads=1)
    cfg = compose_config(campaign_overrides("rope", settings))
    trimmed = load_problem(Path(cfg.problem), "workload_gpu.jsonl")
    full = resolve_problem("rope", "workload_gpu.jsonl")
    assert [w.uuid for w in trimmed.workloads] == [full.workloads[-1].uuid]
    assert trimmed.definition == full.definition


def test_the_deadline_is_the_campaign_time_budget(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert compose_config(campaign_overrides("rmsnorm", settings, 42.0)).budget.time_s == 42.0
    assert compose_config(campaign_overrides("rmsnorm", settings)).budget.time_s is None
    # The user's overrides come last and win.
    mine = _settings(tmp_path, overrides=["budget.time_s=7"])
    assert compose_config(campaign_overrides("rmsnorm", mine, 42.0)).budget.time_s == 7.0


def test_baselines_per_device() -> None:
    assert wanted_baselines("cuda") == (
        "compile-default",
        "compile-max-autotune-no-cudagraphs",
        "compile-max-autotune",
    )
    assert wanted_baselines("cpu") == ("compile-default", "compile-max-autotune-no-cudagraphs")
