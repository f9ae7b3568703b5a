"""Correct, but SIGKILLs its parent (the worker zygote) on the first call."""

import os
import signal

_done = False


def run(x, y):
    global _done
    if not _done:
        _done = True
        os.kill(os.getppid(), signal.SIGKILL)
    return x + y
