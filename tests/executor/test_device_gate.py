"""DeviceGate with real threads: the guard's runs take the device alone (after the screens
already running, before any screen that asks later), screens share it, and a watched run learns
how many screens ran beside it."""

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kernelarc.executor.device_gate import DeviceGate

WAIT_S = 10.0


def test_the_guard_waits_for_running_screens_and_later_screens_wait_for_the_guard() -> None:
    gate = DeviceGate(grace_s=0.0)
    events: list[str] = []
    screen_may_end = threading.Event()
    guard_may_end = threading.Event()

    def screen(name: str, until: threading.Event | None) -> None:
        with gate.shared():
            events.append(f"{name} start")
            if until is not None:
                assert until.wait(WAIT_S)
            events.append(f"{name} end")

    def guard() -> None:
        with gate.exclusive():
            events.append("guard start")
            assert guard_may_end.wait(WAIT_S)
            events.append("guard end")

    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(screen, "s1", screen_may_end)
        _until(lambda: gate.holders() == 1)
        guarded = pool.submit(guard)
        _until(lambda: gate.guards_waiting() == 1)
        second = pool.submit(screen, "s2", None)  # asks after the guard: waits behind it
        assert events == ["s1 start"]
        screen_may_end.set()
        _until(lambda: "guard start" in events)
        assert events == ["s1 start", "s1 end", "guard start"], "the guard ran beside a screen"
        guard_may_end.set()
        for future in (first, guarded, second):
            future.result(WAIT_S)
    assert events == ["s1 start", "s1 end", "guard start", "guard end", "s2 start", "s2 end"]


def test_the_next_run_of_a_guard_challenge_does_not_wait_for_a_screen_that_asked_between() -> None:
    gate = DeviceGate(grace_s=2.0)
    events: list[str] = []

    def screen() -> None:
        with gate.shared():
            events.append("screen")

    with ThreadPoolExecutor(max_workers=1) as pool:
        with gate.exclusive():
            events.append("guard 1")
            waiting = pool.submit(screen)
        _until(lambda: waiting.running())
        with gate.exclusive():  # within the grace: at once, the screen still waits
            events.append("guard 2")
        assert not waiting.done()
        assert events == ["guard 1", "guard 2"]
        waiting.result(2 * WAIT_S)  # and it runs once the grace is over
    assert events == ["guard 1", "guard 2", "screen"]


def test_screens_share_the_device() -> None:
    gate = DeviceGate()
    both_in = threading.Barrier(2, timeout=WAIT_S)

    def screen() -> None:
        with gate.shared():
            both_in.wait()  # raises BrokenBarrierError unless both hold the gate at once

    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(screen), pool.submit(screen)]:
            future.result(WAIT_S)
    assert gate.holders() == 0


def test_a_watched_run_counts_the_screens_beside_it() -> None:
    gate = DeviceGate()
    with gate.watched() as alone:
        pass
    assert alone.screens == 0
    # One screen runs when the watched run starts; one more starts during it.
    with gate.shared(), gate.watched() as beside, gate.shared():
        pass
    assert (beside.running_at_start, beside.started_during, beside.screens) == (1, 1, 2)


def _until(condition: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")
