"""Helpers of the agent tests: describing workloads to, and running, the kernel checker.

Candidates are imported and run by tests/agents/kernel_check.py in a subprocess, because
TRITON_INTERPRET=1 must be set before triton is first imported (and must stay unset for the GPU
tests). (A plain module, not conftest.py: several test dirs have a conftest.)
"""

import json
import os
import shutil
import subprocess
import sys
from math import prod
from pathlib import Path

from kernelarc.agents import AgentContext, TritonTemplateAgent
from kernelarc.problems.builtin_set import builtin_dir
from kernelarc.problems.files import Problem, load_problem
from kernelarc.schema import Proposal, Workload

CHECKER = Path(__file__).with_name("kernel_check.py")
TRITON_PER_PROBLEM = 2
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "problems"
SAMPLE_NAMES = ("add_rmsnorm", "linear_relu_kn", "geglu")
#: The template family expected for each built-in problem and test problem.
FAMILY = {
    "add_layernorm": "add_layernorm",
    "gemm_bias_gelu": "gemm_epilogue",
    "rmsnorm": "rmsnorm",
    "rmsnorm_backward": "rmsnorm_backward",
    "rope": "rope",
    "silu_and_mul": "gated_activation",
    "softmax": "softmax",
    "add_rmsnorm": "rmsnorm",
    "linear_relu_kn": "gemm_epilogue",
    "geglu": "gated_activation",
}


def edited_problem(tmp_path: Path, name: str, edit: dict[str, object]) -> Problem:
    """A copy of a built-in problem with some definition keys replaced."""
    target = tmp_path / name
    shutil.copytree(builtin_dir() / name, target)
    data = json.loads((target / "definition.json").read_text())
    data.update(edit)
    (target / "definition.json").write_text(json.dumps(data))
    return load_problem(target)


def case_for(problem: Problem, workload: Workload) -> dict[str, object]:
    """The checker's description of one workload: concrete shapes, dtypes and tolerance."""
    definition = problem.definition
    axes = definition.resolve_axes(dict(workload.axes))

    def specs(group: dict) -> dict[str, list[object]]:
        return {n: [definition.shape_of(s, axes), s.dtype.value] for n, s in group.items()}

    tol = workload.tolerance
    return {
        "inputs": specs(definition.inputs),
        "outputs": specs(definition.outputs),
        "atol": tol.max_atol,
        "rtol": tol.max_rtol,
        "ratio": tol.required_matched_ratio,
    }


def smallest_workload(problem: Problem) -> Workload:
    """The workload with the fewest input elements."""
    definition = problem.definition

    def size(workload: Workload) -> int:
        axes = definition.resolve_axes(dict(workload.axes))
        shapes = [definition.shape_of(s, axes) or () for s in definition.inputs.values()]
        return sum(prod(s) for s in shapes)

    return min(problem.workloads, key=size)


def check_entry(label: str, problem: Problem, proposal: Proposal, cases: list) -> dict:
    """One item of a checker job."""
    return {
        "label": label,
        "reference": problem.definition.reference,
        "source": proposal.solution.sources[0].content,
        "cases": cases,
    }


def run_checker(
    checks: list[dict], device: str, work_dir: Path, *, interpret: bool, timeout: float = 300
) -> dict[str, dict]:
    """Run the checker in a fresh interpreter; returns label -> {"ok", "detail"}."""
    job = work_dir / "job.json"
    result = work_dir / "result.json"
    job.write_text(json.dumps({"device": device, "seed": 0, "checks": checks}))
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, str(CHECKER), str(job), str(result)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(result.read_text())


def first_proposals(agent: TritonTemplateAgent, ctx: AgentContext, n: int) -> list[Proposal]:
    """The agent's first n proposals for a context (it remembers what it issued)."""
    out = []
    for _ in range(n):
        proposal = agent.propose(ctx)
        assert proposal is not None
        out.append(proposal)
    return out
