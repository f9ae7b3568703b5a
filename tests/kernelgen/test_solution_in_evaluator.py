"""A generated solution as a campaign meets it: proposed by the fusion agent (the product's own
trace subprocess and cache), written as `solution.json`, and judged by `kernelarc eval` in the
local sandbox (staging, static rules, the thread checks, Triton's interpreter on the CPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gen_problems import write_problem

from kernelarc.agents import AgentContext
from kernelarc.agents.strategy.kinds import FusionAgent
from kernelarc.kernelgen.traces import CACHE_ENV
from kernelarc.problems.files import load_problem

pytestmark = pytest.mark.slow


def test_a_generated_solution_passes_kernelarc_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    problem_dir = write_problem(tmp_path, "bias_gelu_scale")
    problem = load_problem(problem_dir)
    proposal = FusionAgent(seed=0).propose(AgentContext(problem=problem, device="cpu"))
    assert proposal is not None
    assert proposal.knobs["space"] == "triton/gen"
    assert list((tmp_path / "cache" / "traces").iterdir()), "the trace was not cached"
    solution = tmp_path / "solution.json"
    solution.write_text(proposal.solution.model_dump_json())
    command = [sys.executable, "-m", "kernelarc.cli", "eval", str(problem_dir)]
    proc = subprocess.run(
        [*command, "--solution", str(solution), "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true"),
    )
    traces = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    statuses = [t["evaluation"]["status"] for t in traces]
    assert proc.returncode == 0, (statuses, proc.stderr[-3000:])
    assert statuses == ["PASSED"] * len(problem.workloads)
