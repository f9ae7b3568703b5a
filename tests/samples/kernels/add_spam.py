import sys

_LINE = "spam " * 40 + "\n"


def run(x, y):
    # ~400 KB per call on stdout and stderr: must not reach the result channel or flood the host.
    sys.stdout.write(_LINE * 2000)
    sys.stderr.write(_LINE * 2000)
    print("PASSED {\"traces\": []}")
    return x + y
