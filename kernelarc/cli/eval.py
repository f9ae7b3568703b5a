"""`kernelarc eval`: evaluate one solution (or a problem's own reference) on one problem,
exactly as a campaign does, and print one SOL-ExecBench Trace per workload.

Place in the flow: `kernelarc.cli` registers `add_parser` and calls `run`; the evaluation is the
library's (`execution.make_sandbox`), imported when the command runs so `--help` stays light.
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from kernelarc.cli.console import make_console, print_table
from kernelarc.errors import ConfigError
from kernelarc.timing_labels import CPU_TIMING_NOTE, cpu_timed_traces, speedup_text

_EPILOG = """\
Evaluates SOLUTION on every workload of PROBLEM exactly as a campaign does (sandboxed process,
10 correctness rounds with seed 200, median timing) and prints one SOL-ExecBench Trace per
workload. --reference evaluates the definition's reference itself: a check of a new problem
dir in seconds. Exit status 0 iff every workload PASSED, 1 otherwise, 2 for bad input (a
problem or solution that does not load, a solution for another definition).

examples:
  kernelarc eval ./my_problem --reference --device cpu      # does a new problem dir work?
  kernelarc eval kernelarc/problems/builtin/rmsnorm --solution exports/rmsnorm/solution.json
  kernelarc eval ./my_problem --solution sol.json --device cuda --json -o traces.jsonl
  kernelarc eval rmsnorm --solution sol.json --workloads workload_gpu.jsonl
