"""Correct, but writes 32 MiB to stdout and 32 MiB to stderr on its first call."""

import os
import sys

_CHUNK = ("flood " * 170 + "\n") * 1024  # ~1 MiB
_done = False


def run(x, y):
    global _done
    if not _done:
        _done = True
        for _ in range(32):
            sys.stdout.write(_CHUNK)
            os.write(2, _CHUNK.encode())
        sys.stdout.flush()
    return x + y
