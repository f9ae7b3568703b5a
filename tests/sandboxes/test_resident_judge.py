"""The resident judge (issue #16) through a real LocalSandbox: one runner process judges request
after request of one problem, keeps the problem's inputs, reference outputs and reference
latency, and still isolates each candidate (kernelarc/runner/resident.py).

Each test runs real runners (torch imported in the judge, candidates in forked workers); what
the judge kept is read from its signed report (`EvalResult.judge_cache`, `resident_request`).
"""

import os
import time
from collections.abc import Iterator

import pytest
from hostile_suite import HOSTILE, candidate_request, control_request, processes_with

from kernelarc.sandboxes import LocalSandbox
from kernelarc.schema import EvalResult, EvalStatus

pytestmark = pytest.mark.timeout(600)

TIMEOUT_S = 120.0
ROUNDS = 2  # hostile_suite's requests: 2 correctness rounds per workload
WORKLOADS = 2


def _statuses(result: EvalResult) -> list[EvalStatus]:
    return [t.evaluation.status for t in result.traces if t.evaluation is not None]


@pytest.fixture
def sandbox() -> Iterator[LocalSandbox]:
    with LocalSandbox(memory_limit_gb=4.0) as box:
        box.prepare("cpu", TIMEOUT_S)
        yield box


def test_the_reference_runs_once_for_every_later_candidate(sandbox: LocalSandbox) -> None:
    first = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    second = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    wrong = sandbox.evaluate(
        candidate_request("wrong", "def run(x, y):\n    return x - y\n"), timeout_s=TIMEOUT_S
    )
    assert _statuses(first) == [EvalStatus.PASSED] * WORKLOADS
    assert (first.resident_request, second.resident_request, wrong.resident_request) == (1, 2, 3)
    # Rounds and the timing probe per workload: drawn and run once, by the first request.
    calls = WORKLOADS * (ROUNDS + 1)
    assert first.judge_cache.get("reference_misses") == calls
    assert "reference_hits" not in first.judge_cache
    assert second.judge_cache.get("reference_hits") == calls
    assert second.judge_cache.get("input_hits") == calls
    assert "reference_misses" not in second.judge_cache
    assert second.judge_cache.get("reference_timing_hits") == WORKLOADS
    # The cached reference still judges: a wrong candidate fails on it.
    assert _statuses(wrong) == [EvalStatus.INCORRECT_NUMERICAL] * WORKLOADS
    assert wrong.judge_cache.get("reference_hits", 0) >= 1
    speedups = [t.evaluation.performance for t in second.traces if t.evaluation]
    assert all(p is not None and p.reference_latency_ms > 0 for p in speedups)


def test_a_crashed_worker_is_replaced_and_the_judge_stays(sandbox: LocalSandbox) -> None:
    crash = "import os, signal\n\ndef run(x, y):\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
    crashed = sandbox.evaluate(candidate_request("segv", crash), timeout_s=TIMEOUT_S)
    after = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert set(_statuses(crashed)) == {EvalStatus.RUNTIME_ERROR}
    assert "SIGSEGV" in crashed.traces[0].evaluation.log  # type: ignore[union-attr]
    assert _statuses(after) == [EvalStatus.PASSED] * WORKLOADS
    assert after.resident_request == 2  # the same judge
    # The crash ended each workload in its first round: only what it drew is kept.
    cache = after.judge_cache
    assert cache.get("reference_hits", 0) >= 1
    assert cache.get("reference_hits", 0) + cache.get("reference_misses", 0) == WORKLOADS * (
        ROUNDS + 1
    )


READ_JUDGE = """
import gc
import os

import torch

FOUND = []


def _judge_pid():
    zygote = os.getppid()
    with open(f"/proc/{zygote}/stat") as handle:
        return int(handle.read().rpartition(")")[2].split()[1])


def _try(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(64)
    except OSError as exc:
        return type(exc).__name__


def run(x, y):
    judge = _judge_pid()
    tried = {name: _try(f"/proc/{judge}/{name}") for name in ("mem", "environ", "maps")}
    print("tried the judge's memory:", {k: type(v).__name__ if isinstance(v, bytes) else v
                                         for k, v in tried.items()}, flush=True)
    # The reference outputs are x + y: look for them anywhere in this process.
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x and obj is not y:
            if torch.equal(obj, x + y):
                return obj
    return x - y
"""


def test_a_worker_cannot_read_the_reference_outputs_the_judge_keeps(
    sandbox: LocalSandbox,
) -> None:
    warm = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)  # the cache is filled
    assert warm.judge_cache.get("reference_misses")
    thief = sandbox.evaluate(candidate_request("thief", READ_JUDGE), timeout_s=TIMEOUT_S)
    assert thief.resident_request == 2
    assert _statuses(thief) == [EvalStatus.INCORRECT_NUMERICAL] * WORKLOADS
    assert "tried the judge's memory" in thief.stderr_tail
    assert "'mem': 'bytes'" not in thief.stderr_tail  # non-dumpable: no read of its memory


