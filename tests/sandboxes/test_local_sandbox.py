"""LocalSandbox end to end: real runner subprocesses on tiny problems, device cpu (and cuda)."""

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelarc.errors import ConfigError, SandboxError
from kernelarc.problems.files import Problem, load_problem
from kernelarc.runner.cupti_timing import cupti_available
from kernelarc.sandboxes import LocalSandbox, make_sandbox
from kernelarc.sandboxes.result_file import LOG_CAP_BYTES
from kernelarc.schema import (
    Definition,
    EvalRequest,
    EvalResult,
    EvalStatus,
    Solution,
    TimingConfig,
)

#: Real runner evaluations throughout (the kernel table alone is 13).
pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
KERNELS = SAMPLES / "kernels"
TIMEOUT_S = 180.0

# kernel file -> (destination passing style, expected status of every workload)
HOSTILE: dict[str, tuple[bool, EvalStatus]] = {
    "add_wrong": (False, EvalStatus.INCORRECT_NUMERICAL),
    "add_wrong_shape": (False, EvalStatus.INCORRECT_SHAPE),
    "add_wrong_dtype": (False, EvalStatus.INCORRECT_DTYPE),
    "add_raises": (False, EvalStatus.RUNTIME_ERROR),
    "add_exit": (False, EvalStatus.RUNTIME_ERROR),
    "add_zeros": (False, EvalStatus.INCORRECT_NUMERICAL),
    "add_subclass": (False, EvalStatus.REWARD_HACK),
    "add_corrupt_result": (False, EvalStatus.RUNTIME_ERROR),
    "add_spam": (False, EvalStatus.PASSED),
    "add_env_probe": (False, EvalStatus.PASSED),
    "add_dps": (True, EvalStatus.PASSED),
    "add_return": (False, EvalStatus.PASSED),
    "add_triton": (True, EvalStatus.PASSED),
}


def problem(name: str) -> Problem:
    return load_problem(SAMPLES / "problems" / name)


def solution(kernel: str, definition: str, *, dps: bool) -> Solution:
    source = (KERNELS / f"{kernel}.py").read_text()
    language = "triton" if "triton" in kernel else "pytorch"
    return Solution.model_validate(
        {
            "name": kernel,
            "definition": definition,
            "author": "tests",
            "spec": {
                "languages": [language],
                "target_hardware": ["LOCAL"],
                "entry_point": f"{kernel}.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": f"{kernel}.py", "content": source}],
        }
    )


def request(
    prob: Problem,
    kernel: str,
    *,
    dps: bool,
    device: str = "cpu",
    definition: Definition | None = None,
) -> EvalRequest:
    definition = definition or prob.definition
    return EvalRequest(
        definition=definition,
        workloads=list(prob.workloads),
        solution=solution(kernel, definition.name, dps=dps),
        device=device,  # type: ignore[arg-type]
        correctness_rounds=2,
        timing=TimingConfig(warmup=1, iterations=3),
        problem_dir=str(prob.path),
    )


def statuses(result: EvalResult) -> set[EvalStatus]:
    return {t.evaluation.status for t in result.traces if t.evaluation is not None}


@pytest.fixture(scope="module")
def hostile_results() -> dict[str, EvalResult]:
    """Every table case evaluated once, several sandboxes at a time (as a campaign would)."""
    prob = problem("vector_add")
    sandbox = LocalSandbox(extra_env={"KERNELARC_PROBE": "visible", "PROBE_API_KEY": "leak"})
    os.environ["KERNELARC_TEST_SECRET_TOKEN"] = "must-not-leak"
    try:
        with sandbox, ThreadPoolExecutor(max_workers=3) as pool:
            futures = {
                name: pool.submit(
                    sandbox.evaluate, request(prob, name, dps=dps), timeout_s=TIMEOUT_S
                )
                for name, (dps, _) in HOSTILE.items()
            }
            return {name: future.result() for name, future in futures.items()}
    finally:
        del os.environ["KERNELARC_TEST_SECRET_TOKEN"]


@pytest.mark.parametrize("kernel", sorted(HOSTILE))
def test_kernel_table_gives_expected_status(
    hostile_results: dict[str, EvalResult], kernel: str
) -> None:
    result = hostile_results[kernel]
    expected = HOSTILE[kernel][1]
    logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
    assert statuses(result) == {expected}, logs
    assert [t.workload.uuid for t in result.traces] == ["add-n16", "add-n1000"]
    assert all(t.solution == kernel and t.definition == "vector_add_f32" for t in result.traces)
    assert result.sandbox == "local"
    assert result.wall_s > 0


