"""LocalSandbox's warm spare runner, end to end with real runner processes (device cpu).

One sandbox runs a fixed sequence (each cold start is a torch import, so the tests share it):
a cold first evaluation; a warm one, from a spare another process of its uid had stopped; a
cold one after the spare was killed; cold ones for another timeout and another device; then
close(). Processes are found by a marker in their environment (extra_env), so nothing outside
this test is ever looked at or signalled. A last test kills a host process that holds a spare.
The sandboxes here run one-off runners (`resident_requests=0`): the spare's own life is under
test; a resident judge's is tests/sandboxes/test_resident_judge.py's.
"""

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from vector_add_request import vector_add_request

from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.runner_lifecycle import WARM_SPARE_NOTE
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT_S = 180.0
MARK_VAR = "KERNELARC_TEST_MARK"
APPEAR_S = 60.0
GONE_S = 10.0


def _request(device: str = "cpu") -> EvalRequest:
    return vector_add_request(
        "def run(x, y):\n    return x + y\n", name="add_return", device=device
    )


def _marked(marker: str) -> list[int]:
    """Pids of every process (unshare, jail or runner) whose environment holds the marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if f"{MARK_VAR}={marker}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _runner_pid(marker: str) -> int:
    """The marked `python -P -m kernelarc.runner` process itself (not the jail around it),
    waiting until it has started."""
    deadline = time.monotonic() + APPEAR_S
    while time.monotonic() < deadline:
        for pid in _marked(marker):
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if argv[1:4] == [b"-P", b"-m", b"kernelarc.runner"]:
                    return pid
        time.sleep(0.05)
    pytest.fail(f"no spare runner with marker {marker} appeared within {APPEAR_S:.0f} s")


def _gone(pids: list[int]) -> list[int]:
    """The pids still alive after up to GONE_S (exit and reaping are asynchronous)."""
    deadline = time.monotonic() + GONE_S
    while True:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return False


def _warm(result: EvalResult) -> bool:
    return any(n.startswith(WARM_SPARE_NOTE) for n in result.sandbox_notes)


def _statuses(result: EvalResult) -> set[EvalStatus]:
    return {t.evaluation.status for t in result.traces if t.evaluation is not None}


@dataclass(frozen=True)
class Sequence:
    results: dict[str, EvalResult]
    spare_pids: dict[str, int]
    """The spare runner waiting after each step."""
    spare_dirs: dict[str, Path]
    alive_after_close: list[int]


@pytest.fixture(scope="module")
def sequence() -> Sequence:
    marker = f"warm-{os.getpid()}-{secrets.token_hex(4)}"
    results: dict[str, EvalResult] = {}
    pids: dict[str, int] = {}
    dirs: dict[str, Path] = {}
    sandbox = LocalSandbox(extra_env={MARK_VAR: marker}, resident_requests=0)
    try:

        def step(name: str, request: EvalRequest, timeout_s: float = TIMEOUT_S) -> None:
            results[name] = sandbox.evaluate(request, timeout_s=timeout_s)
            pids[name] = _runner_pid(marker)
            dirs[name] = Path(os.readlink(f"/proc/{pids[name]}/cwd"))

        step("cold", _request())
        os.kill(pids["cold"], signal.SIGSTOP)  # as a same-uid process could (no PID ns on CUDA)
        step("warm", _request())
        os.kill(pids["warm"], signal.SIGKILL)
        assert _gone(_marked(marker)) == []  # the jail (if any) follows its runner
        step("after_death", _request())
        step("other_timeout", _request(), timeout_s=TIMEOUT_S + 1)
        step("other_device", _request("cuda"), timeout_s=TIMEOUT_S + 1)
    finally:
        sandbox.close()
    return Sequence(results, pids, dirs, _gone(_marked(marker)))


def test_first_evaluation_is_cold_and_the_next_takes_the_spare(sequence: Sequence) -> None:
    cold, warm = sequence.results["cold"], sequence.results["warm"]
    assert _statuses(cold) == {EvalStatus.PASSED}
    assert not _warm(cold)
    # The spare had been stopped (SIGSTOP) by another process: it was continued and served.
    assert _statuses(warm) == {EvalStatus.PASSED}, warm.traces[0].evaluation
    assert _warm(warm)
    # The spare waiting after the first step served it and ended; the next one has its own dir.
    assert not Path(f"/proc/{sequence.spare_pids['cold']}").exists()
    assert sequence.spare_pids["warm"] != sequence.spare_pids["cold"]
    assert sequence.spare_dirs["cold"] != sequence.spare_dirs["warm"]


def test_a_dead_spare_is_replaced_by_a_cold_start(sequence: Sequence) -> None:
    result = sequence.results["after_death"]
    assert _statuses(result) == {EvalStatus.PASSED}
    assert not _warm(result)


def test_a_spare_for_another_timeout_or_device_is_not_used(sequence: Sequence) -> None:
    assert not _warm(sequence.results["other_timeout"])
    assert _statuses(sequence.results["other_timeout"]) == {EvalStatus.PASSED}
    # No GPU here: only that the cuda request did not go to the cpu spare (a cold start).
    assert not _warm(sequence.results["other_device"])
    for name in ("after_death", "other_timeout"):  # the spares they left were discarded
        assert not Path(f"/proc/{sequence.spare_pids[name]}").exists()
        assert not sequence.spare_dirs[name].exists()


def test_close_ends_the_spare_and_removes_its_dir(sequence: Sequence) -> None:
    assert sequence.alive_after_close == []
    assert all(not d.exists() for d in sequence.spare_dirs.values())


_HOST = """
import sys, time
from kernelarc.sandboxes import LocalSandbox
sys.path[:0] = [sys.argv[1], str(__import__("pathlib").Path(sys.argv[1]).parent)]
from test_warm_spare import MARK_VAR, _request
pid_namespace = sys.argv[3] == "pid-ns"
sandbox = LocalSandbox(
    extra_env={MARK_VAR: sys.argv[2]}, pid_namespace=pid_namespace, resident_requests=0
)
sandbox.evaluate(_request(), timeout_s=180)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("namespace", ["pid-ns", "no-pid-ns"])
def test_spare_dies_with_its_host_process(namespace: str) -> None:
    """A host SIGKILLed (no close(), no finalizer) still takes its spare along: the spare's
    parent-death signal (through the jail, when there is one) and the EOF on its stdin; with a
    PID namespace (CPU) and without (the set-up CUDA evaluations get)."""
    marker = f"host-{os.getpid()}-{secrets.token_hex(4)}"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(Path(__file__).parent), marker, namespace],
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    spare_dir = None
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == b"ready"
        runner = _runner_pid(marker)
        spare_dir = Path(os.readlink(f"/proc/{runner}/cwd"))
        marked = _marked(marker)
        host.kill()
        host.wait()
        assert runner in marked
        assert _gone(marked) == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if spare_dir is not None:  # the next sandbox's sweep would (test_stale_dirs.py)
            subprocess.run(["rm", "-rf", str(spare_dir)], check=False)