DAEMON = """
import os
import sys

_started = False


def run(x, y):
    global _started
    if not _started:
        _started = True
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time; time.sleep(600)", "__MARK__"])
            os._exit(0)
        os.wait()
    return x + y
"""


def test_what_a_candidate_leaves_running_is_gone_before_the_next(sandbox: LocalSandbox) -> None:
    mark = f"resident-daemon-{os.getpid()}-{time.monotonic_ns()}"
    source = DAEMON.replace("__MARK__", mark)
    first = sandbox.evaluate(candidate_request("daemon", source), timeout_s=TIMEOUT_S)
    assert _statuses(first) == [EvalStatus.PASSED] * WORKLOADS
    # The result is complete only after the judge's sweep: nothing of the daemon is left.
    assert processes_with(mark) == []
    after = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert after.resident_request == 2


def test_a_request_for_another_problem_gets_a_fresh_runner(sandbox: LocalSandbox) -> None:
    first = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    request = control_request()
    changed = request.definition.model_copy(
        update={"reference": request.definition.reference + "\n# another problem\n"}
    )
    other = request.model_copy(update={"definition": changed})
    second = sandbox.evaluate(other, timeout_s=TIMEOUT_S)
    assert first.resident_request == 1
    assert second.resident_request == 1  # not the first problem's judge
    assert "reference_hits" not in second.judge_cache
    assert _statuses(second) == [EvalStatus.PASSED] * WORKLOADS


def test_a_killed_judge_costs_one_request_not_the_sandbox(sandbox: LocalSandbox) -> None:
    kill_judge = """
import os, signal

def run(x, y):
    zygote = os.getppid()
    with open(f"/proc/{zygote}/stat") as handle:
        judge = int(handle.read().rpartition(")")[2].split()[1])
    os.kill(judge, signal.SIGKILL)
    return x + y
"""
    sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    killed = sandbox.evaluate(candidate_request("kill_judge", kill_judge), timeout_s=TIMEOUT_S)
    assert EvalStatus.PASSED not in _statuses(killed)
    after = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert _statuses(after) == [EvalStatus.PASSED] * WORKLOADS
    assert after.resident_request == 1  # a fresh judge replaced the killed one


def test_off_gives_every_request_a_fresh_runner() -> None:
    with LocalSandbox(memory_limit_gb=4.0, resident_requests=0) as box:
        results = [box.evaluate(control_request(), timeout_s=TIMEOUT_S) for _ in range(2)]
    assert [r.resident_request for r in results] == [0, 0]
    assert all(r.judge_cache == {} for r in results)


SHM_WRITER = """
import os

def run(x, y):
    path = "/dev/shm/left-by-__MARK__"
    seen = os.path.exists(path)
    with open(path, "w") as handle:
        handle.write("x")
    print("shm file already there:", seen, flush=True)
    return x + y
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the private /dev/shm is the jail's (root hosts)")
def test_the_jails_shared_memory_is_emptied_between_candidates(sandbox: LocalSandbox) -> None:
    source = SHM_WRITER.replace("__MARK__", f"{os.getpid()}")
    first = sandbox.evaluate(candidate_request("shm1", source), timeout_s=TIMEOUT_S)
    second = sandbox.evaluate(candidate_request("shm2", source), timeout_s=TIMEOUT_S)
    assert second.resident_request == 2
    said = [
        [line for line in r.stderr_tail.splitlines() if "shm file already there" in line]
        for r in (first, second)
    ]
    assert said[0][0].endswith("False") and said[0][-1].endswith("True")  # its own later calls
    assert said[1][0].endswith("False")  # not the first candidate's file


def test_the_private_shm_variable_is_the_jails() -> None:
    from kernelarc.runner import resident
    from kernelarc.sandboxes import jail

    assert resident.PRIVATE_SHM_VARIABLE == jail.PRIVATE_SHM_VARIABLE


SIBLINGS = """
import os
from pathlib import Path


