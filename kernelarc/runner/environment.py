"""Hardware and library facts recorded in every trace's `evaluation.environment`."""

import importlib.metadata
from pathlib import Path

import torch

from kernelarc.schema import Environment


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown CPU"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return "unknown CPU"


def _version(dist: str) -> str | None:
    # importlib.metadata instead of `import triton`: importing triton here would fix its
    # interpreter mode before the runner has decided on TRITON_INTERPRET.
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe_environment(device: str) -> Environment:
    """GPU name (or CPU model) and torch/triton/cuda versions."""
    if device == "cuda" and torch.cuda.is_available():
        hardware = torch.cuda.get_device_name(torch.cuda.current_device())
    else:
        hardware = _cpu_model()
    libs: dict[str, str] = {"torch": str(torch.__version__)}
    triton_version = _version("triton")
    if triton_version is not None:
        libs["triton"] = triton_version
    if torch.version.cuda is not None:
        libs["cuda"] = str(torch.version.cuda)
    return Environment(hardware=hardware, libs=libs)
