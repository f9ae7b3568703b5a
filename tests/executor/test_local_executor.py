"""LocalExecutor with real LocalSandbox processes: the correctness screen keeps a failing
candidate out of the timed pool, a passing one is timed with the full protocol, and without a
correctness pool nothing is screened."""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelarc.campaign.device import resolve_device
from kernelarc.config import ExecutorConfig, SandboxConfig
from kernelarc.errors import ConfigError
from kernelarc.executor import NotAdmitted, make_executor
from kernelarc.executor.local_executor import LocalExecutor
from kernelarc.executor.pooled import SCREEN_NOTE, screening_request
from kernelarc.problems.files import load_problem
from kernelarc.schema import EvalRequest, EvalStatus, Solution, TimingConfig

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _request(kernel: str, source: str | None = None) -> EvalRequest:
    problem = load_problem(SAMPLES / "problems" / "vector_add")
    solution = Solution.model_validate(
        {
            "name": kernel,
            "definition": problem.definition.name,
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": f"{kernel}.py::run",
                "destination_passing_style": False,
            },
            "sources": [
                {
                    "path": f"{kernel}.py",
                    "content": source or (SAMPLES / "kernels" / f"{kernel}.py").read_text(),
                }
            ],
        }
    )
    return EvalRequest(
        definition=problem.definition,
        workloads=list(problem.workloads)[:1],
        solution=solution,
        correctness_rounds=2,
        timing=TimingConfig(warmup=1, iterations=2),
        problem_dir=str(problem.path),
    )


def _statuses(traces: list) -> set[EvalStatus]:  # type: ignore[type-arg]
    return {t.evaluation.status for t in traces if t.evaluation is not None}


def test_screen_keeps_a_wrong_kernel_out_of_the_timed_pool() -> None:
    executor = make_executor(ExecutorConfig(), SandboxConfig(), "cpu", None, resolve_device)
    try:
        wrong = executor.evaluate_candidate(_request("add_wrong"), timeout_s=300)
        assert _statuses(wrong.traces) == {EvalStatus.INCORRECT_NUMERICAL}
        assert SCREEN_NOTE in wrong.sandbox_notes
        after_wrong = executor.throughput(wall_s=1.0, candidates=1)
        assert (after_wrong.correctness_evaluations, after_wrong.timed_evaluations) == (1, 0)
        assert after_wrong.screened_out == 1

        # Turned away at its slot (the campaign's time budget says no): nothing runs, nothing is
        # counted, and the slot is free again (one slot per pool: a kept slot would hang below).
        asked: list[str] = []
        with pytest.raises(NotAdmitted):
            executor.evaluate_candidate(
                _request("add_return"), timeout_s=300, admit=lambda: bool(asked.append("x"))
            )
        assert asked == ["x"]
        turned_away = executor.throughput(wall_s=1.0, candidates=1)
        assert (turned_away.correctness_evaluations, turned_away.timed_evaluations) == (1, 0)

        # Admitted at both slots: asked once at the screen's, once at the timed one's.
        right = executor.evaluate_candidate(
            _request("add_return"), timeout_s=300, admit=lambda: not asked.append("y")
        )
        assert asked == ["x", "y", "y"]
        assert _statuses(right.traces) == {EvalStatus.PASSED}
        assert SCREEN_NOTE not in right.sandbox_notes
        # The timed evaluation (not the screen, which skips reference timing) is what comes back.
        perf = right.traces[0].evaluation.performance  # type: ignore[union-attr]
        assert perf is not None and perf.reference_latency_ms > 0
        report = executor.throughput(wall_s=1.0, candidates=2)
        assert (report.correctness_evaluations, report.timed_evaluations) == (2, 1)
        assert (report.timed_slots, report.correctness_slots) == (1, 1)
        assert report.sandbox_s_mean > 0
    finally:
        executor.close()


def test_without_a_pool_nothing_is_screened() -> None:
    cfg = ExecutorConfig(correctness_slots=0)
    executor = make_executor(cfg, SandboxConfig(), "cpu", None, resolve_device)
    try:
        wrong = executor.evaluate_candidate(_request("add_wrong"), timeout_s=300)
        assert _statuses(wrong.traces) == {EvalStatus.INCORRECT_NUMERICAL}
        assert SCREEN_NOTE not in wrong.sandbox_notes
        report = executor.throughput(wall_s=1.0, candidates=1)
        assert (report.correctness_evaluations, report.timed_evaluations) == (0, 1)
    finally:
        executor.close()


SLOW_ADD = "import time\n\ndef run(x, y):\n    time.sleep(0.3)\n    return x + y\n"


def test_the_guard_times_alone_and_a_candidate_beside_a_screen_says_so() -> None:
    """On the CPU the timed slot and the screen share the device: a guard run waits for the
    screen running there; a candidate's timed run does not, and its result notes the screen."""
    executor = make_executor(ExecutorConfig(), SandboxConfig(), "cpu", None, resolve_device)
    assert isinstance(executor, LocalExecutor)
    slow = screening_request(_request("add_slow", SLOW_ADD))
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            screen = pool.submit(
                executor.evaluate, slow, timeout_s=300, kind="correctness", stage="screen"
            )
            _until(lambda: executor.screens_running() == 1 or screen.done())
            assert not screen.done(), "the slow screen ended before the guard asked"
            guard = executor.evaluate(_request("add_return"), timeout_s=300, stage="guard")
            assert screen.done(), "the guard's run ended while the screen still held the device"
            assert _statuses(guard.traces) == {EvalStatus.PASSED}
            assert not any("screen(s)" in note for note in guard.sandbox_notes)

            screen = pool.submit(
                executor.evaluate, slow, timeout_s=300, kind="correctness", stage="screen"
            )
            _until(lambda: executor.screens_running() == 1 or screen.done())
            assert not screen.done(), "the slow screen ended before the candidate asked"
            timed = executor.evaluate(_request("add_return"), timeout_s=300, stage="timing")
            assert _statuses(screen.result().traces) == {EvalStatus.PASSED}
        assert any("1 correctness screen(s)" in note for note in timed.sandbox_notes)
        report = executor.throughput(wall_s=1.0, candidates=2)
        assert report.timed_beside_screens == 1
        assert report.stages["guard_gate_wait"] > 0
    finally:
        executor.close()


def _until(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_cuda_without_a_gpu_is_a_config_error() -> None:
    if resolve_device("auto") == "cuda":
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="device=cuda"):
        make_executor(ExecutorConfig(), SandboxConfig(), "cuda", None, resolve_device)