def _parent_of(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def run(x, y):
    me, zygote = os.getpid(), os.getppid()
    siblings = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != me:
            try:
                if _parent_of(int(entry.name)) == zygote:
                    siblings.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
    for pid in siblings:
        try:
            with open(f"/proc/{pid}/mem", "rb") as handle:
                handle.read(1)
            print("sibling memory read", flush=True)
        except OSError as exc:
            print("sibling memory refused:", type(exc).__name__, flush=True)
    print("siblings:", len(siblings), flush=True)
    return x + y
"""


def test_the_next_worker_is_forked_ahead_and_out_of_the_candidates_reach(
    sandbox: LocalSandbox,
) -> None:
    first = sandbox.evaluate(candidate_request("siblings", SIBLINGS), timeout_s=TIMEOUT_S)
    second = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert _statuses(first) == [EvalStatus.PASSED] * WORKLOADS
    # While a candidate runs, the next one's worker already exists beside it ...
    assert "siblings: 1" in first.stderr_tail
    # ... and cannot be read or traced by it (not dumpable until its own candidate comes).
    assert "sibling memory refused" in first.stderr_tail
    assert "sibling memory read" not in first.stderr_tail
    assert (second.resident_request, _statuses(second)) == (2, [EvalStatus.PASSED] * WORKLOADS)


def test_a_candidate_that_pushes_its_judge_down_is_a_reward_hack(sandbox: LocalSandbox) -> None:
    source = (HOSTILE / "renice_judge" / "kernel.py").read_text()
    sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    pushed = sandbox.evaluate(candidate_request("renice", source), timeout_s=TIMEOUT_S)
    after = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert _statuses(pushed) == [EvalStatus.REWARD_HACK] * WORKLOADS
    log = pushed.traces[0].evaluation.log  # type: ignore[union-attr]
    assert "scheduling of the judge's own processes was changed" in log
    assert "nice 0 -> 19" in log
    # The judge cannot undo it, so it retired: the next candidate gets a fresh one.
    assert _statuses(after) == [EvalStatus.PASSED] * WORKLOADS
    assert after.resident_request == 1


STOP_SIBLINGS = SIBLINGS.replace("import os\n", "import os\nimport signal\n").replace(
    '    print("siblings:", len(siblings), flush=True)',
    "    for pid in siblings:\n        os.kill(pid, signal.SIGSTOP)\n"
    '    print("siblings:", len(siblings), flush=True)',
)


def test_a_candidate_that_stops_the_next_worker_is_a_reward_hack(sandbox: LocalSandbox) -> None:
    stopper = sandbox.evaluate(candidate_request("stopper", STOP_SIBLINGS), timeout_s=TIMEOUT_S)
    after = sandbox.evaluate(control_request(), timeout_s=TIMEOUT_S)
    assert "siblings: 1" in stopper.stderr_tail
    assert _statuses(stopper) == [EvalStatus.REWARD_HACK] * WORKLOADS
    assert "stopped" in stopper.traces[0].evaluation.log  # type: ignore[union-attr]
    # The next candidate is not blamed: it starts in a fresh judge with a worker of its own.
    assert _statuses(after) == [EvalStatus.PASSED] * WORKLOADS


# A candidate that computes the right thing only when torch.compile's modules were loaded before
# its own import (the worker inherited them from its zygote); a worker that must import them
# itself computes x - y and fails. It mentions torch.compile, as a compile candidate does.
_NEEDS_PRELOAD = """import sys

import torch

# torch.compile: was inductor imported before this module?
PRELOADED = "torch._inductor.compile_fx" in sys.modules


def run(x, y):
    return x + y if PRELOADED else x - y
"""


@pytest.mark.gpu
def test_cuda_workers_start_with_torch_compile_loaded() -> None:
    """On a GPU host every worker of a resident judge starts with torch.compile's modules loaded
    (a compile candidate's worker spent 6.5-8 s importing them on an H100, in each of its
    evaluations), the zygote still forked before CUDA: the controls before and after run their
    kernels in CUDA workers forked from the same zygote."""
    with LocalSandbox() as box:
        box.prepare("cuda", TIMEOUT_S)
        results = [
            box.evaluate(control_request("cuda"), timeout_s=TIMEOUT_S),
            box.evaluate(
                candidate_request("preloaded", _NEEDS_PRELOAD, "cuda"), timeout_s=TIMEOUT_S
            ),
            box.evaluate(control_request("cuda"), timeout_s=TIMEOUT_S),
        ]
    for result in results:
        logs = [t.evaluation.log[-800:] for t in result.traces if t.evaluation is not None]
        assert _statuses(result) == [EvalStatus.PASSED] * WORKLOADS, logs
    assert [r.resident_request for r in results] == [1, 2, 3]


def test_a_cpu_judge_loads_torch_compile_only_for_a_first_compile_request() -> None:
    """On the CPU a spare does not import torch.compile's modules for every candidate (a spare
    starts when the last evaluation ends, on the next candidate's path): a fresh runner whose
    first request mentions torch.compile loads them before its zygote; a later request's
    worker imports them itself."""
    with LocalSandbox(memory_limit_gb=4.0) as box:
        box.prepare("cpu", TIMEOUT_S)
        first = box.evaluate(candidate_request("preloaded", _NEEDS_PRELOAD), timeout_s=TIMEOUT_S)
    with LocalSandbox(memory_limit_gb=4.0) as box:
        box.prepare("cpu", TIMEOUT_S)
        box.evaluate(control_request(), timeout_s=TIMEOUT_S)
        later = box.evaluate(candidate_request("preloaded", _NEEDS_PRELOAD), timeout_s=TIMEOUT_S)
    assert _statuses(first) == [EvalStatus.PASSED] * WORKLOADS
    assert _statuses(later) == [EvalStatus.INCORRECT_NUMERICAL] * WORKLOADS
    assert later.resident_request == 2
