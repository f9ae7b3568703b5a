"""Convert one KernelBench file into a SOL-ExecBench problem dir.

Place in the flow: runs in a child forked per file by `convert_worker`, because a KernelBench
file is arbitrary code. Steps: scan the source (`source_scan`), take the shapes at the file's
sizes on the meta device and probe each size constant (`shape_probe`), choose the workload sizes
(`workload_sizes`), build the definition and workloads (`definition_builder`), run the result on
the CPU at its smallest workload (`cpu_check`), and write `definition.json`, `workload.jsonl`
(CPU sizes) and `workload_gpu.jsonl` (KernelBench's sizes and one more). GPU-sized tensors are
only ever meta tensors here.
"""

import inspect
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelarc.problems.files import load_problem
from kernelarc.problems.kernelbench.builder_source import KernelBenchSource
from kernelarc.problems.kernelbench.cpu_check import check_on_cpu
from kernelarc.problems.kernelbench.definition_builder import ProblemSpec, build_problem
from kernelarc.problems.kernelbench.naming import op_type_of
from kernelarc.problems.kernelbench.report import FailureCause, FileResult
from kernelarc.problems.kernelbench.shape_probe import probe_constants, take_snapshot
from kernelarc.problems.kernelbench.source_scan import ConversionError, scan_source
from kernelarc.problems.kernelbench.workload_sizes import plan_workloads

GPU_WORKLOADS = "workload_gpu.jsonl"


def forward_params(ns: Mapping[str, Any]) -> list[str]:
    """Positional parameter names of `Model.forward`, without `self`."""
    try:
        signature = inspect.signature(ns["Model"].forward)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in signature.parameters.values() if p.kind in kinds]
    return names[1:]


def convert_file(path: Path, label: str, name: str, level: int | None, out_dir: Path) -> FileResult:
    """Convert `path` into `out_dir` (created); the result says converted or why not."""
    started = time.monotonic()
    op_type = op_type_of(path, level)
    base: dict[str, Any] = {"source": label, "level": level, "name": name, "op_type": op_type}
    try:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConversionError(FailureCause.NOT_KERNELBENCH, f"cannot read: {exc}") from exc
        warnings, axes, n_cpu, n_gpu = _convert(text, label, name, op_type, out_dir)
    except ConversionError as exc:
        return FileResult(
            **base,
            converted=False,
            cause=exc.cause,
            reason=str(exc),
            seconds=time.monotonic() - started,
        )
    return FileResult(
        **base,
        converted=True,
        warnings=warnings,
        axes=axes,
        cpu_workloads=n_cpu,
        gpu_workloads=n_gpu,
        seconds=time.monotonic() - started,
    )


def _convert(
    text: str, label: str, name: str, op_type: str | None, out_dir: Path
) -> tuple[list[str], dict[str, str], int, int]:
    scanned = scan_source(text, label)
    candidates = {c.axis: [(c.constant, c.index)] for c in scanned.constants}
    base = take_snapshot(KernelBenchSource(text, label, candidates), {})
    probes = probe_constants(
        KernelBenchSource(text, label, candidates), base, list(scanned.constants)
    )
    # From here on, sizes are set per axis (a tied axis sets all its constants).
    source = KernelBenchSource(text, label, {a.axis: a.targets for a in probes.axes})
    plan = plan_workloads(source, probes)
    spec = ProblemSpec(
        name=name,
        label=label,
        op_type=op_type,
        docstring=scanned.docstring,
        source=text,
        forward_params=forward_params(source.namespace({})),
        probes=probes,
        plan=plan,
    )
    built = build_problem(spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "definition.json").write_text(
        json.dumps(built.definition, indent=2) + "\n", encoding="utf-8"
    )
    for file, lines in (
        ("workload.jsonl", built.cpu_workloads),
        (GPU_WORKLOADS, built.gpu_workloads),
    ):
        (out_dir / file).write_text("".join(json.dumps(w) + "\n" for w in lines), encoding="utf-8")
    try:
        problem = load_problem(out_dir)
        load_problem(out_dir, GPU_WORKLOADS)
    except Exception as exc:  # a bug of the converter, reported as this file's failure
        raise ConversionError(
            FailureCause.VERIFY_FAILED, f"written files do not load: {exc}"
        ) from exc
    smallest = plan.cpu[-1]
    warnings = check_on_cpu(problem.definition, problem.workloads[-1], source, smallest.sizes)
    return warnings, built.axes_summary, len(built.cpu_workloads), len(built.gpu_workloads)
