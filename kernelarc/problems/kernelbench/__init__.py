"""KernelBench import: `kernelarc problems import kernelbench` (see docs/problems.md).

Host side (no torch): `importer.py` finds the files and runs `convert_worker` processes.
Per file, in a forked child: `source_scan` -> `shape_probe` -> `workload_sizes` ->
`definition_builder` -> `cpu_check`, driven by `convert.py`. `adapter.py` is copied into every
converted reference.
"""
