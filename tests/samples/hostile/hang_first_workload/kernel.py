"""Hangs on the 16-element workload only; correct on the others."""

import time


def run(x, y):
    if x.numel() == 16:
        time.sleep(3600)
    return x + y
