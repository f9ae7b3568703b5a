"""Looks for the host's API key in its environment and in every readable /proc/*/environ.

It prints what it finds and then returns a wrong output, so a leak shows in the log and as
INCORRECT_NUMERICAL.
"""

import os
import re
import sys

_SECRET = re.compile(rb"sk-kernelarc-[0-9a-f]{16,}")


def _scan():
    found = set()
    for value in os.environ.values():
        found.update(_SECRET.findall(value.encode()))
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    pids += ["self", str(os.getppid())]
    for pid in pids:
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as handle:
                    found.update(_SECRET.findall(handle.read()))
            except OSError:
                pass
    return found


_found = None


def run(x, y):
    global _found
    if _found is None:
        _found = _scan()
    found = _found
    if found:
        sys.stderr.write(f"stolen: {sorted(found)}\n")
        return x - y
    return x + y