"""


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `kernelarc eval` under the main parser's subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    ev = sub.add_parser(
        "eval",
        help="evaluate one solution on one problem",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    ev.add_argument(
        "problem",
        help="problem dir (definition.json + workload.jsonl), its definition.json, or a "
        "built-in name",
    )
    what = ev.add_mutually_exclusive_group(required=True)
    what.add_argument("--solution", type=Path, help="solution.json to evaluate")
    what.add_argument(
        "--reference",
        action="store_true",
        help="evaluate the definition's own reference as the solution (checks a new problem)",
    )
    ev.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where to run: cuda (timed like the official evaluator), cpu (correctness and a "
        "pipeline check, not performance), auto: cuda when a GPU is visible (default)",
    )
    ev.add_argument(
        "--workloads", default="workload.jsonl", help="workload file in the problem dir"
    )
    ev.add_argument(
        "--json", action="store_true", help="print one Trace JSON per line, nothing else"
    )
    ev.add_argument("-o", "--output", type=Path, help="also write the traces to this JSONL file")
    ev.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole evaluation")
    ev.add_argument("--seed", type=int, default=200, help="input seed (official: 200)")
    ev.add_argument("--rounds", type=int, default=10, help="correctness rounds per workload")
    ev.add_argument("--warmup", type=int, help="untimed iterations (default 10 CUDA, 1 CPU)")
    ev.add_argument("--iterations", type=int, help="timed iterations (default 50 CUDA, 5 CPU)")
    ev.add_argument(
        "--sandbox", choices=["local", "docker"], default="local", help="where the runner runs"
    )
    ev.add_argument(
        "--image", help="--sandbox docker: the image (default kernelarc-sandbox:latest)"
    )


def run(ns: argparse.Namespace) -> int:
    """Evaluate and print; 0 iff every workload PASSED, else 1."""
    from kernelarc.campaign.device import resolve_device
    from kernelarc.config import EvalConfig, SandboxConfig
    from kernelarc.problems.builtin_set import resolve_problem
    from kernelarc.problems.files import load_solution
    from kernelarc.problems.reference import reference_solution
    from kernelarc.sandboxes import make_sandbox
    from kernelarc.schema import EvalRequest, EvalStatus, HangPolicy, TimingConfig

    problem = resolve_problem(ns.problem, ns.workloads)
    err = make_console(stderr=True)
    for warning in problem.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False)
    if ns.reference:
        solution = reference_solution(problem.definition)
    else:
        solution = load_solution(ns.solution)
        if solution.definition != problem.name:
            msg = (
                f"{ns.solution}: the solution is for definition {solution.definition!r} but the "
                f"problem is {problem.name!r}; give a solution of {problem.name!r} (its "
                "`definition` field names the problem it solves)"
            )
            raise ConfigError(msg)
    device = resolve_device(ns.device)
    warmup, iterations = EvalConfig(warmup=ns.warmup, iterations=ns.iterations).timing_for(device)
    request = EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads),
        solution=solution,
        device="cuda" if device == "cuda" else "cpu",
        seed=ns.seed,
        correctness_rounds=ns.rounds,
        timing=TimingConfig(
            warmup=warmup, iterations=iterations, budget_s=EvalConfig().budget_for(device)
        ),
        problem_dir=str(problem.path.resolve()),
        hang=HangPolicy.for_device(device),
    )
    # One evaluation: no spare runner to keep warm for a next one.
    sandbox_cfg = SandboxConfig(kind=ns.sandbox, gpu=0, warm_spare=False)
    if ns.image:
        sandbox_cfg.docker.image = ns.image
    sandbox = make_sandbox(sandbox_cfg.kind, **sandbox_cfg.options())
    # Docker: the container starts on its own thread (evaluate waits for it); locally nothing,
    # as nothing runs before this evaluation that a spare's import could overlap.
    sandbox.prepare(request.device, ns.timeout, request.problem_dir)
    try:
        result = sandbox.evaluate(request, timeout_s=ns.timeout)
    finally:
        sandbox.close()  # docker: removes its pool container
    lines = [t.model_dump_json() for t in result.traces]
    if ns.output is not None:
        ns.output.parent.mkdir(parents=True, exist_ok=True)
        ns.output.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if ns.json:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    else:
        _print_traces(result.traces)
    passed = all(t.evaluation and t.evaluation.status == EvalStatus.PASSED for t in result.traces)
    return 0 if passed and result.traces else 1


def _print_traces(traces: list[Any]) -> None:
    columns = ("workload", "status", "latency ms", "reference ms", "speedup [CI]", "max abs err")
    rows = []
    for trace in traces:
        ev = trace.evaluation
        perf, corr = (ev.performance, ev.correctness) if ev else (None, None)
        rows.append(
            (
                trace.workload.uuid,
                str(ev.status) if ev else "-",
                f"{perf.latency_ms:.4f}" if perf else "-",
                f"{perf.reference_latency_ms:.4f}" if perf else "-",
                (
                    speedup_text(
                        perf.speedup_factor,
                        perf.speedup_ci_low,
                        perf.speedup_ci_high,
                        perf.interleaved_speedup,
                    )
                    if perf
                    else "-"
                ),
                f"{corr.max_absolute_error:.3g}" if corr else "-",
            )
        )
    console = make_console()
    notes = [CPU_TIMING_NOTE] if cpu_timed_traces(traces) else []
    methods = _interval_methods(traces)
    if methods:
        notes.append(
            "speedup: the official protocol's; [CI]: "
            + "; ".join(methods)
            + " (a workload without one: interleaving off or it failed, see its log)"
        )
    print_table(console, "kernelarc eval", columns, rows, "\n".join(notes))
    # A failure that is the same on every workload (a solution that does not compile) is
    # printed once, with the workloads it applies to.
    logs: dict[str, list[str]] = {}
    for trace in traces:
        ev = trace.evaluation
        if ev and ev.status != "PASSED" and ev.log:
            logs.setdefault(ev.log[-2000:], []).append(trace.workload.uuid)
    for log, uuids in logs.items():
        where = uuids[0] if len(uuids) == 1 else f"{len(uuids)} workloads ({', '.join(uuids)})"
        console.print(f"{where}: {log}", markup=False, highlight=False)


def _interval_methods(traces: list[Any]) -> list[str]:
    """The distinct ways the traces' speedup intervals were made (less their pair counts)."""
    methods = set()
    for trace in traces:
        perf = trace.evaluation.performance if trace.evaluation else None
        if perf is not None and perf.speedup_ci_method:
            methods.add(perf.speedup_ci_method.rsplit(", ", 1)[0])
    return sorted(methods)
