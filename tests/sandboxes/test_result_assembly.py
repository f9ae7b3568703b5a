"""Host-side trace assembly and the scrubbed environment, in process (no subprocess)."""

import os
from pathlib import Path

import pytest

from kernelarc.problems.files import load_problem
from kernelarc.runner.result_key import signed_result
from kernelarc.sandboxes.local.process_limits import ResourceLimits, scrubbed_env
from kernelarc.sandboxes.result_file import (
    assemble_traces,
    new_result_key,
    read_raw_traces,
    read_signed_result,
    setup_failure,
)
from kernelarc.schema import EvalRequest, EvalStatus, Solution

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def make_request() -> EvalRequest:
    prob = load_problem(SAMPLES / "problems" / "vector_add")
    sol = Solution.model_validate(
        {
            "name": "s",
            "definition": prob.name,
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "k.py::run",
            },
            "sources": [{"path": "k.py", "content": "def run(x, y, out):\n    pass\n"}],
        }
    )
    return EvalRequest(definition=prob.definition, workloads=list(prob.workloads), solution=sol)


def runner_trace(request: EvalRequest, index: int, **workload_changes: object) -> dict[str, object]:
    workload = request.workloads[index].model_dump(mode="json") | workload_changes
    return {
        "definition": "forged-name",
        "workload": workload,
        "solution": "forged",
        "evaluation": {
            "status": "RUNTIME_ERROR",
            "environment": {"hardware": "Test CPU", "libs": {}},
            "timestamp": "2026-01-01T00:00:00+00:00",
            "log": "from runner",
        },
    }


def test_partial_results_are_completed_and_identity_comes_from_the_request() -> None:
    request = make_request()
    loose = runner_trace(request, 0, tolerance={"max_atol": 100.0})
    traces = assemble_traces(
        request,
        [loose],
        missing_status=EvalStatus.TIMEOUT,
        missing_log="timed out",
        notes=["no network isolation"],
    )
    assert [t.workload.uuid for t in traces] == ["add-n16", "add-n1000"]
    first, second = (t.evaluation for t in traces)
    assert first is not None and second is not None
    assert traces[0].workload.tolerance.max_atol == 0.01  # the request's, not the runner's
    assert traces[0].definition == "vector_add_f32" and traces[0].solution == "s"
    assert first.log.startswith("from runner") and "no network isolation" in first.log
    assert second.status == EvalStatus.TIMEOUT
    assert second.environment.hardware == "Test CPU"
    assert "timed out" in second.log and "no network isolation" in second.log


def test_out_of_order_or_invalid_traces_are_replaced() -> None:
    request = make_request()
    swapped = [runner_trace(request, 1), {"not": "a trace"}]
    traces = assemble_traces(
        request, swapped, missing_status=EvalStatus.RUNTIME_ERROR, missing_log="gone", notes=[]
    )
    assert [t.evaluation.log for t in traces if t.evaluation] == ["gone", "gone"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no result file"),
        ("{", "unreadable"),
        ('{"traces": []}', "not a signed result"),
        ('{"payload": "{}", "hmac": "00"}', "does not verify"),
    ],
)
def test_bad_result_files_give_a_reason(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "result.json"
    if content is not None:
        path.write_text(content)
    raw, why = read_raw_traces(path, new_result_key())
    assert raw == [] and why is not None and problem in why


def test_only_a_result_signed_with_the_evaluation_key_is_read(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    key = new_result_key()
    path.write_text(signed_result({"traces": [1]}, key))
    assert read_raw_traces(path, key) == ([1], None)
    raw, why = read_raw_traces(path, new_result_key())
    assert raw == [] and why is not None and "does not verify" in why
    path.write_text(signed_result({"traces": 3}, key))
    assert read_raw_traces(path, key) == ([], "the result file has no `traces` list")


def test_scrubbed_env_is_an_allowlist_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-nope")
    monkeypatch.setenv("SOME_RANDOM_VAR", "x")
    env = scrubbed_env(
        workdir=tmp_path,
        cache_dir=tmp_path / "c",
        device="cuda",
        gpu=3,
        extra={"HF_TOKEN": "nope", "OK_VAR": "yes"},
    )
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert "SOME_RANDOM_VAR" not in env
    assert env["OK_VAR"] == "yes"
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert (Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "kernelarc").is_dir()
    cpu_env = scrubbed_env(workdir=tmp_path, cache_dir=tmp_path, device="cpu", gpu=3)
    assert cpu_env["CUDA_VISIBLE_DEVICES"] == ""


def test_limits_are_clamped_to_hard_limits() -> None:
    table = dict(ResourceLimits(address_space_bytes=None, cpu_seconds=10).table())
    assert len(table) == 5
    assert all(value >= 0 for value in table.values())


@pytest.mark.parametrize(
    ("setup_error", "signed", "exit_code", "jailed", "infra"),
    [
        pytest.param("uid has no name", True, 0, True, True, id="runner-reports-its-set-up"),
        pytest.param(None, True, 0, True, False, id="a-result-is-the-candidates"),
        pytest.param(None, True, 125, True, False, id="a-result-beats-the-exit-code"),
        pytest.param(None, False, 125, True, True, id="jail-set-up-failed"),
        pytest.param(None, False, 125, False, False, id="125-unjailed-means-nothing"),
        pytest.param(None, False, 2, False, True, id="bad-go-line-or-request"),
        pytest.param(None, False, 127, False, True, id="command-missing"),
        pytest.param(None, False, 1, True, False, id="judge-raised"),
        pytest.param(None, False, 137, True, False, id="judge-killed"),
        pytest.param(None, False, None, True, False, id="never-ended"),
    ],
)
def test_setup_failure_is_only_what_candidate_code_cannot_cause(
    tmp_path: Path,
    setup_error: str | None,
    signed: bool,
    exit_code: int | None,
    jailed: bool,
    infra: bool,
) -> None:
    key = new_result_key()
    path = tmp_path / "result.json"
    if signed:
        payload: dict[str, object] = {"traces": []}
        if setup_error is not None:
            payload["setup_error"] = setup_error
        path.write_text(signed_result(payload, key))
    result = read_signed_result(path, key)
    why = setup_failure(result, exit_code, jailed=jailed)
    assert (why is not None) is infra
    if setup_error is not None:
        assert why == setup_error
