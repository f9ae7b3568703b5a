"""SIGKILLs its own process."""

import os
import signal


def run(x, y):
    os.kill(os.getpid(), signal.SIGKILL)
