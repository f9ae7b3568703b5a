"""What quickstart.sh, install.sh and test.sh install and print.

Installing torch and friends in a test is out of reach here, so the scripts run in a copy of
the checkout whose `.venv/bin/python` and `.venv/bin/kernelarc` are stand-ins that log their
arguments (and say torch is already there); the scripts themselves are the real ones.
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$LOG"
exit 0
"""
_KERNELARC = """#!/usr/bin/env bash
echo "kernelarc $*" >> "$LOG"
if [ "$1" = campaign ]; then echo "Next steps:"; fi
exit 0
"""


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("install.sh", "quickstart.sh", "test.sh"):
        shutil.copy2(ROOT / "scripts" / name, root / "scripts" / name)
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    for name, text in (("python", _PYTHON), ("kernelarc", _KERNELARC)):
        (venv / name).write_text(text)
        (venv / name).chmod((venv / name).stat().st_mode | stat.S_IEXEC)
    return root


def _run(root: Path, script: str, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    log = root / "calls.log"
    env = {**os.environ, "LOG": str(log)}
    proc = subprocess.run(
        ["bash", str(root / "scripts" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc, log.read_text() if log.is_file() else ""


def test_the_quickstart_installs_the_runtime_only_and_prints_one_next_steps_block(
    tmp_path: Path,
) -> None:
    root = _checkout(tmp_path)
    proc, calls = _run(root, "quickstart.sh")
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in calls.splitlines() if " pip install " in line]
    assert installs == ["python -m pip install -q -e ."], "no dev tools, Ray or launchers"
    assert "kernelarc campaign name=quickstart problem=rmsnorm" in calls
    assert "kernelarc export" not in calls, "the campaign's next steps say how to export"
    assert proc.stdout.count("Next steps:") == 1
    assert "MLflow UI" not in proc.stdout, "no second block of its own"


def test_install_dev_brings_the_tools_ray_and_the_launchers(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    proc, calls = _run(root, "install.sh", "--dev")
    assert proc.returncode == 0, proc.stderr
    assert "python -m pip install -q -e .[dev,ray,launchers]" in calls.splitlines()
    proc, _ = _run(root, "install.sh", "--bogus")
    assert proc.returncode == 2 and "usage" in proc.stderr
