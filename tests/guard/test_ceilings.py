"""Measured roofline ceilings: the cache, the fallbacks, and (on a GPU) a real measurement.

On this CPU host there is no GPU, so the CUDA paths run against a stand-in `nvidia-smi` script
put first on PATH (the only fake here: the real one cannot exist without a GPU); the measuring
child process is the real one, and fails for want of CUDA, which is the fallback under test.
"""

import json
import os
import stat
from pathlib import Path

import pytest

from kernelarc.config import GuardConfig, RooflineConfig
from kernelarc.guard import roofline_for
from kernelarc.guard.ceilings import (
    CACHE_ENV,
    cache_key,
    cache_path,
    gpu_identity,
    load_cache,
    measure_in_subprocess,
    resolve_ceiling,
    store_in_cache,
)
from kernelarc.problems.builtin_set import resolve_problem
from kernelarc.rundir.run_record import (
    CampaignRecord,
    campaign_roofline,
    read_campaign_record,
    write_campaign_record,
)
from kernelarc.schema.ceiling import MeasuredCeiling


def _entry(
    device: str = "NVIDIA H200", driver: str = "580.1", copy: float = 4.1e12
) -> MeasuredCeiling:
    return MeasuredCeiling(
        device=device,
        driver=driver,
        copy_bytes_per_s=copy,
        matmul_flops_per_s=7.7e14,
        measured_at="2026-01-01T00:00:00+00:00",
        method="test entry",
    )


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `nvidia-smi` that names one H200 (stand-in: no GPU on this host)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 580.1'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return smi


def test_cache_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert cache_path() == Path.home() / ".cache" / "kernelarc" / "ceilings.json"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert cache_path() == tmp_path / "env" / "ceilings.json"
    assert cache_path(str(tmp_path / "cfg")) == tmp_path / "cfg" / "ceilings.json"


def test_cache_round_trip_keeps_other_devices_and_survives_garbage(tmp_path: Path) -> None:
    path = tmp_path / "c" / "ceilings.json"
    assert load_cache(path) == {}
    store_in_cache(path, _entry())
    store_in_cache(path, _entry(device="NVIDIA H100", copy=3.0e12))
    store_in_cache(path, _entry(copy=4.2e12))  # replaces the H200 entry
    entries = load_cache(path)
    assert set(entries) == {cache_key("NVIDIA H200", "580.1"), cache_key("NVIDIA H100", "580.1")}
    assert entries[cache_key("NVIDIA H200", "580.1")].copy_bytes_per_s == 4.2e12
    path.write_text("{not json")
    assert load_cache(path) == {}
    store_in_cache(path, _entry())
    assert len(json.loads(path.read_text())) == 1


def test_cpu_and_measure_off_use_the_configured_ceilings(tmp_path: Path) -> None:
    cfg = RooflineConfig(cache_dir=str(tmp_path))
    cpu = resolve_ceiling(cfg, "cpu")
    assert (cpu.key, cpu.source, cpu.copy_bytes_per_s) == ("cpu", "config", 200e9)
    assert cpu.note == ""
    off = resolve_ceiling(RooflineConfig(measure=False, cache_dir=str(tmp_path)), "cuda")
    assert off.source == "config" and off.note == ""
    assert not (tmp_path / "ceilings.json").exists()


def test_a_cached_gpu_is_not_measured_again(fake_smi: Path, tmp_path: Path) -> None:
    assert gpu_identity(0) == ("NVIDIA H200", "580.1")
    store_in_cache(tmp_path / "ceilings.json", _entry(copy=4.05e12))
    resolved = resolve_ceiling(RooflineConfig(cache_dir=str(tmp_path)), "cuda")
    assert resolved.source == "cache"
    assert (resolved.key, resolved.driver) == ("NVIDIA H200", "580.1")
    assert resolved.copy_bytes_per_s == 4.05e12


def test_a_new_driver_is_measured_and_a_failed_measurement_falls_back(
    fake_smi: Path, tmp_path: Path
) -> None:
    store_in_cache(tmp_path / "ceilings.json", _entry(driver="570.0"))
    cfg = RooflineConfig(cache_dir=str(tmp_path))
    resolved = resolve_ceiling(cfg, "cuda")
    # The real child process runs and finds no CUDA device here.
    assert resolved.source == "config"
    assert "measuring the GPU ceilings failed" in resolved.note
    assert resolved.key == "NVIDIA H200"
    assert resolved.copy_bytes_per_s == cfg.cuda_devices["NVIDIA H200"].copy_bytes_per_s
    assert set(load_cache(tmp_path / "ceilings.json")) == {cache_key("NVIDIA H200", "570.0")}


def test_no_nvidia_smi_means_configured_ceilings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    resolved = resolve_ceiling(RooflineConfig(cache_dir=str(tmp_path)), "cuda")
    assert resolved.source == "config" and resolved.key == "cuda_default"
    assert "nvidia-smi" in resolved.note


def test_bounds_use_the_resolved_ceiling() -> None:
    problem = resolve_problem("rmsnorm", "workload_gpu.jsonl")
    workloads = list(problem.workloads)
    measured = resolve_ceiling(RooflineConfig(), "cpu").model_copy(
        update={"key": "NVIDIA H200", "copy_bytes_per_s": 2.0e12, "source": "cache"}
    )
    key, bounds = roofline_for(GuardConfig(), problem.definition, workloads, "cuda", "", measured)
    assert key == "NVIDIA H200"
    _, table = roofline_for(GuardConfig(), problem.definition, workloads, "cuda", "NVIDIA H200")
    for mine, configured in zip(bounds, table, strict=True):
        assert mine.bytes == configured.bytes
        assert mine.bound_ms == pytest.approx(configured.bound_ms * 4.3e12 / 2.0e12)


def test_campaign_record_keeps_the_ceiling_and_t_sol(tmp_path: Path) -> None:
    problem = resolve_problem("gemm_bias_gelu", "workload_gpu.jsonl")
    ceiling = resolve_ceiling(RooflineConfig(), "cpu")
    roofline = campaign_roofline(problem.definition, list(problem.workloads), ceiling)
    assert [b.workload for b in roofline.bounds] == [w.uuid for w in problem.workloads]
    first = roofline.bounds[0]
    axes = problem.workloads[0].axes
    assert first.flops == 2.0 * axes["M"] * axes["N"] * axes["K"]
    assert first.bound_ms == pytest.approx(1e3 * first.flops / ceiling.matmul_flops_per_s)
    record = CampaignRecord(
        name="t",
        problem=problem.name,
        problem_dir="p",
        source_problem_dir="p",
        workloads="workload_gpu.jsonl",
        device="cpu",
        seed=0,
        started_at="now",
        roofline=roofline,
    )
    write_campaign_record(tmp_path, record)
    assert read_campaign_record(tmp_path).roofline == roofline


@pytest.mark.gpu
def test_measuring_a_real_gpu_gives_sane_ceilings_and_caches_them(tmp_path: Path) -> None:
    identity = gpu_identity(0)
    assert identity is not None
    measured = measure_in_subprocess(0, identity[1])
    assert 1e11 < measured.copy_bytes_per_s < 2e13
    assert 1e13 < measured.matmul_flops_per_s < 5e15
    cfg = RooflineConfig(cache_dir=str(tmp_path))
    first = resolve_ceiling(cfg, "cuda")
    second = resolve_ceiling(cfg, "cuda")
    assert (first.source, second.source) == ("measured", "cache")
    assert second.copy_bytes_per_s == first.copy_bytes_per_s
