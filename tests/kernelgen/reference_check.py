"""The generator tests' check of generated sources against their problem's reference.

test_generate.py, test_column_reductions.py, test_split_reductions.py and test_welford.py each
hand a set of generated sources to the `run_checks` fixture (conftest.py: gen_check.py in one
subprocess, under Triton's interpreter on the CPU) and read its results the same way; this keeps
that reading, and so what "matches the reference" means, in one place. (A plain module imported
as `reference_check`, like gen_problems.py, not conftest.py: the fixtures live there.)
"""

from collections.abc import Callable, Mapping
from typing import Any

from gen_problems import Traced

RunChecks = Callable[[list[dict[str, Any]], str], dict[str, Any]]


def assert_match_reference(
    traced: Traced,
    run_checks: RunChecks,
    device: str,
    sources: Mapping[tuple[str, str], str],
    *,
    every_workload_planned: bool = True,
) -> None:
    """Run every source on every workload of its problem and fail naming each `problem/variant`
    whose outputs differ from the reference (with gen_check.py's detail).

    Args:
        traced: the `gen_problems` fixture (problem name to problem and traces).
        run_checks: the `run_checks` fixture.
        device: `cpu` (Triton's interpreter) or `cuda`.
        sources: generated source by (problem name, variant label).
        every_workload_planned: also require that a generated plan, not the reference fallback,
            served every workload, so a match is not the reference checked against itself.
    """
    checks = [
        {"label": f"{name}/{variant}", "problem": str(traced[name][0].path), "source": source}
        for (name, variant), source in sources.items()
    ]
    results = run_checks(checks, device)
    failed = {label: r["detail"] for label, r in results.items() if not r["ok"]}
    assert not failed, failed
    if not every_workload_planned:
        return
    for label, result in results.items():
        problem, _ = traced[label.split("/")[0]]
        assert result["planned"] == len(problem.workloads), label
