"""SIGKILLs its whole process group: the worker, the zygote and the judge alike."""

import os
import signal


def run(x, y):
    os.killpg(0, signal.SIGKILL)
