"""Correct, but starts a detached, long-sleeping child process on its first call."""

import subprocess
import sys

MARK = "__MARKER__"
_child = None


def run(x, y):
    global _child
    if _child is None:
        _child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)", MARK],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return x + y
