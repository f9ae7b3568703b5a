"""Fixtures of the agent tests: the built-in problems and one checker run for all CPU candidates.

One session-scoped checker subprocess checks every CPU candidate at once, to pay torch's import
(and Triton's interpreter start-up) once.
"""

import pytest
from agent_checks import (
    TRITON_PER_PROBLEM,
    case_for,
    check_entry,
    first_proposals,
    run_checker,
    smallest_workload,
)

from kernelarc.agents import AgentContext, CompilerAgent, TritonTemplateAgent
from kernelarc.problems.builtin_set import builtin_names, resolve_problem
from kernelarc.problems.files import Problem


@pytest.fixture(scope="session")
def builtin_problems() -> dict[str, Problem]:
    return {name: resolve_problem(name) for name in builtin_names()}


@pytest.fixture(scope="session")
def cpu_results(
    builtin_problems: dict[str, Problem], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict]:
    """Checker results on CPU (Triton interpreter), smallest workload of every built-in problem:
    the triton agent's first proposals (labels `<problem>/triton/<i>`) and the compiler agent's
    eager reference (`<problem>/eager`)."""
    checks = []
    for name, problem in builtin_problems.items():
        cases = [case_for(problem, smallest_workload(problem))]
        ctx = AgentContext(problem=problem, device="cpu")
        triton = first_proposals(TritonTemplateAgent(seed=0), ctx, TRITON_PER_PROBLEM)
        for i, proposal in enumerate(triton):
            checks.append(check_entry(f"{name}/triton/{i}", problem, proposal, cases))
        eager = CompilerAgent().propose(ctx)
        assert eager is not None
        checks.append(check_entry(f"{name}/eager", problem, eager, cases))
    # A deliberately wrong candidate, to show the checker can fail.
    softmax = builtin_problems["softmax"]
    wrong = CompilerAgent().propose(AgentContext(problem=softmax))
    assert wrong is not None
    entry = check_entry("softmax/wrong", softmax, wrong, [case_for(softmax, softmax.workloads[0])])
    entry["source"] = "def run(x):\n    return x.softmax(dim=0)\n"
    checks.append(entry)
    return run_checker(checks, "cpu", tmp_path_factory.mktemp("cpu_check"), interpret=True)
