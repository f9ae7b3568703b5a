"""`kernelarc campaign -m coordination=full,none` runs one campaign per ablation arm, with the
same budget, and each run records the switches it ran with; `-m 'agents.team=[compiler],[tiling,
compiler]'` (teams in the short form) runs one campaign per team, each with the members it names."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelarc.schema import Attempt

pytestmark = pytest.mark.slow

VECTOR_ADD = Path(__file__).resolve().parents[1] / "samples" / "problems" / "vector_add"


def _multirun(tmp_path: Path, *overrides: str) -> Path:
    """`kernelarc campaign -m` over `overrides` on vector_add, one tiny CPU campaign per job;
    the sweep dir (jobs 0, 1, ...)."""
    sweep = tmp_path / "sweep"
    args = ["campaign", "-m", *overrides, f"problem={VECTOR_ADD}", "budget.candidates=1"]
    args += ["eval.correctness_rounds=1", "eval.warmup=0", "eval.iterations=2"]
    args += ["tracking=none", "device=cpu", f"hydra.sweep.dir={sweep}"]
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
    return sweep


def test_sweep_over_short_form_teams(tmp_path: Path) -> None:
    # guard=off: about the recorded teams, so no confirmation run per job.
    sweep = _multirun(
        tmp_path, "name=teams", "guard=off", "agents.team=[compiler],[tiling,compiler]"
    )
    teams = [json.loads((sweep / job / "campaign.json").read_text())["team"] for job in "01"]
    assert [[(m["name"], m["kind"]) for m in team] for team in teams] == [
        [("compiler", "compiler")],
        [("tiling", "tiling"), ("compiler", "compiler")],
    ]


def test_sweep_over_coordination_presets(tmp_path: Path) -> None:
    sweep = _multirun(
        tmp_path, "name=ablation", "coordination=full,none", "agents.team=[{kind: compiler}]"
    )
    arms = {}
    for job in ("0", "1"):
        record = json.loads((sweep / job / "campaign.json").read_text())
        lines = (sweep / job / "attempts.jsonl").read_text().splitlines()
        arms[job] = (record, [Attempt.model_validate_json(line) for line in lines])
    (full, full_attempts), (none, none_attempts) = arms["0"], arms["1"]
    assert full["coordination"]["memory"] and full["coordination"]["guard"]
    assert not any(none["coordination"][k] for k in ("memory", "guard", "peer_state", "drafting"))
    assert len(full_attempts) == len(none_attempts) == 1, "the budget is the same in every arm"
    assert full_attempts[0].confirmed, "guard on: the best is confirmed on fresh inputs"
    assert not none_attempts[0].confirmed and none_attempts[0].guard is not None
    assert not none_attempts[0].guard.settings.enabled
    assert [m["name"] for m in full["team"]] == ["compiler"]
