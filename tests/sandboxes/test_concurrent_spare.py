"""LocalSandbox starting the next spare beside the running candidate (what CUDA evaluations get).

No GPU here, so the sandbox is forced to the CUDA rule on CPU (`spare_start="concurrent"`) and
runs without a PID namespace (as CUDA evaluations do), the case where a candidate sees every
process of the host. A hostile candidate attacks, for a few seconds, every process it can see
in this test's process tree (SIGSTOP, SIGKILL, ptrace attach) and tries to plant files in every
other sandbox temp dir; it returns a wrong sum if any attack succeeded. Meanwhile this test
watches /proc for the judges (runner processes whose parent is the jail) and their uids. Needs
the jail (root and a mount namespace): the hostile candidate runs only once the first, honest,
evaluation showed it is in use. Processes are found by a marker in their environment.

The candidate is kept here rather than in tests/samples/hostile/: it must know this test's pid
to confine its attack to this test's processes (unjailed, it would run as root), and the suite
runs sandboxes with the default, CPU, rule, where no spare coexists with a candidate.
"""

import os
import secrets
import threading
import time
from pathlib import Path

import pytest
from vector_add_request import vector_add_request

from kernelarc.sandboxes import LocalSandbox
from kernelarc.sandboxes.runner_lifecycle import WARM_SPARE_NOTE
from kernelarc.schema import EvalRequest, EvalResult, EvalStatus

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TIMEOUT_S = 180.0
MARK_VAR = "KERNELARC_TEST_MARK"
USER, SPARE_USER = (61500, 61500), (61501, 61501)

HONEST = "def run(x, y):\n    return x + y\n"

HOSTILE = '''"""Attacks every process of the host test's tree and every other sandbox dir."""

import ctypes
import glob
import os
import signal
import time
from pathlib import Path

HOST = __HOST_PID__
ATTACK_S = 8.0
_done = False
_won = []


def _parent(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _ancestors(pid):
    found = []
    for _ in range(64):
        pid = _parent(pid)
        if pid <= 1:
            break
        found.append(pid)
    return found


def _own_judge():
    """Its evaluation's judge: the ancestor whose parent is the jail."""
    for pid in _ancestors(os.getpid()):
        try:
            if b"jail.py" in Path(f"/proc/{_parent(pid)}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    return os.getpid()


def _attack_once(libc):
    judge = _own_judge()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        line = _ancestors(pid)
        if HOST not in line or pid == judge or judge in line or pid == os.getpid():
            continue  # not this test's, or its own evaluation (killing that only fails itself)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                _won.append(f"signal {sig} to {pid}")
            except OSError:
                pass
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            _won.append(f"ptrace {pid}")
    here = str(Path.cwd().resolve())
    for folder in glob.glob("/tmp/kernelarc_eval_*"):
        if str(Path(folder).resolve()) == here:
            continue
        for name in ("request.json", "planted.py"):
            try:
                Path(folder, name).write_text("planted")
                _won.append(f"wrote {folder}/{name}")
            except OSError:
                pass


def run(x, y):
    global _done
    if not _done:
        _done = True
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        deadline = time.monotonic() + ATTACK_S
        while time.monotonic() < deadline:
            _attack_once(libc)
            time.sleep(0.05)
    if _won:
        print("hostile candidate won:", _won[:5], flush=True)
        return x - y
    return x + y
'''


def _request(name: str, source: str) -> EvalRequest:
    return vector_add_request(source, name=name)


def _status(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


def _judges(marker: str) -> dict[int, int]:
    """pid -> uid of every marked runner whose parent is the jail (not a zygote or worker)."""
    found = {}
    needle = f"{MARK_VAR}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = _status(int(entry.name))
            parent = Path(f"/proc/{status['PPid']}/cmdline").read_bytes()
        except (OSError, KeyError):
            continue
        judge = argv[1:4] == [b"-P", b"-m", b"kernelarc.runner"] and b"jail.py" in parent
        if judge and status["State"].startswith(("R", "S", "D")):  # not stopped, not a zombie
            found[int(entry.name)] = int(status["Uid"].split()[0])
    return found


def _warm(result: EvalResult) -> bool:
    return any(n.startswith(WARM_SPARE_NOTE) for n in result.sandbox_notes)


def _statuses(result: EvalResult) -> set[EvalStatus]:
    return {t.evaluation.status for t in result.traces if t.evaluation is not None}


def test_spare_runs_beside_a_hostile_candidate_as_another_user_and_survives() -> None:
    marker = f"concurrent-{os.getpid()}-{secrets.token_hex(4)}"
    hostile = HOSTILE.replace("__HOST_PID__", str(os.getpid()))
    with LocalSandbox(
        extra_env={MARK_VAR: marker},
        pid_namespace=False,
        spare_start="concurrent",
        user=USER,
        spare_user=SPARE_USER,
        resident_requests=0,  # a spare beside a running candidate: one-off runners
    ) as sandbox:
        first = sandbox.evaluate(_request("honest", HONEST), timeout_s=TIMEOUT_S)
        assert _statuses(first) == {EvalStatus.PASSED}, first.stderr_tail[-2000:]
        if any(n.startswith("no jail") for n in first.sandbox_notes):
            pytest.skip(f"the jail is not in use here: {first.sandbox_notes}")

        seen: list[dict[int, int]] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                seen.append(_judges(marker))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            attacked = sandbox.evaluate(_request("hostile", hostile), timeout_s=TIMEOUT_S)
        finally:
            done.set()
            watcher.join()
        after_attack = _judges(marker)
        spare_files = {
            p.name for pid in after_attack for p in Path(os.readlink(f"/proc/{pid}/cwd")).iterdir()
        }
        last = sandbox.evaluate(_request("honest", HONEST), timeout_s=TIMEOUT_S)

    # The hostile candidate ran on the spare the first evaluation started, and lost every attack.
    assert _warm(attacked)
    assert _statuses(attacked) == {EvalStatus.PASSED}, attacked.traces[0].evaluation
    # (a), (b): while it ran, two judges were alive at once (its own and the next spare), as the
    # sandbox's two users.
    both = [s for s in seen if len(s) == 2]
    assert both, f"never saw a spare beside the running candidate: {seen[-3:]}"
    assert {frozenset(s.values()) for s in both} == {frozenset({USER[0], SPARE_USER[0]})}
    # The spare it saw is the one waiting afterwards (alive, not stopped), in a dir of its own
    # that holds nothing but its logs; the next evaluation used it and passed.
    assert len(after_attack) == 1
    (spare_pid,) = after_attack
    assert any(spare_pid in s for s in both)
    assert spare_files <= {"stdout.log", "stderr.log"}
    assert _warm(last)
    assert _statuses(last) == {EvalStatus.PASSED}, last.traces[0].evaluation
