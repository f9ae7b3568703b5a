"""One real `kernelarc problems import kernelbench` of the KernelBench-style samples, shared by
the tests of this folder (the samples are KernelArc's own files, tests/samples/kernelbench/)."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "kernelbench"


@dataclass(frozen=True)
class Imported:
    proc: subprocess.CompletedProcess[str]
    out: Path
    report: dict[str, Any]


def run_kernelarc(
    args: list[str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    return subprocess.run(
        [sys.executable, "-m", "kernelarc.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Imported:
    work = tmp_path_factory.mktemp("kb_import")
    out = work / "problems"
    proc = run_kernelarc(
        ["problems", "import", "kernelbench", str(SAMPLES), "--out", str(out), "--jobs", "2"], work
    )
    report = json.loads((out / "import_report.json").read_text()) if out.is_dir() else {}
    return Imported(proc=proc, out=out, report=report)
