"""Hostile candidates against the judge/worker split: real sandboxes, one per sample.

Each sample is a folder under tests/samples/hostile/ whose files all become the solution's
sources (entry `kernel.py::run`, return style, vector add). The table pins the status of each
workload and a phrase of its log; together they cover the three holes of the official
evaluator (problem files in the sources, evaluator shadowing, forged results) and the runtime
reward-hack checks.
"""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelarc.execution import LocalSandbox
from kernelarc.problems.files import load_problem
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
HOSTILE = SAMPLES / "hostile"
TIMEOUT_S = 180.0
WORKLOAD_TIMEOUT_S = 6.0

P = EvalStatus.PASSED
NUM = EvalStatus.INCORRECT_NUMERICAL
RTE = EvalStatus.RUNTIME_ERROR
HACK = EvalStatus.REWARD_HACK


@dataclass(frozen=True)
class Case:
    """Expected statuses of workloads add-n16 and add-n1000, and a phrase of the first log."""

    statuses: tuple[EvalStatus, EvalStatus]
    phrase: str


CASES: dict[str, Case] = {
    # Hole 3: forged results, early exits, fake output streams.
    "forge_result_at_import": Case((RTE, RTE), "exited with code 0 during start (import)"),
    "forge_stdout": Case((NUM, NUM), "within atol"),
    "sys_exit_in_run": Case((RTE, RTE), "SystemExit"),
    # Hole 1: problem files among the sources change nothing.
    "fake_problem_files": Case((NUM, NUM), "within atol"),
    # Hole 2: shadow packages only fool the worker; the judge compares.
    "shadow_evaluator": Case((NUM, NUM), "within atol"),
    "patch_allclose": Case((NUM, NUM), "within atol"),
    # Runtime reward-hack checks.
    "patch_perf_counter": Case((HACK, HACK), "monkey-patched at import: time.perf_counter"),
    "thread_per_call": Case((HACK, HACK), "thread injection"),
    "pickling_subclass": Case((HACK, HACK), "_Evil, not a plain torch.Tensor"),
    "load_inline": Case((RTE, RTE), "disabled for Python-language solutions"),
    "skip_work_when_timed": Case((HACK, HACK), "timing forged"),
    "blind_guards_forge_timer": Case((HACK, HACK), "timing forged"),
    "slow_honest": Case((P, P), ""),
    # Outputs that are inputs, stale or computed in an input.
    "return_input": Case((NUM, NUM), "round 0"),
    "cached_output": Case((NUM, NUM), "round 1"),
    "mutate_input": Case((NUM, NUM), "modified input(s) ['x']"),
    # A worker that dies or hangs fails its workload only; the next one gets a fresh worker.
    "hang_first_workload": Case((EvalStatus.TIMEOUT, P), "overran workload_timeout_s"),
    "segfault_first_workload": Case((RTE, P), "killed by SIGSEGV during round 0"),
}


def hostile_request(name: str) -> EvalRequest:
    folder = HOSTILE / name
    sources = [
        {"path": path.relative_to(folder).as_posix(), "content": path.read_text()}
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]
    solution = Solution.model_validate(
        {
            "name": name,
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": sources,
        }
    )
    prob = load_problem(SAMPLES / "problems" / "vector_add")
    return EvalRequest(
        definition=prob.definition,
        workloads=list(prob.workloads),
        solution=solution,
        correctness_rounds=2,
        timing=TimingConfig(warmup=1, iterations=3),
        workload_timeout_s=WORKLOAD_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def results() -> dict[str, EvalResult]:
    sandbox = LocalSandbox()
    # 4 at a time: several samples mostly wait (a hang, a workload timeout).
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(sandbox.evaluate, hostile_request(name), timeout_s=TIMEOUT_S)
            for name in CASES
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_sample_gets_its_status(results: dict[str, EvalResult], name: str) -> None:
    result, case = results[name], CASES[name]
    evaluations = [t.evaluation for t in result.traces]
    assert all(e is not None for e in evaluations)
    logs = [e.log for e in evaluations if e is not None]
    assert tuple(e.status for e in evaluations if e is not None) == case.statuses, logs
    assert case.phrase in logs[0], logs[0]


def test_no_forged_trace_survives(results: dict[str, EvalResult]) -> None:
    forged = results["forge_result_at_import"]
    for trace in forged.traces:
        assert trace.evaluation is not None
        assert trace.evaluation.log != "forged"
        assert trace.evaluation.environment.hardware != "NVIDIA B200"


def test_judge_never_unpickles_candidate_objects(results: dict[str, EvalResult]) -> None:
    assert "unpickled-by-the-judge" not in results["pickling_subclass"].stderr_tail


def test_honest_slow_kernel_reports_its_real_latency(results: dict[str, EvalResult]) -> None:
    for trace in results["slow_honest"].traces:
        assert trace.evaluation is not None and trace.evaluation.performance is not None
        assert trace.evaluation.performance.latency_ms >= 50.0
