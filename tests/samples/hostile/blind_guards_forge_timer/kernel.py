"""A slow kernel that stops the clock and blinds the worker's monkey-patch guards first."""

import gc
import time

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Guards" and hasattr(_obj, "_snapshot"):
        _obj._snapshot = ()
time.perf_counter = lambda: 1.0


def run(x, y):
    end = time.process_time() + 0.15
    while time.process_time() < end:
        pass
    return x + y
