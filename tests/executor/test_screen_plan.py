"""The correctness screen's plan with real LocalSandbox runners: the smallest workload runs first
and the screen stops at the first failure (the rest unevaluated), a passing candidate's timed run
compares only the last round again, and what that run no longer compares the screen did."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelarc.campaign.device import resolve_device
from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.executor import Executor, make_executor
from kernelarc.executor.screen_plan import (
    SCREEN_NOTE,
    TIMED_AFTER_SCREEN_NOTE,
    screening_request,
    size_order,
    timed_after_screen,
)
from kernelarc.guard import score_traces
from kernelarc.problems.files import load_problem
from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalRequest, EvalStatus, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PROBLEM = load_problem(SAMPLES / "problems" / "vector_add")  # add-n16, add-n1000


def _request(kernel: str, *, largest_first: bool = True, rounds: int = 2) -> EvalRequest:
    source = (SAMPLES / "kernels" / f"{kernel}.py").read_text()
    solution = Solution.model_validate(
        {
            "name": kernel,
            "definition": PROBLEM.definition.name,
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": f"{kernel}.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": f"{kernel}.py", "content": source}],
        }
    )
    workloads = list(PROBLEM.workloads)
    return EvalRequest(
        definition=PROBLEM.definition,
        workloads=workloads[::-1] if largest_first else workloads,
        solution=solution,
        correctness_rounds=rounds,
        timing=TimingConfig(warmup=0, iterations=2),
        problem_dir=str(PROBLEM.path),
    )


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    made = make_executor(ExecutorConfig(), SandboxConfig(), "cpu", None, resolve_device)
    yield made
    made.close()


def test_smallest_workload_first() -> None:
    request = _request("add_return")  # n1000 first, n16 second
    assert size_order(request.definition, request.workloads) == [1, 0]
    screen = screening_request(request)
    assert screen.workload_order == [1, 0] and screen.stop_at_first_failure
    assert screen.timing.iterations == 1 and not screen.timing.time_reference
    assert screen.workloads == request.workloads  # same workloads, same inputs: only the order


def test_the_screen_stops_at_the_first_failure_on_the_smallest_workload(
    executor: Executor,
) -> None:
    result = executor.evaluate_candidate(_request("add_wrong_small"), timeout_s=300)
    assert SCREEN_NOTE in result.sandbox_notes
    large, small = result.traces  # request order: n1000, n16
    assert small.workload.uuid == "add-n16" and small.evaluation is not None
    assert small.evaluation.status == EvalStatus.INCORRECT_NUMERICAL
    # Evaluated in request order, n1000 would have run first and passed.
    assert large.workload.uuid == "add-n1000" and large.evaluation is None
    assert score_traces(result.traces).status == EvalStatus.INCORRECT_NUMERICAL


def test_a_passing_candidate_is_timed_after_its_screen(executor: Executor) -> None:
    result = executor.evaluate_candidate(_request("add_return"), timeout_s=300)
    assert TIMED_AFTER_SCREEN_NOTE in result.sandbox_notes
    for trace in result.traces:
        assert trace.evaluation is not None and trace.evaluation.status == EvalStatus.PASSED
        assert trace.evaluation.correctness is not None
        assert trace.evaluation.performance is not None
        assert trace.evaluation.performance.reference_latency_ms > 0  # the timed run's traces


def test_what_the_timed_run_no_longer_compares_the_screen_does(executor: Executor) -> None:
    request = _request("add_wrong_after_4_calls", rounds=3)
    # Alone, a timed run that compares only the last round (and the probe) passes it ...
    with LocalSandbox(warm_spare=False) as sandbox:
        alone = sandbox.evaluate(timed_after_screen(request), timeout_s=300)
        full = sandbox.evaluate(request, timeout_s=300)
    assert score_traces(alone.traces).status == EvalStatus.PASSED
    assert score_traces(full.traces).status == EvalStatus.INCORRECT_NUMERICAL
    # ... but a candidate is timed that way only after a screen that compared every round.
    screened = executor.evaluate_candidate(request, timeout_s=300)
    assert SCREEN_NOTE in screened.sandbox_notes
    assert score_traces(screened.traces).status == EvalStatus.INCORRECT_NUMERICAL
