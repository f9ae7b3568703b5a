"""A wrong kernel that ships its own `kernelarc`, `sol_execbench` and `torch` packages and
forces its permissive `kernelarc.runner.correctness` into every module that imported the real one.
"""

import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "kernelarc.runner.correctness", _HERE / "kernelarc" / "runner" / "correctness.py"
)
_fake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fake)
sys.modules["kernelarc.runner.correctness"] = _fake
for _module in list(sys.modules.values()):
    for _name in ("compare", "type_mismatch", "find_lazy_output"):
        if hasattr(_module, _name) and getattr(_module, "__name__", "").startswith("kernelarc"):
            setattr(_module, _name, getattr(_fake, _name))


def run(x, y):
    return x * 3.0
