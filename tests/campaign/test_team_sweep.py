"""`kernelarc campaign -m 'agents.team=[compiler],[tiling,compiler]'`: a sweep over teams written
in the short form runs one campaign per team, each with the members it names."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

VECTOR_ADD = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"


def test_sweep_over_short_form_teams(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    args = [
        "campaign",
        "-m",
        "name=teams",
        "agents.team=[compiler],[tiling,compiler]",
        f"problem={VECTOR_ADD}",
        "budget.candidates=1",
        "eval.correctness_rounds=1",
        "eval.warmup=0",
        "eval.iterations=2",
        "tracking=none",
        "device=cpu",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "kernelarc.cli", *args],
        cwd=tmp_path,
        env=dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    teams = [json.loads((sweep / job / "campaign.json").read_text())["team"] for job in "01"]
    assert [[(m["name"], m["kind"]) for m in team] for team in teams] == [
        [("compiler", "compiler")],
        [("tiling", "tiling"), ("compiler", "compiler")],
    ]
