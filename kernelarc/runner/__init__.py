"""The in-sandbox evaluator: `python -P -m kernelarc.runner [--device D] REQUEST.json RESULT.json`.

The key (and with `--device`, a go line before it) arrives on stdin; see `__main__`.

It runs inside the sandbox the host (kernelarc.sandboxes) starts, imports torch/triton and only
`kernelarc.schema` from KernelArc. Two roles in separate processes: the judge (`__main__`,
`evaluate`) loads the reference, makes the inputs, compares and times the reference, and writes
RESULT.json signed with the host's key (`result_key`); solution workers (`worker`, forked by
`zygote`) are the only processes that import candidate code, and talk to the judge over
`channel`. This package's `__init__` stays import-free so the entry point can redirect stdout
before anything heavy loads.
"""
