"""Correct and honestly slow (~60 ms of CPU a call): the timing plausibility check must not fire."""

import time


def run(x, y):
    end = time.process_time() + 0.06
    while time.process_time() < end:
        pass
    return x + y
