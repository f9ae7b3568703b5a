"""Slots go to waiters by priority, then arrival (kernelarc/executor/turn_order.py): real
threads blocked on a real SlotQueue; the test waits until every one of them is queued before a
slot is freed, so the order served does not depend on thread timing."""

import threading
import time

from kernelarc.executor.turn_order import GUARD_PRIORITY, Priority, SlotQueue

_WAIT_LIMIT_S = 60.0


def _served_order(priorities: list[Priority]) -> list[int]:
    """Start one waiter per priority (in list order) on a queue whose only slot is taken, then
    free the slot once per waiter: the waiters' indices in the order they got it."""
    queue: SlotQueue[str] = SlotQueue()
    queue.put("slot")
    held = queue.get()
    served: list[int] = []
    lock = threading.Lock()

    def wait(index: int, priority: Priority) -> None:
        slot = queue.get(priority)
        with lock:
            served.append(index)
        queue.put(slot)  # the next waiter's turn

    threads = []
    for i, priority in enumerate(priorities):
        thread = threading.Thread(target=wait, args=(i, priority), daemon=True)
        thread.start()
        threads.append(thread)
        _until(lambda n=i + 1: queue.waiting() == n)  # queued in this order
    queue.put(held)
    for thread in threads:
        thread.join(_WAIT_LIMIT_S)
    assert not any(t.is_alive() for t in threads), "a waiter was never served"
    return served


def _until(condition: object) -> None:
    deadline = time.monotonic() + _WAIT_LIMIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.001)


def test_waiters_are_served_by_priority_then_arrival() -> None:
    # Second candidates of agents 0 and 1, then first candidates of agents 2 and 1, then a
    # guard run: the guard first, then breadth-first in team order.
    arrived: list[Priority] = [(1, 0), (1, 1), (0, 2), (0, 1), GUARD_PRIORITY]
    assert _served_order(arrived) == [4, 3, 2, 0, 1]


def test_equal_priorities_keep_their_arrival_order() -> None:
    assert _served_order([(0, 0), (0, 0), (0, 0), (0, 0)]) == [0, 1, 2, 3]


def test_a_free_slot_is_taken_at_once() -> None:
    queue: SlotQueue[int] = SlotQueue()
    queue.put(1)
    queue.put(2)
    assert {queue.get((5,)), queue.get()} == {1, 2}
    assert queue.waiting() == 0
