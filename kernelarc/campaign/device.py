"""Choose the evaluation device without importing torch on the host."""

import shutil
import subprocess

from kernelarc.errors import ConfigError


def detect_cuda() -> bool:
    """True when `nvidia-smi -L` lists at least one GPU."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def resolve_device(requested: str) -> str:
    """Map `auto` to cuda or cpu; refuse `cuda` on a machine without a GPU."""
    if requested == "auto":
        return "cuda" if detect_cuda() else "cpu"
    if requested == "cuda" and not detect_cuda():
        msg = "device=cuda but no NVIDIA GPU is visible (nvidia-smi -L); use device=cpu or auto"
        raise ConfigError(msg)
    return requested