def test_passed_traces_carry_cpu_timing(hostile_results: dict[str, EvalResult]) -> None:
    for kernel in ("add_dps", "add_return", "add_triton"):
        for trace in hostile_results[kernel].traces:
            assert trace.evaluation is not None
            perf = trace.evaluation.performance
            assert perf is not None
            assert perf.timing_method == "cpu_monotonic"
            assert perf.latency_ms > 0
            assert perf.reference_latency_ms > 0
            assert trace.evaluation.environment.hardware != "unknown"
            assert "torch" in trace.evaluation.environment.libs


def test_failure_logs_explain_the_failure(hostile_results: dict[str, EvalResult]) -> None:
    def first_log(kernel: str) -> str:
        evaluation = hostile_results[kernel].traces[0].evaluation
        assert evaluation is not None
        return evaluation.log

    assert "kernel exploded on purpose" in first_log("add_raises")
    assert "code 3" in first_log("add_exit")
    assert "shape" in first_log("add_wrong_shape")
    assert "all zeros" in first_log("add_zeros")
    # The judge writes its own signed result after the worker died: the garbage is overwritten.
    assert "exited with code 0" in first_log("add_corrupt_result")
    numerical = hostile_results["add_wrong"].traces[0].evaluation
    assert numerical is not None and numerical.correctness is not None
    assert numerical.correctness.max_absolute_error == pytest.approx(0.5, rel=1e-3)


def test_stdout_spam_is_capped(hostile_results: dict[str, EvalResult]) -> None:
    result = hostile_results["add_spam"]
    assert len(result.stderr_tail.encode()) <= LOG_CAP_BYTES + 1024
    assert "spam" in result.stderr_tail


def test_broken_reference_is_invalid_reference() -> None:
    prob = problem("vector_add")
    data = prob.definition.model_dump()
    data["reference"] = "def run(x, y):\n    raise ValueError('reference is broken')\n"
    broken = Definition.model_validate(data)
    result = LocalSandbox(warm_spare=False).evaluate(  # one evaluation: no spare for a next
        request(prob, "add_return", dps=False, definition=broken), timeout_s=TIMEOUT_S
    )
    assert statuses(result) == {EvalStatus.INVALID_REFERENCE}
    assert result.traces[0].evaluation is not None
    assert "reference is broken" in result.traces[0].evaluation.log


@pytest.mark.parametrize(("kernel", "dps"), [("axpby_return", False), ("axpby_dps", True)])
def test_dict_reference_scalar_input_and_expr_axis_pass(kernel: str, dps: bool) -> None:
    result = LocalSandbox(warm_spare=False).evaluate(  # one evaluation: no spare for a next
        request(problem("axpby_pair"), kernel, dps=dps), timeout_s=TIMEOUT_S
    )
    logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
    assert statuses(result) == {EvalStatus.PASSED}, logs


def _marked_pids(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            pids.append(int(entry.name))
    return pids


def test_endless_loop_times_out_and_leaves_no_process() -> None:
    marker = f"KERNELARC_TEST_MARK=endless-{os.getpid()}-{time.monotonic_ns()}"
    name, value = marker.split("=")
    sandbox = LocalSandbox(extra_env={name: value})
    req = request(problem("vector_add"), "add_endless", dps=False)
    seen: dict[int, int] = {}  # pid -> pgid, of the runner and its background child
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in _marked_pids(marker):
                with contextlib.suppress(ProcessLookupError):
                    seen.setdefault(pid, os.getpgid(pid))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = sandbox.evaluate(req, timeout_s=12.0)
    finally:
        done.set()
        watcher.join()
        # The spare started for the next evaluation carries the marker too: end it first.
        sandbox.close()
    assert statuses(result) == {EvalStatus.TIMEOUT}
    evaluation = result.traces[0].evaluation
    # The judge ends the workload before the sandbox's own timeout would (issue 17).
    assert evaluation is not None and "overran its deadline" in evaluation.log
    assert "the end of the overall timeout of 12 s" in evaluation.log
    assert len(seen) >= 2, "the runner and its child should have been observed"
    assert _marked_pids(marker) == []
    for pgid in set(seen.values()):
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def test_missing_python_raises_sandbox_error() -> None:
    sandbox = LocalSandbox(python="/nonexistent/python3")
    with pytest.raises(SandboxError, match="does not exist"):
        sandbox.evaluate(request(problem("vector_add"), "add_return", dps=False), timeout_s=5)


def test_make_sandbox_builds_local_and_rejects_unknown_kinds() -> None:
    assert isinstance(make_sandbox("local", gpu=0, memory_limit_gb=8.0), LocalSandbox)
    with pytest.raises(ConfigError, match="valid kinds: local, docker"):
        make_sandbox("podman")
    with pytest.raises(ConfigError, match="bad options"):
        make_sandbox("local", no_such_option=1)


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "dps"), [("add_return", False), ("add_triton", True)])
def test_gpu_solutions_pass_timed_as_the_host_can(kernel: str, dps: bool) -> None:
    """CUPTI spans when cupti-python imports on this host (the jail must not hide it), else
    CUDA events."""
    req = request(problem("vector_add"), kernel, dps=dps, device="cuda")
    result = LocalSandbox().evaluate(req, timeout_s=TIMEOUT_S)
    logs = [t.evaluation.log for t in result.traces if t.evaluation is not None]
    assert statuses(result) == {EvalStatus.PASSED}, logs
    expected = "cupti" if cupti_available() else "cuda_events"
    for trace in result.traces:
        assert trace.evaluation is not None and trace.evaluation.performance is not None
        assert trace.evaluation.performance.timing_method == expected, trace.evaluation.log
        assert "cuda" in trace.evaluation.environment.libs


