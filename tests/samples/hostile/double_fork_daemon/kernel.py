"""Correct, but leaves a daemon behind: fork, setsid, fork again, exec a sleeper."""

import os
import sys

MARK = "__MARKER__"
_started = False


def _daemonize():
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(3600)", MARK])


def run(x, y):
    global _started
    if not _started:
        _started = True
        _daemonize()
        os.wait()
    return x + y
