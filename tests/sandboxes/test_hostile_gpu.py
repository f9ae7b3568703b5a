"""The GPU part of the hostile suite: LocalSandbox on CUDA (run on the GPU machine, skipped here).

The three GPU samples (an illegal memory access in a Triton kernel, a grab of all device memory,
a Triton kernel that never finishes) misbehave on the first workload only. After a crash the
second workload must pass (a fresh worker with a clean CUDA context); after a hang it is TIMEOUT
without being run (a hang costs one deadline, issue 17). An honest control candidate evaluated
right after each must pass. The samples that attack the sandbox boundary run on CUDA as well,
because CUDA evaluations get no PID namespace: there the jail alone keeps them in bounds.
"""

from collections.abc import Iterator

import pytest
from hostile_suite import (
    TOKEN_VAR,
    HostWatch,
    Outcome,
    check_sample,
    describe,
    load_samples,
    run_suite,
)

from kernelarc.sandboxes import LocalSandbox

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900)]

GPU_SAMPLES = load_samples("cuda")
ON_CUDA_TOO = (
    "steal_env_keys",
    "write_outside",
    "double_fork_daemon",
    "connect_host",
    # the data path: on CUDA inputs and outputs travel by IPC handle (runner/cuda_ipc.py)
    "return_input",
    "mutate_input",
)
BOUNDARY = [s for s in load_samples("cpu") if s.name in ON_CUDA_TOO]


@pytest.fixture(scope="module")
def gpu_run() -> Iterator[tuple[dict[str, Outcome], dict[str, list[str]], list[str], set[str]]]:
    with HostWatch() as watch:
        samples = [*GPU_SAMPLES, *BOUNDARY]
        # Closed before the watch looks for processes: its spare runner carries the token.
        with LocalSandbox(extra_env={TOKEN_VAR: watch.token}) as sandbox:
            outcomes = run_suite([sandbox], samples, watch, device="cuda", always_control=True)
        problems = {s.name: check_sample(s, outcomes[s.name], watch) for s in samples}
        violations = watch.violations(o.result for o in outcomes.values())
    notes = {n for o in outcomes.values() for n in o.result.sandbox_notes}
    yield outcomes, problems, violations, notes


@pytest.mark.parametrize("name", [s.name for s in GPU_SAMPLES + BOUNDARY])
def test_cuda_sample_is_classified_and_the_next_candidate_passes(
    gpu_run: tuple[dict[str, Outcome], dict[str, list[str]], list[str], set[str]], name: str
) -> None:
    outcomes, problems, _, _ = gpu_run
    assert not problems[name], "\n".join(problems[name]) + "\n" + describe(outcomes)
    control = outcomes[name].control
    assert control is not None
    assert {t.evaluation.status for t in control.traces if t.evaluation} == {"PASSED"}


def test_cuda_evaluations_leave_the_host_untouched_and_run_jailed(
    gpu_run: tuple[dict[str, Outcome], dict[str, list[str]], list[str], set[str]],
) -> None:
    _, _, violations, notes = gpu_run
    assert violations == []
    assert not any(n.startswith("no jail") for n in notes), notes