def test_prepare_makes_the_first_evaluation_warm() -> None:
    """`prepare` starts the spare before any evaluation (on cpu too: nothing is timed yet); the
    first evaluation takes it, and close() ends what came after and removes every dir."""
    marker = f"prepare-{os.getpid()}-{secrets.token_hex(4)}"
    sandbox = LocalSandbox(extra_env={MARK_VAR: marker}, resident_requests=0)
    dirs: list[Path] = []
    try:
        sandbox.prepare("cpu", TIMEOUT_S)
        prepared = _runner_pid(marker)  # there before any request
        dirs.append(Path(os.readlink(f"/proc/{prepared}/cwd")))
        result = sandbox.evaluate(_request(), timeout_s=TIMEOUT_S)
        assert _statuses(result) == {EvalStatus.PASSED}, result.stderr_tail[-2000:]
        assert _warm(result), result.sandbox_notes
        assert _gone([prepared]) == []  # it served the request and ended
        following = _runner_pid(marker)  # the spare for the next one (after the end, on cpu)
        assert following != prepared
        dirs.append(Path(os.readlink(f"/proc/{following}/cwd")))
    finally:
        sandbox.close()
    assert _gone(_marked(marker)) == []
    assert [d for d in dirs if d.exists()] == []


def test_close_right_after_prepare_leaves_nothing() -> None:
    marker = f"prepare-close-{os.getpid()}-{secrets.token_hex(4)}"
    sandbox = LocalSandbox(extra_env={MARK_VAR: marker}, resident_requests=0)
    try:
        sandbox.prepare("cpu", TIMEOUT_S)
        spare_dir = Path(os.readlink(f"/proc/{_runner_pid(marker)}/cwd"))
    finally:
        sandbox.close()
    assert _gone(_marked(marker)) == []
    assert not spare_dir.exists()


def test_prepare_without_warm_spare_starts_nothing() -> None:
    marker = f"prepare-off-{os.getpid()}-{secrets.token_hex(4)}"
    with LocalSandbox(extra_env={MARK_VAR: marker}, warm_spare=False) as sandbox:
        sandbox.prepare("cpu", TIMEOUT_S)
        assert _marked(marker) == []
        result = sandbox.evaluate(_request(), timeout_s=TIMEOUT_S)
        assert _statuses(result) == {EvalStatus.PASSED}
        assert not _warm(result)  # a prepared spare would have served it
        assert _marked(marker) == []  # and none follows it
