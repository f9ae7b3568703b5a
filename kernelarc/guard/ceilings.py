"""Measured speed-of-light ceilings of a GPU: copy bandwidth and dense 16-bit matmul rate.

Place in the flow: at campaign start on CUDA (`guard.roofline.measure`, on by default),
`resolve_ceiling` reads the GPU's name and driver with `nvidia-smi` (no torch on the host), looks
them up in a JSON cache (`<cache dir>/ceilings.json`, default `~/.cache/kernelarc`, or
`guard.roofline.cache_dir`, or `$KERNELARC_CACHE_DIR`) and, on a miss, measures them in a child
process (`python -m kernelarc.runner.ceiling_probe`, the torch side) before any candidate
touches the GPU. The roofline
(`roofline.py`) then divides by these numbers; campaign.json records them with their source. On
CPU, with `measure: false`, or when measuring fails, the configured ceilings are used (and the
reason is recorded).

What is measured: see `kernelarc/runner/ceiling_probe.py`.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kernelarc.config import RooflineConfig
from kernelarc.schema.base import RecordModel
from kernelarc.schema.ceiling import MeasuredCeiling

CACHE_FILE = "ceilings.json"
CACHE_ENV = "KERNELARC_CACHE_DIR"


class ResolvedCeiling(RecordModel):
    """The ceiling a campaign used for its roofline bounds, and where it came from."""

    key: str
    """Device name (or `cpu`, or `cuda_default`)."""
    copy_bytes_per_s: float = Field(gt=0)
    """Copy bandwidth the bounds divide bytes by."""
    matmul_flops_per_s: float = Field(gt=0)
    """Matmul rate the bounds divide FLOPs by."""
    source: Literal["measured", "cache", "config"]
    """measured now, read from the cache, or the configured numbers."""
    driver: str = ""
    """Driver version of a measured GPU."""
    measured_at: str = ""
    """When it was measured (measured / cache)."""
    note: str = ""
    """Why the configured numbers were used, when measuring was wanted."""


def cache_path(cache_dir: str | None = None) -> Path:
    """The cache file: `cache_dir`, else $KERNELARC_CACHE_DIR, else ~/.cache/kernelarc."""
    root = cache_dir or os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "kernelarc")
    return Path(root).expanduser() / CACHE_FILE


def cache_key(device: str, driver: str) -> str:
    """The cache entry of a GPU model under a driver."""
    return f"{device}|{driver}"


def gpu_identity(gpu: int, timeout_s: float = 20.0) -> tuple[str, str] | None:
    """(name, driver version) of GPU `gpu` from nvidia-smi, or None when it cannot tell."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", str(gpu)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    name, _, driver = line.partition(",")
    if out.returncode != 0 or not name.strip() or not driver.strip():
        return None
    return name.strip(), driver.strip()


def load_cache(path: Path) -> dict[str, MeasuredCeiling]:
    """Cached ceilings by `cache_key`; an unreadable file counts as empty (it is rewritten)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {k: MeasuredCeiling.model_validate(v) for k, v in raw.items()}
    except (OSError, ValueError, ValidationError, AttributeError):
        return {}


def store_in_cache(path: Path, ceiling: MeasuredCeiling) -> None:
    """Add or replace one GPU's entry, atomically (concurrent campaigns may share the file)."""
    entries = load_cache(path)
    entries[cache_key(ceiling.device, ceiling.driver)] = ceiling
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    data = {k: v.model_dump(mode="json") for k, v in sorted(entries.items())}
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def measure_in_subprocess(gpu: int, driver: str, timeout_s: float = 300.0) -> MeasuredCeiling:
    """Measure GPU `gpu` in a child process (this process never imports torch).

    Raises:
        RuntimeError: the child failed, timed out, or printed no valid measurement.
    """
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
    cmd = [sys.executable, "-m", "kernelarc.runner.ceiling_probe", "--json", "--driver", driver]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"measuring the GPU ceilings took over {timeout_s:g} s"
        raise RuntimeError(msg) from exc
    if out.returncode != 0:
        msg = f"measuring the GPU ceilings failed (exit {out.returncode}): {out.stderr[-800:]}"
        raise RuntimeError(msg)
    try:
        return MeasuredCeiling.model_validate_json(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValidationError) as exc:
        msg = f"the ceilings child printed no measurement: {out.stdout[-400:]!r}"
        raise RuntimeError(msg) from exc


def resolve_ceiling(cfg: RooflineConfig, device: str, gpu: int = 0) -> ResolvedCeiling:
    """The ceiling for a campaign on `device` (`cpu`/`cuda`) and GPU index `gpu`.

    Never raises: any failure falls back to the configured ceiling, with the reason in `note`.
    """
    identity = gpu_identity(gpu) if device == "cuda" else None
    key, configured = cfg.ceiling_for(device, identity[0] if identity else "")

    def fallback(note: str) -> ResolvedCeiling:
        return ResolvedCeiling(
            key=key,
            copy_bytes_per_s=configured.copy_bytes_per_s,
            matmul_flops_per_s=configured.matmul_flops_per_s,
            source="config",
            note=note,
        )

    if device != "cuda" or not cfg.measure:
        return fallback("")
    if identity is None:
        return fallback("nvidia-smi could not name the GPU; configured ceilings used")
    name, driver = identity
    path = cache_path(cfg.cache_dir)
    cached = load_cache(path).get(cache_key(name, driver))
    source: Literal["measured", "cache"] = "cache"
    if cached is None:
        try:
            measured = measure_in_subprocess(gpu, driver)
        except RuntimeError as exc:
            return fallback(f"{exc}; configured ceilings used")
        # Keyed by nvidia-smi's name, which is what the next lookup asks for.
        cached = measured.model_copy(update={"device": name, "driver": driver})
        source = "measured"
        # An unwritable cache costs a re-measurement next time, nothing else.
        with contextlib.suppress(OSError):
            store_in_cache(path, cached)
    return ResolvedCeiling(
        key=cached.device,
        copy_bytes_per_s=cached.copy_bytes_per_s,
        matmul_flops_per_s=cached.matmul_flops_per_s,
        source=source,
        driver=cached.driver,
        measured_at=cached.measured_at,
    )
