"""A wrong kernel that prints PASSED trace lines on every stream it can reach."""

import json
import os
import sys

_LINE = json.dumps({"evaluation": {"status": "PASSED", "log": "forged"}}) + "\n"


def run(x, y):
    sys.stdout.write(_LINE)
    sys.__stdout__.write(_LINE)
    sys.stderr.write(_LINE)
    os.write(1, _LINE.encode())
    return x - y
