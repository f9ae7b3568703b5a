"""Running and importing the scripts under `scripts/` from their tests (not a test module)."""

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_script(
    script: Path,
    args: list[str],
    cwd: Path,
    *,
    timeout_s: float,
    status: int = 0,
    env: dict[str, str] | None = None,
) -> "subprocess.CompletedProcess[str]":
    """`script` as a subprocess with this checkout first on PYTHONPATH (plus `env`); it must
    exit with `status`."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=environment,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == status, done.stderr[-3000:]
    return done


def load_script(path: Path, name: str) -> types.ModuleType:
    """A script (or a helper module beside it) imported under `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