def test_a_hung_candidate_costs_one_deadline_and_later_workloads_do_not_run() -> None:
    """Issue 17: a kernel that sleeps forever held `kernelarc eval` for its whole timeout on a
    two-workload problem. The judge now ends the first workload at a deadline derived from the
    reference's time and reports every later one TIMEOUT without starting the candidate."""
    from vector_add_request import vector_add_request

    from kernelarc.schema import HangPolicy

    sleeper = "import time\n\n\ndef run(x, y):\n    time.sleep(3600)\n    return x + y\n"
    req = vector_add_request(sleeper, first_workload_only=False).model_copy(
        update={"hang": HangPolicy(reference_factor=10.0, allowance_s=2.0)}
    )
    assert len(req.workloads) == 2
    with LocalSandbox(warm_spare=False) as sandbox:
        result = sandbox.evaluate(req, timeout_s=90.0)
    assert [t.evaluation.status for t in result.traces if t.evaluation] == [EvalStatus.TIMEOUT] * 2
    first, second = (t.evaluation for t in result.traces)
    assert first is not None and second is not None
    # The judge wrote both traces itself (the sandbox did not have to kill the runner).
    assert "overran its deadline on this workload during round 0" in first.log
    assert "2 s allowance" in first.log and "10 x the reference's" in first.log
    assert second.log.startswith("not run: the candidate overran its deadline on workload")
    assert result.stderr_tail.count("starting a solution worker") == 1


def _big_vector_add(n: int) -> EvalRequest:
    """vector_add on `n` fp32 elements: inputs 8n bytes, output 4n bytes."""
    from vector_add_request import vector_add_request

    base = vector_add_request("def run(x, y):\n    return x + y\n")
    workload = base.workloads[0].model_copy(update={"uuid": f"add-n{n}", "axes": {"N": n}})
    return base.model_copy(update={"workloads": [workload]})


def test_the_memory_limit_follows_the_problem_size() -> None:
    """Issue 17: a fixed address-space limit killed a large problem that the official evaluator
    judged. 256 MiB of inputs and a 128 MiB output need more than the 1.5 GiB configured per
    runner process once the protocol's copies are counted; the limit grows with them."""
    req = _big_vector_add(32 * 1024**2)
    with LocalSandbox(memory_limit_gb=1.5, warm_spare=False) as sandbox:
        result = sandbox.evaluate(req, timeout_s=TIMEOUT_S)
    assert statuses(result) == {EvalStatus.PASSED}, result.traces[0].evaluation


def test_a_problem_whose_reference_alone_does_not_fit_is_an_infrastructure_error() -> None:
    req = _big_vector_add(32 * 1024**2)  # the reference alone holds 640 MiB
    with (
        LocalSandbox(memory_limit_gb=0.25, max_memory_gb=0.5, warm_spare=False) as sandbox,
        pytest.raises(SandboxError, match="infrastructure limit") as caught,
    ):
        sandbox.evaluate(req, timeout_s=TIMEOUT_S)
    message = str(caught.value)
    assert "max_memory_gb (0.5 GiB)" in message and "no candidate was run" in message


def test_inputs_the_judge_cannot_hold_are_named_as_the_limit_not_the_candidate() -> None:
    # No sandbox-sized limit (memory_limit_gb None): the request's own limit stands, far too
    # small for 512 MiB of inputs, so the judge's own allocation fails.
    req = _big_vector_add(64 * 1024**2).model_copy(
        update={"address_space_bytes": int(1.3 * 1024**3)}
    )
    with LocalSandbox(memory_limit_gb=None, warm_spare=False) as sandbox:
        result = sandbox.evaluate(req, timeout_s=TIMEOUT_S)
    evaluation = result.traces[0].evaluation
    assert evaluation is not None
    assert evaluation.status == EvalStatus.INVALID_REFERENCE, evaluation.log
    assert evaluation.log.startswith("infrastructure limit: "), evaluation.log
    assert "did not fit in the sandbox's address-space limit of 1.3 GiB" in evaluation.log
    assert "not the candidate" in evaluation.log
