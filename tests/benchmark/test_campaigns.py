"""The campaign benchmark's setup: composed configs, trimmed problems and problem dirs, the
campaign time budget, the baselines it still needs and how often. (The runs themselves need
minutes; see docs/benchmarks.md and tests/benchmark/test_suite.py.)"""

import shutil
from pathlib import Path

import pytest

from kernelarc.benchmark.baselines import baseline_plan, measure_baselines, wanted_baselines
from kernelarc.benchmark.campaigns import campaign_overrides, compose_config
from kernelarc.benchmark.report import BaselineRun
from kernelarc.benchmark.settings import BenchSettings, default_problems, problem_label
from kernelarc.config import OFFLINE_STRATEGIES
from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import builtin_dir, builtin_names, resolve_problem
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


def _run(variant: str, status: str = "PASSED", ms: float = 1.0, rounds: int = 0) -> BaselineRun:
    latencies = {"w0": ms} if status == "PASSED" else {}
    extra = [{"w0": ms}] * rounds if status == "PASSED" else []
    return BaselineRun(variant, status, latencies, {}, "campaign attempt 0", rounds_ms=extra)


def test_baseline_plan_repeats_each_wanted_variant_and_never_retries_a_failed_one() -> None:
    wanted = ("compile-default", "compile-max-autotune")
    assert baseline_plan([], wanted, rounds=2) == ["compile-default"]
    runs = [_run("compile-default", ms=2.0)]
    assert baseline_plan(runs, wanted, rounds=2) == ["compile-default"]
    runs.append(_run("compile-default", ms=2.1))
    assert baseline_plan(runs, wanted, rounds=2) == ["compile-max-autotune"]
    # A failed max-autotune stays failed: not evaluated again, no other variant in its place.
    runs.append(_run("compile-max-autotune", status="RUNTIME_ERROR"))
    assert baseline_plan(runs, wanted, rounds=2) == []


def test_baseline_plan_repeats_the_fastest_compile_variant_for_its_interval() -> None:
    """The campaign's compile-static-fullgraph attempt (one timing, the fastest) gets a second
    round; guard re-timing rounds of it count."""
    wanted = ("compile-default",)
    runs = [_run("compile-default", ms=2.0, rounds=1), _run("compile-static-fullgraph", ms=1.0)]
    assert baseline_plan(runs, wanted, rounds=2) == ["compile-static-fullgraph"]
    retimed = [runs[0], _run("compile-static-fullgraph", ms=1.0, rounds=1)]
    assert baseline_plan(retimed, wanted, rounds=2) == []


def test_unknown_baseline_variant_is_a_config_error(tmp_path: Path) -> None:
    problem = resolve_problem("rmsnorm")
    cfg = compose_config(campaign_overrides("rmsnorm", _settings(tmp_path, device="cpu")))
    with pytest.raises(ConfigError, match="unknown baseline variants \\['compile-fast'\\]"):
        measure_baselines(cfg, problem, "cpu", [], print, wanted=["compile-fast"])


def test_a_problem_dir_is_run_from_its_path(tmp_path: Path) -> None:
    source = tmp_path / "src" / "my_norm"
    shutil.copytree(builtin_dir() / "rmsnorm", source)
    (source / "notes.txt").write_text("kept\n")
    settings = _settings(tmp_path / "out", problems=[str(source)])
    assert problem_label(str(source)) == "my_norm"
    cfg = compose_config(campaign_overrides(str(source), settings))
    assert (cfg.problem, cfg.name) == (str(source.resolve()), "bench-my_norm")
    trimmed = _settings(tmp_path / "out", problems=[str(source)], max_workloads=1)
    copy = Path(compose_config(campaign_overrides(str(source), trimmed)).problem)
    assert copy == tmp_path / "out" / "problems" / "my_norm"
    assert (copy / "notes.txt").read_text() == "kept\n"
    lines = (copy / "workload_gpu.jsonl").read_text().splitlines()
    assert len(lines) == 1
