"""The judge's watch over its processes' scheduling (kernelarc/runner/sched_state.py), on real
child processes: what a process of the same uid may change, the watch names."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kernelarc.runner.sched_state import SchedWatch, is_stopped, read_state


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_an_untouched_process_shows_no_change(child: subprocess.Popen[bytes]) -> None:
    watch = SchedWatch.snapshot({"judge": 0, "worker zygote": child.pid})
    assert set(watch.baseline) == {"judge", "worker zygote"}
    assert watch.baseline["judge"][0] == os.getpid()
    assert watch.changes() is None


def test_a_raised_nice_value_is_named(child: subprocess.Popen[bytes]) -> None:
    watch = SchedWatch.snapshot({"worker zygote": child.pid})
    before = os.getpriority(os.PRIO_PROCESS, child.pid)
    os.setpriority(os.PRIO_PROCESS, child.pid, min(19, before + 5))
    found = watch.changes()
    assert found is not None
    assert f"worker zygote (pid {child.pid}): nice {before} -> {min(19, before + 5)}" in found


def test_an_idle_policy_and_one_core_are_named(child: subprocess.Popen[bytes]) -> None:
    watch = SchedWatch.snapshot({"worker forked ahead": child.pid})
    os.sched_setscheduler(child.pid, os.SCHED_IDLE, os.sched_param(0))
    cores = sorted(os.sched_getaffinity(child.pid))
    os.sched_setaffinity(child.pid, {cores[0]})
    found = watch.changes()
    assert found is not None
    assert "policy SCHED_OTHER -> SCHED_IDLE" in found
    if len(cores) > 1:
        assert f"CPUs {','.join(map(str, cores))} -> {cores[0]}" in found


def test_a_stopped_process_is_named(child: subprocess.Popen[bytes]) -> None:
    watch = SchedWatch.snapshot({"worker zygote": child.pid})
    os.kill(child.pid, signal.SIGSTOP)
    try:
        give_up = time.monotonic() + 30.0  # the stop lands when the child is next scheduled
        while time.monotonic() < give_up:
            state = read_state(child.pid)
            if state is not None and state.stopped:
                break
            time.sleep(0.01)
        found = watch.changes()
        assert found is not None and "stopped" in found
        assert is_stopped(child.pid)
    finally:
        os.kill(child.pid, signal.SIGCONT)


def test_a_running_or_gone_process_is_not_stopped(child: subprocess.Popen[bytes]) -> None:
    assert not is_stopped(child.pid)
    child.kill()
    child.wait()
    assert not is_stopped(child.pid)


def test_a_forgotten_or_gone_process_is_not_reported(child: subprocess.Popen[bytes]) -> None:
    watch = SchedWatch.snapshot({"a": child.pid})
    watch.add("b", child.pid)
    os.setpriority(os.PRIO_PROCESS, child.pid, 19)
    watch.forget("a")
    assert watch.changes() is not None  # still watched as "b"
    child.kill()
    child.wait()
    assert watch.changes() is None  # gone: left to the code that talks to it
