"""`python -m kernelarc.tracing PROBLEM_DIR OUT.json [WORKLOAD_FILE ...]`.

Traces the reference of PROBLEM_DIR/definition.json at every workload of the given workload
files (default: every `workload*.jsonl` in the dir) and writes a `TraceSet` to OUT.json. Exit 0
when the file was written (per-workload failures are inside it), 2 for bad arguments or a
problem that does not load.
"""

import sys
from pathlib import Path

from kernelarc.errors import ProblemFormatError
from kernelarc.problems.files import load_definition, load_workloads
from kernelarc.tracing.fx_trace import trace_problem


def main(argv: list[str]) -> int:
    """Entry point; returns the exit code."""
    if len(argv) < 2:
        sys.stderr.write(__doc__ or "")
        return 2
    problem, out = Path(argv[0]), Path(argv[1])
    names = argv[2:] or sorted(p.name for p in problem.glob("workload*.jsonl"))
    try:
        definition = load_definition(problem / "definition.json")
        workloads = [w for name in names for w in load_workloads(problem / name, definition)]
    except ProblemFormatError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    traced = trace_problem(definition, workloads)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(traced.model_dump_json(), encoding="utf-8")
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
