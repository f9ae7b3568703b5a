"""The in-sandbox evaluator: `python -P -m kernelarc.runner REQUEST.json RESULT.json`.

It runs inside the sandbox the host (kernelarc.execution) starts, imports torch/triton and only
`kernelarc.schema` from KernelArc, and writes `{"traces": [...]}` (EvalResult-compatible) to
RESULT.json. This package's `__init__` stays import-free so the entry point can redirect stdout
before anything heavy loads.
"""
