"""Problem dirs written by tests: a SOL-ExecBench definition (a dict) and its workloads put in
a directory, and many such dirs traced in one subprocess (torch imports once).

The product's own path (one tracer subprocess per problem, with a cache) is tested in
tests/kernelgen/test_traces.py; this is the tests' shortcut to the same graphs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: A definition (as a dict) and its workloads.
Problem = tuple[dict[str, Any], list[dict[str, Any]]]


def write_problem_dir(root: Path, name: str, problem: Problem) -> Path:
    """`problem` written under `root/name` (definition.json, workload.jsonl)."""
    definition, workloads = problem
    target = root / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "definition.json").write_text(json.dumps(definition, indent=1))
    (target / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return target


_TRACE_ALL = """
import sys
from pathlib import Path
from kernelarc.problems.files import load_definition, load_workloads
from kernelarc.tracing.fx_trace import trace_problem
for directory in sys.argv[1:]:
    d = Path(directory)
    definition = load_definition(d / "definition.json")
    traced = trace_problem(definition, load_workloads(d / "workload.jsonl", definition))
    (d / "traces.json").write_text(traced.model_dump_json())
"""


def trace_dirs(dirs: list[Path]) -> None:
    """Trace every problem dir (its traces.json beside it) in one subprocess, on the CPU."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run(
        [sys.executable, "-c", _TRACE_ALL, *map(str, dirs)], check=True, env=env, timeout=900
    )


def traced_problems(root: Path, problems: dict[str, Problem]) -> dict[str, tuple[Any, Any]]:
    """Each problem written under `root`, traced (one subprocess for all) and loaded: name ->
    (kernelarc Problem, TraceSet)."""
    from kernelarc.problems.files import load_problem
    from kernelarc.schema.op_graph import TraceSet

    dirs = [write_problem_dir(root, name, problem) for name, problem in problems.items()]
    trace_dirs(dirs)
    return {
        d.name: (load_problem(d), TraceSet.model_validate_json((d / "traces.json").read_text()))
        for d in dirs
    }
