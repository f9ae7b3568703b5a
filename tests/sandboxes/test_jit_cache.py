"""The host's cache of candidates' JIT caches, with real LocalSandbox runners: the first
evaluation warms the caches in a throwaway worker before any input exists and stores them, a
later one (a new sandbox, as in a later campaign) starts with them, a poisoned entry is detected
and warmed again, and the warm-up changes no verdict. The candidate is a stand-in JIT compiler
(tests/samples/kernels/add_fake_jit.py) so no test waits for a real compile."""

import os
import sys
from pathlib import Path

import pytest

from kernelarc.problems.files import load_problem
from kernelarc.runner.jit_warmup import (
    MAX_WARM_UP_WORKERS,
    WARM_UP_PARALLEL_BYTES_CPU,
    warm_up_workers,
)
from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.build_cache import cache_key
from kernelarc.sandboxes.jit_cache import FILES, may_jit
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus, Solution, TimingConfig, Workload

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PROBLEM = load_problem(SAMPLES / "problems" / "vector_add")


def _request(source: str, device: str = "cpu") -> EvalRequest:
    solution = Solution.model_validate(
        {
            "name": "jit",
            "definition": PROBLEM.definition.name,
            "author": "tests",
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["LOCAL"],
                "entry_point": "k.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "k.py", "content": source}],
        }
    )
    return EvalRequest(
        definition=PROBLEM.definition,
        workloads=list(PROBLEM.workloads),
        solution=solution,
        device="cpu",
        correctness_rounds=2,
        timing=TimingConfig(warmup=0, iterations=2),
        problem_dir=str(PROBLEM.path),
    ).model_copy(update={"device": device})


def _fake_jit() -> EvalRequest:
    return _request((SAMPLES / "kernels" / "add_fake_jit.py").read_text())


def _evaluate(cache: Path, request: EvalRequest) -> EvalResult:
    with LocalSandbox(build_cache=cache, warm_spare=False) as sandbox:
        return sandbox.evaluate(request, timeout_s=300)


def _passed(result: EvalResult) -> bool:
    return all(
        t.evaluation is not None and t.evaluation.status == EvalStatus.PASSED for t in result.traces
    )


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def test_how_many_workers_warm_the_caches_at_once() -> None:
    two = _fake_jit()  # vector_add: two small workloads
    assert warm_up_workers(two) == min(2, _cores())
    assert warm_up_workers(two.model_copy(update={"workloads": two.workloads[:1]})) == 1
    many = two.model_copy(update={"workloads": [two.workloads[1]] * 9, "device": "cuda"})
    assert warm_up_workers(many) == min(MAX_WARM_UP_WORKERS, _cores())
    # Workloads too large to hold twice at once are warmed one after the other.
    huge = Workload(uuid="huge", axes={"N": WARM_UP_PARALLEL_BYTES_CPU // 8})
    assert warm_up_workers(two.model_copy(update={"workloads": [huge, huge]})) == 1


def test_which_candidates_may_jit() -> None:
    plain = _request("def run(x, y):\n    return x + y\n")
    assert not may_jit(plain)  # CPU: Triton is interpreted, nothing to keep
    assert may_jit(_request("import torch\nrun = torch.compile(lambda x, y: x + y)\n"))
    assert may_jit(plain.model_copy(update={"device": "cuda"}))


def test_a_candidate_starts_with_its_compiled_kernels_the_second_time(tmp_path: Path) -> None:
    first = _evaluate(tmp_path, _fake_jit())
    assert _passed(first), first.traces
    assert "JIT cache: stored 2 files" in first.sandbox_notes and not first.jit_cache_hit
    assert first.stage_s.get("jit_warm_up", 0.0) > 0
    # Compiled by the warm-up workers only (one per workload, at the same time: once or twice);
    # the evaluation's workers found it, and never saw the warm-up's inputs.
    compiled = first.stderr_tail.count("FAKE-JIT: compiled")
    assert 1 <= compiled <= warm_up_workers(_fake_jit()) == min(2, _cores())
    assert "FAKE-JIT: found b'compiled kernel'" in first.stderr_tail
    assert "compile-time inputs" not in first.stderr_tail

    again = _evaluate(tmp_path, _fake_jit())  # a new sandbox, as a later campaign would make
    assert _passed(again) and again.jit_cache_hit
    assert "JIT cache hit: 2 files" in again.sandbox_notes
    assert "FAKE-JIT: found b'compiled kernel'" in again.stderr_tail
    assert "FAKE-JIT: compiled" not in again.stderr_tail
    assert again.stage_s.get("jit_warm_up", 0.0) == 0.0  # nothing warmed again


def test_a_poisoned_jit_entry_is_detected_and_warmed_again(tmp_path: Path) -> None:
    _evaluate(tmp_path, _fake_jit())
    entry = tmp_path / "jit" / cache_key(_fake_jit(), sys.executable)
    kernel = next((entry / FILES).rglob("kernel.bin"))
    kernel.write_bytes(b"planted kernel!")  # the same size would not matter: the hash differs
    result = _evaluate(tmp_path, _fake_jit())
    assert _passed(result) and not result.jit_cache_hit
    assert any("failed its check" in n and "kernel.bin" in n for n in result.sandbox_notes)
    assert "FAKE-JIT: found b'compiled kernel'" in result.stderr_tail  # never the planted one
    assert "JIT cache: stored 2 files" in result.sandbox_notes


def test_the_warm_up_changes_no_verdict(tmp_path: Path) -> None:
    # Wrong on the first call of a worker: the warm-up's worker took a first call, but each
    # evaluation worker is a fresh process, so round 0 still sees the wrong answer.
    source = (
        "# compile (a JIT candidate for the cache)\n"
        "CALLS = [0]\n\n\ndef run(x, y):\n    CALLS[0] += 1\n"
        "    return x - y if CALLS[0] == 1 else x + y\n"
    )
    result = _evaluate(tmp_path, _request(source))
    assert result.stage_s.get("jit_warm_up", 0.0) > 0
    statuses = {t.evaluation.status for t in result.traces if t.evaluation is not None}
    assert statuses == {EvalStatus.INCORRECT_NUMERICAL}
