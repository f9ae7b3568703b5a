"""Sleeps (practically) forever while being imported: the worker never says it is ready."""

import time

time.sleep(10**6)


def run(x, y):
    return x + y
